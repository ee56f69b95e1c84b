// A per-user jotter, the JavaScript twin of the Python `memo` example: short
// notes kept in the host's store for the current user, across chats, and
// their count injected into the chat's prompt.

import { Plugin, PluginError } from 'sandwit-plugin';

export const plugin = new Plugin({
  id: 'jotter',
  name: 'Jotter',
  version: '0.1.0',
  author: 'sandwit',
  description: 'Keeps short notes for each user.',
});

const MAX_JOTTINGS = 100;
const MAX_CHARS = 1000;

const jottings = (ctx) => ctx.store.getJson('jottings', [], { scope: 'user' });

plugin.tool(
  {
    name: 'jot',
    description: 'Save a note for the current user, kept across chats.',
    params: {
      type: 'object',
      properties: { text: { type: 'string', description: `The note (at most ${MAX_CHARS} characters).` } },
      required: ['text'],
    },
    returns: { type: 'integer', description: 'How many notes the user has now.' },
  },
  (ctx, { text }) => {
    if (!ctx.userId) throw new PluginError('notes need a user', 'denied');
    const note = text.trim();
    if (!note || note.length > MAX_CHARS) throw new PluginError(`a note is 1 to ${MAX_CHARS} characters`, 'invalid-arguments');
    const all = jottings(ctx);
    if (all.length >= MAX_JOTTINGS) throw new PluginError(`the user has ${MAX_JOTTINGS} notes; clear some first`);
    all.push(note);
    ctx.store.setJson('jottings', all, { scope: 'user' });
    return all.length;
  },
);

plugin.tool(
  {
    name: 'jottings',
    description: "List the current user's notes, oldest first.",
    returns: { type: 'array', items: { type: 'string' } },
  },
  (ctx) => (ctx.userId ? jottings(ctx) : []),
);

plugin.tool(
  { name: 'clear_jottings', description: "Forget all of the current user's notes.", returns: { type: 'boolean' } },
  (ctx) => (ctx.userId ? ctx.store.delete('jottings', { scope: 'user' }) : false),
);

plugin.promptInject((ctx) => {
  if (!ctx.userId) return undefined;
  const count = jottings(ctx).length;
  return count ? `The user has ${count} note(s); jottings() reads them.` : undefined;
});
