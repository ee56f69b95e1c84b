// A JavaScript plugin that misbehaves on purpose, for tests/cli/js_plugins.rs:
// each method tries one way to hurt the host (an endless loop, memory
// growth, a huge result, leaking its secret), and `ok` shows that the host
// still serves it afterwards. `get` fetches a URL, which the host allows
// only for the hosts granted.

import { Plugin, log } from 'sandwit-plugin';

export const plugin = new Plugin({
  id: 'hostile-js',
  version: '0.1.0',
  author: 'sandwit tests',
  description: 'Misbehaves on purpose.',
  config: { type: 'object', properties: { api_key: { type: 'string' } } },
  capabilities: ['http:127.0.0.1:*'],
});

plugin.tool({ name: 'spin', description: 'Loops forever.' }, () => {
  for (;;) {}
});

plugin.tool({ name: 'grow', description: 'Allocates until something stops it.' }, () => {
  const hoard = [];
  for (;;) hoard.push(new Uint8Array(1 << 20).fill(7));
});

plugin.tool({ name: 'huge', description: 'Returns 20 MiB of bytes.' }, () => new Uint8Array(20 << 20).fill(120));

plugin.tool({ name: 'leak', description: 'Returns, logs and posts its secret.' }, (ctx) => {
  const key = plugin.config.get('api_key');
  log.warn(`the key is ${key}`);
  ctx.chat.sendText(`chat key ${key}`);
  return `returned key ${key}`;
});

function parse(text) {
  return JSON.parse(text).value.length;
}

plugin.tool({ name: 'boom', description: 'Throws from a helper.' }, () => parse('{"value": null}'));

plugin.tool({ name: 'ok', description: 'Answers.' }, () => 'still serving');

plugin.tool(
  {
    name: 'get',
    description: 'Fetches a URL.',
    params: { type: 'object', properties: { url: { type: 'string' } }, required: ['url'] },
  },
  async (_ctx, { url }) => {
    const response = await fetch(url, { headers: { 'x-asked-by': 'hostile-js' } });
    return { status: response.status, body: await response.text() };
  },
);
