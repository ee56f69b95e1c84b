import { test } from 'node:test';
import assert from 'node:assert/strict';

import { FakeHost } from 'sandwit-plugin/testing';
import { plugin } from '../plugin.js';

test('notes are kept per user, across chats', async () => {
  const host = new FakeHost();
  assert.deepEqual(await host.call(plugin, 'jot', { text: ' Ada prefers tea. ' }), { kind: 'tool', value: 1 });
  const elsewhere = new FakeHost({ ctx: { chatKey: 'chat-2', userId: 'user-1' } });
  elsewhere.store = host.store;
  assert.deepEqual(await elsewhere.call(plugin, 'jottings'), { kind: 'tool', value: ['Ada prefers tea.'] });
  assert.equal(await host.promptInject(plugin), 'The user has 1 note(s); jottings() reads them.');
  await assert.rejects(host.call(plugin, 'jot', { text: '  ' }), (e) => e.kind === 'invalid-arguments');
});
