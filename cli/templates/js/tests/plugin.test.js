// Tests of the plugin on a fake host: `npm test`.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { FakeHost } from 'sandwit-plugin/testing';
import { plugin } from '../plugin.js';

test('greets by name', async () => {
  assert.deepEqual(await new FakeHost().call(plugin, 'greet', { name: 'Ada' }), { kind: 'tool', value: 'Hello, Ada!' });
});
