// Tests of the plugin on a fake host: `npm test` (after a build, which
// generates the parameters' schemas the fake host checks the plugin with).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { FakeHost } from 'sandwit-plugin/testing';
import { plugin } from '../plugin.ts';

test('greets by name', async () => {
  assert.deepEqual(await new FakeHost().call(plugin, 'greet', { name: 'Ada', times: 2 }), {
    kind: 'tool',
    value: 'Hello, Hello, Ada!',
  });
});
