// The SDK on its fake host: manifests, values, results by kind, errors,
// store scopes, config and secrets, capabilities, hooks and fetch.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Image, Plugin, PluginError, log } from '../src/index.js';
import { encode, decode } from '../src/values.js';
import { report } from '../src/errors.js';
import { CallFailed, FakeHost } from '../src/testing.js';

const WHO = { author: 'tests', description: 'A plugin of the tests.' };

function tally() {
  const plugin = new Plugin({
    id: 'tally',
    name: 'Tally',
    version: '0.1.0',
    ...WHO,
    config: { type: 'object', properties: { step: { type: 'integer', default: 1 }, api_key: { type: 'string' } } },
  });
  plugin.tool(
    {
      name: 'count',
      description: 'Count one more of a thing.',
      params: {
        type: 'object',
        properties: { thing: { type: 'string', description: 'What to count.' }, by: { type: 'integer' } },
        required: ['thing'],
      },
      returns: { type: 'integer' },
    },
    (ctx, { thing, by }) => {
      const n = (ctx.store.getJson(thing, 0) ?? 0) + (by ?? plugin.config.get('step'));
      ctx.store.setJson(thing, n);
      log.info('counted', thing);
      return n;
    },
  );
  return plugin;
}

test('the manifest lists methods with their schemas, in order, and the capabilities asked for', () => {
  const m = tally().manifest();
  assert.equal(m.id, 'tally');
  assert.deepEqual(m.capabilities, ['store', 'chat', 'config']);
  const [count] = m.methods;
  assert.equal(count.kind, 'tool');
  assert.deepEqual(
    count.params.map((p) => [p.name, JSON.parse(p.schema).type, p.required]),
    [['thing', 'string', true], ['by', 'integer', false]],
  );
  assert.match(count.docstring, /thing \(string\): What to count\./);
  assert.match(count.docstring, /by \(integer, optional\)/);
  assert.equal(JSON.parse(count.returns).type, 'integer');
  // A config property named like a secret is one, which the host redacts.
  const config = JSON.parse(m.configSchema).properties;
  assert.deepEqual([config.api_key.secret, config.api_key.format], [true, 'password']);
  assert.equal(config.step.secret, undefined);
});

test("a tool keeps data in the store of the call's chat, with the config's default", async () => {
  const plugin = tally();
  const host = new FakeHost();
  assert.deepEqual(await host.call(plugin, 'count', { thing: 'cats' }), { kind: 'tool', value: 1 });
  assert.deepEqual(await host.call(plugin, 'count', { thing: 'cats', by: 5 }), { kind: 'tool', value: 6 });
  assert.deepEqual(host.logs, [['info', 'counted cats'], ['info', 'counted cats']]);
  const other = new FakeHost({ config: { step: 10 }, ctx: { chatKey: 'chat-2' } });
  assert.deepEqual(await other.call(plugin, 'count', { thing: 'cats' }), { kind: 'tool', value: 10 });
});

test('a capability not granted is denied, as the host denies it', async () => {
  const host = new FakeHost({ grants: ['config'] });
  await assert.rejects(host.call(tally(), 'count', { thing: 'cats' }), (e) => e instanceof CallFailed && e.kind === 'denied');
});

test('values round-trip through the value tree', () => {
  const value = { a: [1, 2.5, 'x', null, true], b: new Uint8Array([1, 2]), big: 2n ** 60n, nested: { ok: false } };
  assert.deepEqual(decode(encode(value)), value);
  assert.throws(() => encode({ f: () => 1 }), /value\.f: a function is not a value/);
  assert.throws(() => encode(2n ** 64n), /does not fit in 64 bits/);
  let deep = [];
  for (let i = 0; i < 70; i++) deep = [deep];
  assert.throws(() => encode(deep), /nested more than 64 deep/);
  // A key spelled __proto__ stays a key.
  const tricky = decode(encode(JSON.parse('{"__proto__": {"polluted": 1}}')));
  assert.equal(Object.keys(tricky)[0], '__proto__');
  assert.equal({}.polluted, undefined);
});

test('results are checked by kind, and multimodal parts are built', async () => {
  const plugin = new Plugin({ id: 'kinds', version: '0.1.0', ...WHO });
  plugin.agent({ name: 'wrong', description: 'Returns a number.' }, () => 42);
  plugin.multimodalAgent({ name: 'look', description: 'Shows a picture.' }, () => [
    'Here:',
    new Image(new Uint8Array([137, 80, 78, 71]), 'image/png'),
    { type: 'image_url', image_url: { url: 'https://example.org/a.png' } },
  ]);
  const host = new FakeHost();
  await assert.rejects(host.call(plugin, 'wrong'), /failed: .*method wrong is a agent method and returned a number, not a string/);
  const { kind, value } = await host.call(plugin, 'look');
  assert.equal(kind, 'multimodal-agent');
  assert.deepEqual(value.map((p) => p.tag), ['text', 'image', 'image-url']);
  assert.equal(value[1].val.mimeType, 'image/png');
});

test("an exception fails the call with its name, message and the plugin's frames", async () => {
  const plugin = new Plugin({ id: 'oops', version: '0.1.0', ...WHO });
  function helper(x) {
    return x.missing.field;
  }
  plugin.tool({ name: 'boom', description: 'Throws.' }, () => helper({}));
  plugin.tool({ name: 'refuse', description: 'Refuses.' }, () => {
    throw new PluginError('no such city', 'invalid-arguments');
  });
  const host = new FakeHost();
  const failed = await host.call(plugin, 'boom').catch((e) => e);
  assert.equal(failed.kind, 'failed');
  assert.match(failed.detail, /^TypeError: Cannot read properties of undefined/);
  assert.match(failed.detail, /at helper \(tests\/sdk\.test\.js:\d+:\d+\)/);
  assert.doesNotMatch(failed.detail, /src\/index\.js/);
  const refused = await host.call(plugin, 'refuse').catch((e) => e);
  assert.equal(refused.kind, 'invalid-arguments');
  assert.equal(refused.detail, 'no such city');
  await assert.rejects(host.call(plugin, 'nothing'), (e) => e.kind === 'unknown-method');
});

test("SpiderMonkey stacks are mapped through the bundle's source map", () => {
  // One segment: bundle line 3, column 0 is sources[0] (plugin.ts) line 10, column 4.
  globalThis.__sandwitSourceMap = { sources: ['../../plugin.ts', '../../node_modules/lib/x.js'], mappings: ';;AASI;ACAA' };
  try {
    const error = new TypeError('bad');
    error.stack = 'helper@component.js:3:1\nlib@component.js:4:1\nexport_plugin$invoke@sources/initializer.js:8627:29\n';
    assert.equal(report(error), "TypeError: bad\nStack (the plugin's frames, innermost first):\n  at helper (plugin.ts:10:5)");
  } finally {
    delete globalThis.__sandwitSourceMap;
  }
});

test('whatever is thrown is reported by what it is, cut', () => {
  assert.equal(report(Symbol('gone')), 'thrown value: Symbol(gone)');
  assert.equal(report(Symbol()), 'thrown value: Symbol()');
  assert.equal(report(undefined), 'thrown value: undefined');
  assert.equal(report({ code: 7 }), 'thrown value: {"code":7}');
  assert.equal(report(10n), 'thrown value: 10');
  const hostile = { toString() { throw new Error('no'); }, toJSON() { throw new Error('no'); } };
  assert.equal(report(hostile), 'thrown value: [object Object]');
  const named = new Error('m');
  named.name = 'N'.repeat(1 << 20);
  assert.equal(report(named).split(':')[0].length, 200);
  const symbolic = new Error('m');
  symbolic.name = Symbol('odd');
  assert.match(report(symbolic), /^Symbol\(odd\): m/);
  assert.equal(report(new Error('x'.repeat(1 << 20))).split('\n')[0], `Error: ${'x'.repeat(2000)}`);
});

test('hooks see the context and the store', async () => {
  const plugin = tally();
  plugin.promptInject((ctx) => `chat ${ctx.chatKey} has ${ctx.store.keys().length} counters`);
  plugin.collectMethods((ctx) => (ctx.userId === 'admin' ? ['count'] : []));
  const host = new FakeHost();
  await host.call(plugin, 'count', { thing: 'a' });
  assert.equal(await host.promptInject(plugin), 'chat chat-1 has 1 counters');
  assert.deepEqual(await host.availableMethods(plugin), []);
  assert.deepEqual(await new FakeHost({ ctx: { userId: 'admin' } }).availableMethods(plugin), ['count']);
});

test('fetch reaches only hosts both requested and granted', async () => {
  const plugin = new Plugin({ id: 'weather', version: '0.1.0', capabilities: ['http:api.example.com'], ...WHO });
  plugin.tool({ name: 'now', description: 'The weather now.' }, async () => {
    const response = await fetch('https://api.example.com/now', { headers: { 'x-api-key': 'k' } });
    return (await response.json()).temperature;
  });
  plugin.tool({ name: 'elsewhere', description: 'Asks another host.' }, async () => (await fetch('https://evil.example.net/')).status);
  const host = new FakeHost({ grants: ['http:api.example.com'] });
  host.route('https://api.example.com/now', { json: { temperature: 17.5 } });
  assert.deepEqual(await host.call(plugin, 'now'), { kind: 'tool', value: 17.5 });
  assert.equal(host.requests[0].headers['x-api-key'], 'k');
  await assert.rejects(host.call(plugin, 'elsewhere'), /does not ask for `http:evil\.example\.net` \(its http capabilities: http:api\.example\.com\)/);
  await assert.rejects(new FakeHost().call(plugin, 'now'), /the operator may not have granted `http:api\.example\.com`/);
});

test('bad declarations are refused where they are made', () => {
  const plugin = new Plugin({ id: 'bad', version: '0.1.0', ...WHO });
  assert.throws(() => new Plugin({ id: 'Bad Id' }), /plugin id "Bad Id"/);
  assert.throws(() => new Plugin({ id: 'anon', description: 'x' }), /plugin anon: author is required/);
  assert.throws(() => plugin.tool({ name: 'sandwit_x', description: 'x' }, () => 1), /not starting with sandwit_/);
  assert.throws(() => plugin.tool({ name: 'x' }, () => 1), /a description/);
  assert.throws(() => plugin.method('robot', { name: 'x', description: 'x' }, () => 1), /method kind "robot"/);
  plugin.tool({ name: 'typed', description: 'x', params: 'Args' }, () => 1);
  assert.throws(() => plugin.manifest(), /names the TypeScript type Args, but no type schemas were generated/);
});

test("TypeScript types' schemas are inlined for the host", () => {
  globalThis.__sandwitTypeSchemas = {
    Args: { type: 'object', properties: { where: { $ref: '#/definitions/Place', description: 'Where.' } }, required: ['where'] },
    Place: { type: 'object', properties: { city: { type: 'string' } } },
  };
  try {
    const plugin = new Plugin({ id: 'typed', version: '0.1.0', ...WHO });
    plugin.tool({ name: 'go', description: 'Goes.', params: 'Args' }, () => 1);
    const [go] = plugin.manifest().methods;
    assert.deepEqual(JSON.parse(go.params[0].schema), { type: 'object', properties: { city: { type: 'string' } }, description: 'Where.' });
  } finally {
    delete globalThis.__sandwitTypeSchemas;
  }
});
