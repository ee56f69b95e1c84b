// sandwit-plugin: JavaScript and TypeScript plugins for sandwit.
//
// A plugin module exports a `Plugin` (as `plugin` or as its default export);
// `sandwit plugin build` bundles it with this SDK and builds a component of
// the world sandwit:js-sdk/plugin@0.2.0 with componentize-js. The SDK talks
// to the host only through the backend of host.js, so the same plugin runs
// in Node's test runner on the fake host of testing.js.

import { host, ServiceError } from './host.js';
import { report } from './errors.js';

export { ServiceError } from './host.js';
export { report } from './errors.js';

/** What the agent framework does with a method's result. */
export const MethodKind = Object.freeze({
  /** Any value, handed back to the calling code, which goes on. */
  TOOL: 'tool',
  /** A string for the AI: the script stops and a new round starts. */
  AGENT: 'agent',
  /** A string handed back to the code and recorded as a system message. */
  BEHAVIOR: 'behavior',
  /** Text and images for the AI: the script stops and a new round starts. */
  MULTIMODAL_AGENT: 'multimodal-agent',
});
const KINDS = new Set(Object.values(MethodKind));

/** A method's failure, for the AI: `kind` is `failed` (the default),
 * `invalid-arguments` or `denied`. */
export class PluginError extends Error {
  constructor(message, kind = 'failed') {
    super(message);
    this.name = 'PluginError';
    if (!['failed', 'invalid-arguments', 'denied', 'unknown-method'].includes(kind)) {
      throw new TypeError(`PluginError kind ${JSON.stringify(kind)}: one of failed, invalid-arguments, denied`);
    }
    this.kind = kind;
  }
}

/** An image for a multimodal result or a chat message: its bytes and MIME type. */
export class Image {
  constructor(data, mimeType = 'image/png') {
    if (!(data instanceof Uint8Array)) throw new TypeError('Image data must be a Uint8Array');
    this.data = data;
    this.mimeType = mimeType;
  }
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const PLUGIN_ID = /^[a-z][a-z0-9_-]*$/;
/** A config property named like this is a secret unless it says otherwise. */
const SECRET_NAME = /key|token|secret|password/i;
const SCOPES = new Set(['chat', 'user', 'chat-user', 'global']);

/** A store scoped by the host to the current call's chat and user. */
class Store {
  #scope(options) {
    const scope = options?.scope ?? 'chat';
    if (!SCOPES.has(scope)) throw new TypeError(`store scope ${JSON.stringify(scope)}: one of chat, user, chat-user, global`);
    return scope;
  }
  /** The value under `key` (a string, or a Uint8Array if bytes were stored), or undefined. */
  get(key, options) {
    return host().storeGet(this.#scope(options), key);
  }
  /** Stores a string or a Uint8Array under `key`. */
  set(key, value, options) {
    if (typeof value !== 'string' && !(value instanceof Uint8Array)) {
      throw new TypeError(`store.set(${JSON.stringify(key)}): the value is a ${typeof value}, not a string or a Uint8Array (use setJson for other data)`);
    }
    host().storeSet(this.#scope(options), key, value);
  }
  /** Removes `key`; whether it was there. */
  delete(key, options) {
    return host().storeDelete(this.#scope(options), key);
  }
  /** The keys of the scope, sorted. */
  keys(options) {
    return host().storeKeys(this.#scope(options));
  }
  /** The JSON value under `key`, or `fallback` when there is none. */
  getJson(key, fallback = undefined, options) {
    const text = this.get(key, options);
    if (text === undefined) return fallback;
    return JSON.parse(typeof text === 'string' ? text : new TextDecoder().decode(text));
  }
  /** Stores `value` as JSON under `key`. */
  setJson(key, value, options) {
    this.set(key, JSON.stringify(value), options);
  }
}

/** Messages to the current chat (capability `chat`). */
class Chat {
  sendText(text) {
    host().sendText(String(text));
  }
  sendImage(image) {
    if (!(image instanceof Image)) throw new TypeError('chat.sendImage takes an Image');
    host().sendImage(image.mimeType, image.data);
  }
  pushSystem(message, { triggerAgent = false } = {}) {
    host().pushSystem(String(message), Boolean(triggerAgent));
  }
}

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'];
/** Log lines to the host's log and the run's events. */
export const log = Object.freeze(
  Object.fromEntries(LEVELS.map((level) => [level, (...parts) => host().log(level, parts.map(String).join(' '))])),
);

/** Who and where the AI code runs for, and the services of the call. */
export class Ctx {
  constructor({ chatKey, userId, channelId, channelName, channelType, adapterKey }) {
    this.chatKey = chatKey;
    this.userId = userId;
    this.channelId = channelId;
    this.channelName = channelName;
    this.channelType = channelType;
    this.adapterKey = adapterKey;
    /** Key-value data kept between calls (capability `store`). */
    this.store = new Store();
    /** Messages to the chat (capability `chat`). */
    this.chat = new Chat();
    Object.freeze(this);
  }
}

/** The schema of the TypeScript type `name`, which a method's `field`
 * (params or returns) names: generated at build into
 * `__sandwitTypeSchemas`, its references inlined. */
function typeSchema(where, field, name) {
  const defs = globalThis.__sandwitTypeSchemas;
  if (!defs) {
    throw new TypeError(`${where}: ${field} names the TypeScript type ${name}, but no type schemas were generated (build a .ts plugin with \`sandwit plugin build\`)`);
  }
  if (!Object.hasOwn(defs, name)) {
    throw new TypeError(`${where}: ${field} names ${name}, which is no exported type of the plugin's entry module (exported: ${Object.keys(defs).join(', ') || 'none'})`);
  }
  return inline(defs[name], defs, 0);
}

/** The object schema of a method's parameters: given, or a TypeScript
 * type's. */
function paramsSchema(where, params) {
  if (params === undefined) return { type: 'object', properties: {} };
  if (typeof params === 'string') return typeSchema(where, 'params', params);
  if (typeof params !== 'object' || params === null || params.type !== 'object') {
    throw new TypeError(`${where}: params must be an object JSON Schema ({ type: "object", properties, required }) or the name of an exported TypeScript type`);
  }
  return params;
}

/** `schema` with its `#/definitions/X` references replaced by their
 * definitions; a reference deeper than 32 (a recursive type) accepts anything. */
function inline(schema, defs, depth) {
  if (Array.isArray(schema)) return schema.map((s) => inline(s, defs, depth));
  if (typeof schema !== 'object' || schema === null) return schema;
  if (typeof schema.$ref === 'string') {
    // A reference's siblings (its description) describe the use, and win.
    const { $ref, ...siblings } = schema;
    const name = decodeURIComponent($ref.replace(/^#\/definitions\//, ''));
    if (depth >= 32 || !Object.hasOwn(defs, name)) return inline(siblings, defs, depth);
    return { ...inline(defs[name], defs, depth + 1), ...inline(siblings, defs, depth) };
  }
  const out = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === '$schema') continue;
    out[key] = inline(value, defs, depth);
  }
  return out;
}

function typeName(schema) {
  if (Array.isArray(schema.type)) return schema.type.join(' | ');
  if (schema.type) return schema.type === 'array' && schema.items?.type ? `array of ${schema.items.type}` : schema.type;
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(' | ');
  return 'any';
}

/** The docstring the AI reads, when the author gave none. */
function docstring(spec, params, returns) {
  const lines = [spec.description];
  if (params.length) {
    lines.push('', 'Args:');
    for (const p of params) {
      const optional = p.required ? '' : ', optional';
      const about = p.schema.description ? `: ${p.schema.description}` : '';
      lines.push(`    ${p.name} (${typeName(p.schema)}${optional})${about}`);
    }
  }
  if (returns) {
    lines.push('', 'Returns:', `    ${typeName(returns)}${returns.description ? `: ${returns.description}` : ''}`);
  }
  return lines.join('\n');
}

/**
 * A plugin: its manifest, methods, hooks and configuration.
 *
 * ```js
 * export const plugin = new Plugin({ id: 'tally', name: 'Tally', version: '0.1.0', author: 'you', description: 'Counts things.' });
 * plugin.tool({ name: 'count', description: 'Count one more.', params: { type: 'object',
 *   properties: { thing: { type: 'string' } }, required: ['thing'] } }, (ctx, { thing }) => ...);
 * ```
 */
export class Plugin {
  #methods = [];
  #promptInject = null;
  #collectMethods = null;

  constructor({ id, name, version, author, description, config, capabilities = [] }) {
    if (typeof id !== 'string' || !PLUGIN_ID.test(id) || id.length > 64) {
      throw new TypeError(`plugin id ${JSON.stringify(id)}: lowercase letters, digits, - and _, starting with a letter, at most 64`);
    }
    for (const [field, value, what] of [
      ['author', author, 'who wrote it'],
      ['description', description, 'what it does, in a sentence or two'],
    ]) {
      if (typeof value !== 'string' || !value.trim()) {
        throw new TypeError(`plugin ${id}: ${field} is required (${what})`);
      }
    }
    this.id = id;
    this.name = name ?? id;
    this.version = version ?? '0.1.0';
    this.author = author;
    this.description = description;
    this.configSchema = config === undefined ? undefined : configSchema(config);
    this.extraCapabilities = [...capabilities];
    /** The operator's configuration (capability `config`). */
    this.config = Object.freeze({
      /** The operator's value of `key`, or the schema's default, or undefined. */
      get: (key) => {
        const value = host().configGet(key);
        return value !== undefined ? value : this.configSchema?.properties?.[key]?.default;
      },
    });
  }

  /** Mounts a method of `kind`; `spec` is { name, description, docstring?, params?, returns? }. */
  method(kind, spec, fn) {
    if (!KINDS.has(kind)) throw new TypeError(`method kind ${JSON.stringify(kind)}: one of ${[...KINDS].join(', ')}`);
    const name = spec?.name;
    if (typeof name !== 'string' || !IDENTIFIER.test(name) || name.startsWith('sandwit_')) {
      throw new TypeError(`method name ${JSON.stringify(name)}: an identifier the AI can call (letters, digits, _), not starting with sandwit_`);
    }
    if (this.#methods.some((m) => m.name === name)) throw new TypeError(`method ${name} is mounted twice`);
    if (typeof fn !== 'function') throw new TypeError(`method ${name}: the handler is not a function`);
    if (!spec.description) throw new TypeError(`method ${name}: a description (one line the AI reads) is required`);
    if (spec.returns !== undefined && kind !== MethodKind.TOOL) {
      throw new TypeError(`method ${name}: only a tool declares a result schema`);
    }
    this.#methods.push({ kind, spec, fn, name });
    return this;
  }
  /** Mounts a tool: any value back to the calling code. */
  tool(spec, fn) {
    return this.method(MethodKind.TOOL, spec, fn);
  }
  /** Mounts an agent method: a string for the AI, and a new round. */
  agent(spec, fn) {
    return this.method(MethodKind.AGENT, spec, fn);
  }
  /** Mounts a behavior: a string back to the code, kept as a system message. */
  behavior(spec, fn) {
    return this.method(MethodKind.BEHAVIOR, spec, fn);
  }
  /** Mounts a multimodal agent: text and images for the AI, and a new round. */
  multimodalAgent(spec, fn) {
    return this.method(MethodKind.MULTIMODAL_AGENT, spec, fn);
  }
  /** The hook giving the text added to the chat's method listing (or none). */
  promptInject(fn) {
    this.#promptInject = fn;
    return this;
  }
  /** The hook choosing the methods (by name) the AI sees in a chat. */
  collectMethods(fn) {
    this.#collectMethods = fn;
    return this;
  }

  /** The capabilities asked for: `store` and `chat` always (the host grants
   * a subset), `config` with a config schema, and any given (e.g. `http:api.example.com`). */
  get capabilities() {
    const caps = ['store', 'chat'];
    if (this.configSchema) caps.push('config');
    return [...caps, ...this.extraCapabilities.filter((c) => !caps.includes(c))];
  }

  /** The manifest, as the WIT `plugin-manifest` (schemas as JSON text). */
  manifest() {
    const methods = this.#methods.map(({ kind, spec, name }) => {
      const where = `method ${name}`;
      const schema = paramsSchema(where, spec.params);
      const required = new Set(schema.required ?? []);
      const params = Object.entries(schema.properties ?? {}).map(([param, s]) => {
        if (!IDENTIFIER.test(param)) throw new TypeError(`${where}: parameter ${JSON.stringify(param)} is not an identifier`);
        return { name: param, schema: s, required: required.has(param) };
      });
      const returns = typeof spec.returns === 'string' ? typeSchema(where, 'returns', spec.returns) : spec.returns;
      return {
        name,
        kind,
        description: spec.description,
        docstring: spec.docstring ?? docstring(spec, params, returns),
        params: params.map((p) => ({ name: p.name, schema: JSON.stringify(p.schema), required: p.required })),
        returns: returns === undefined ? undefined : JSON.stringify(returns),
      };
    });
    return {
      id: this.id,
      name: this.name,
      version: this.version,
      author: this.author,
      description: this.description,
      methods,
      configSchema: this.configSchema === undefined ? undefined : JSON.stringify(this.configSchema),
      capabilities: this.capabilities,
    };
  }

  /** Calls `method` with the (host-checked) `args` object in `ctx`:
   * `{ kind, value }` with a tool's value, an agent's or behavior's string,
   * or a multimodal agent's parts. */
  async invoke(ctx, method, args) {
    const found = this.#methods.find((m) => m.name === method);
    if (!found) throw new PluginError(method, 'unknown-method');
    const result = await found.fn(ctx, args ?? {});
    return { kind: found.kind, value: checkResult(found, result) };
  }

  /** The prompt-inject hook's text for `ctx`, if any. */
  async promptText(ctx) {
    if (!this.#promptInject) return undefined;
    const text = await this.#promptInject(ctx);
    return text ? String(text) : undefined;
  }

  /** The names of the methods the AI sees in `ctx`. */
  async availableMethods(ctx) {
    const all = this.#methods.map((m) => m.name);
    if (!this.#collectMethods) return all;
    const chosen = await this.#collectMethods(ctx);
    if (!Array.isArray(chosen)) throw new TypeError('the collectMethods hook must return an array of method names');
    const names = new Set(chosen.map(String));
    return all.filter((n) => names.has(n));
  }
}

/** The config schema: an object JSON Schema. A property with `secret:
 * true`, or a string property named like a key, token, secret or password
 * (unless it says `secret: false`), is a secret: the host writes `[secret]`
 * for its value everywhere but in the plugin's own `config.get`, and
 * `format: password` tells a form to hide it. */
function configSchema(schema) {
  if (typeof schema !== 'object' || schema === null || schema.type !== 'object') {
    throw new TypeError('config must be an object JSON Schema ({ type: "object", properties })');
  }
  const properties = {};
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    const isSecret = prop.secret ?? (SECRET_NAME.test(name) && prop.type === 'string');
    properties[name] = isSecret ? { ...prop, secret: true, format: 'password' } : prop;
  }
  return { ...schema, properties };
}

function checkResult(method, result) {
  const { kind, name } = method;
  if (kind === MethodKind.TOOL) return result;
  if (kind === MethodKind.AGENT || kind === MethodKind.BEHAVIOR) {
    if (typeof result !== 'string') {
      throw new PluginError(`method ${name} is a ${kind} method and returned ${describe(result)}, not a string`);
    }
    return result;
  }
  const items = Array.isArray(result) ? result : [result];
  return items.map((item) => {
    if (typeof item === 'string') return { tag: 'text', val: item };
    if (item instanceof Image) return { tag: 'image', val: { mimeType: item.mimeType, data: item.data } };
    if (item?.type === 'text') return { tag: 'text', val: String(item.text ?? '') };
    if (item?.type === 'image_url') {
      const url = typeof item.image_url === 'object' ? item.image_url?.url : item.image_url;
      return { tag: 'image-url', val: String(url) };
    }
    throw new PluginError(`method ${name} returned ${describe(item)} as a part, not text or an image`);
  });
}

function describe(value) {
  if (value === null) return 'null';
  if (typeof value === 'object') return `a ${value.constructor?.name ?? 'object'}`;
  return `a ${typeof value}`;
}

/** The error a call's exception becomes: `{ tag, val }` of the WIT `call-error`. */
export function callError(error) {
  if (error instanceof PluginError) {
    const tag = error.kind === 'unknown-method' ? 'unknown-method' : error.kind;
    return { tag, val: error.message };
  }
  if (error instanceof ServiceError && error.kind === 'denied') return { tag: 'denied', val: error.message };
  if (error instanceof ServiceError && error.kind === 'limit-exceeded') return { tag: 'limit-exceeded', val: error.message };
  return { tag: 'failed', val: report(error) };
}
