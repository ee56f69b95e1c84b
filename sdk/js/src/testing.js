// Test a plugin without building it: a fake host with an in-memory store,
// config values, the chat messages and log lines it received, and a `fetch`
// answered from routes the test gives (none reaches the network).
//
//   import { test } from 'node:test';
//   import assert from 'node:assert/strict';
//   import { FakeHost } from 'sandwit-plugin/testing';
//   import { plugin } from '../plugin.js';
//
//   test('count', async () => {
//     const host = new FakeHost();
//     assert.deepEqual(await host.call(plugin, 'count', { thing: 'cats' }), { kind: 'tool', value: 1 });
//   });
//
// Capabilities are granted as in the host: a call may use what the plugin
// requests (`plugin.capabilities`) and the host grants (`grants`), so a
// capability the plugin forgot to request is denied here as in production.

import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';

import { httpGranted, origin, refusal } from './grants.js';
import { setHost, ServiceError } from './host.js';
import { Ctx, callError } from './index.js';
import { encode, decode } from './values.js';

export { httpGranted } from './grants.js';

/** The host's services in memory, bound while a call runs. */
export class FakeHost {
  /**
   * @param {{ config?: object, grants?: string[], ctx?: object }} [options]
   *   grants default to store, config and chat; ctx to chat `chat-1`, user `user-1`.
   */
  constructor({ config = {}, grants = ['store', 'config', 'chat'], ctx = {} } = {}) {
    this.config = { ...config };
    this.grants = new Set(grants);
    this.ctx = { chatKey: 'chat-1', userId: 'user-1', ...ctx };
    /** `${scope}|${chat}|${user}|${key}` -> string or Uint8Array. */
    this.store = new Map();
    /** { kind: 'text', text } | { kind: 'image', mimeType, data } | { kind: 'system', message, triggerAgent } */
    this.sent = [];
    /** [level, message] */
    this.logs = [];
    /** The requests the plugin sent, refused ones too: { method, url, headers, body }. */
    this.requests = [];
    this.routes = [];
    this.requested = new Set();
  }

  /** Answers `fetch(url)` (exact URL, any method unless given) with `response`:
   * { status = 200, headers = {}, body = '' | Uint8Array, json }. */
  route(url, response = {}, method = undefined) {
    this.routes.push({ url, method, response });
    return this;
  }

  #need(capability) {
    if (!this.requested.has(capability) || !this.grants.has(capability)) {
      throw new ServiceError('denied', `capability \`${capability}\` was not granted`);
    }
  }

  #key(scope, key) {
    this.#need('store');
    if (!key) throw new ServiceError('invalid', 'the key is empty');
    const chat = scope === 'chat' || scope === 'chat-user' ? this.ctx.chatKey : '';
    const user = scope === 'user' || scope === 'chat-user' ? this.ctx.userId : '';
    if ((scope === 'user' || scope === 'chat-user') && !user) {
      throw new ServiceError('invalid', `scope ${scope} needs a user, and the call has none`);
    }
    return `${scope}|${chat}|${user}|${key}`;
  }

  storeGet(scope, key) {
    return this.store.get(this.#key(scope, key));
  }
  storeSet(scope, key, value) {
    this.store.set(this.#key(scope, key), value);
  }
  storeDelete(scope, key) {
    return this.store.delete(this.#key(scope, key));
  }
  storeKeys(scope) {
    const prefix = this.#key(scope, '\u0000').slice(0, -1);
    return [...this.store.keys()].filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length)).sort();
  }
  configGet(key) {
    this.#need('config');
    // As the host does: the value crosses as a value tree.
    return Object.hasOwn(this.config, key) ? decode(encode(this.config[key])) : undefined;
  }
  sendText(text) {
    this.#need('chat');
    this.sent.push({ kind: 'text', text });
  }
  sendImage(mimeType, data) {
    this.#need('chat');
    this.sent.push({ kind: 'image', mimeType, data });
  }
  pushSystem(message, triggerAgent) {
    this.#need('chat');
    this.sent.push({ kind: 'system', message, triggerAgent });
  }
  log(level, message) {
    this.logs.push([level, message]);
  }

  async #fetch(input, init = {}) {
    const request = new Request(input, init);
    const body = init.body === undefined ? new Uint8Array() : new Uint8Array(await request.arrayBuffer());
    this.requests.push({ method: request.method, url: request.url, headers: Object.fromEntries(request.headers), body });
    const { host, port } = origin(request.url);
    if (!httpGranted(this.requested, host, port) || !httpGranted(this.grants, host, port)) {
      throw new TypeError(`fetch ${request.url}: refused: ${refusal([...this.requested], request.url)}`);
    }
    const found = this.routes.find((r) => r.url === request.url && (!r.method || r.method === request.method));
    if (!found) throw new TypeError(`fetch: no route for ${request.method} ${request.url} in the test's FakeHost`);
    const { status = 200, headers = {}, body: content = '', json } = found.response;
    if (json !== undefined) {
      return new Response(JSON.stringify(json), { status, headers: { 'content-type': 'application/json', ...headers } });
    }
    return new Response(content, { status, headers });
  }

  async #bound(plugin, run) {
    this.requested = new Set(plugin.capabilities);
    setHost(this);
    const realFetch = globalThis.fetch;
    globalThis.fetch = (input, init) => this.#fetch(input, init);
    try {
      return await run(new Ctx(this.ctx));
    } finally {
      globalThis.fetch = realFetch;
      setHost(null);
    }
  }

  /**
   * Calls `method` as the host does: the arguments and a tool's value cross
   * as value trees, and an exception becomes the call's error, thrown as
   * `CallFailed` with the `call-error` case the host would report.
   * @returns {Promise<{ kind: string, value: any }>}
   */
  async call(plugin, method, args = {}) {
    loadTypeSchemas();
    plugin.manifest();
    return this.#bound(plugin, async (ctx) => {
      try {
        const { kind, value } = await plugin.invoke(ctx, method, decode(encode(args)));
        return { kind, value: kind === 'tool' ? decode(encode(value)) : value };
      } catch (e) {
        const error = callError(e);
        throw new CallFailed(error.tag, error.val);
      }
    });
  }

  /** The prompt-inject hook's text for this host's context. */
  promptInject(plugin) {
    return this.#bound(plugin, (ctx) => plugin.promptText(ctx));
  }

  /** The methods the collect-methods hook leaves for this host's context. */
  availableMethods(plugin) {
    return this.#bound(plugin, (ctx) => plugin.availableMethods(ctx));
  }
}

/** A TypeScript plugin's parameter schemas, from the last build
 * (`target/sandwit/schemas.json` of the working directory), as the
 * component has them. */
function loadTypeSchemas() {
  if (globalThis.__sandwitTypeSchemas) return;
  const built = resolve('target/sandwit/schemas.json');
  if (existsSync(built)) globalThis.__sandwitTypeSchemas = JSON.parse(readFileSync(built, 'utf8')).definitions;
}

/** A call's error, as the host would report it: `kind` is the `call-error` case. */
export class CallFailed extends Error {
  constructor(kind, message) {
    super(`${kind}: ${message}`);
    this.name = 'CallFailed';
    this.kind = kind;
    this.detail = message;
  }
}
