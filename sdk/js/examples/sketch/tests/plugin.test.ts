import { test } from 'node:test';
import assert from 'node:assert/strict';

import { FakeHost } from 'sandwit-plugin/testing';
import { plugin } from '../plugin.ts';

test('draws a PNG and captions it', async () => {
  const { kind, value } = await new FakeHost().call(plugin, 'sketch_bars', { values: [3, 1, 4, 1, 5], title: 'Pi' });
  assert.equal(kind, 'multimodal-agent');
  assert.equal(value[0].val, 'Pi: 5 values, the largest 5.');
  assert.deepEqual([...value[1].val.data.subarray(0, 8)], [137, 80, 78, 71, 13, 10, 26, 10]);
});

test('posts the chart to the chat', async () => {
  const host = new FakeHost();
  await host.call(plugin, 'post_bars', { values: [1, 2] });
  assert.equal(host.sent[0].kind, 'image');
  assert.ok(host.sent[0].kind === 'image' && host.sent[0].data.length > 1000);
});
