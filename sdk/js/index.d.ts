// Types of sandwit-plugin (src/index.js) for TypeScript plugins.

/** A JSON Schema, as an object. */
export type JsonSchema = { [key: string]: unknown };

/** A value that crosses between the AI's code and a plugin. */
export type Value = null | boolean | number | bigint | string | Uint8Array | Value[] | { [key: string]: Value };

/** What the agent framework does with a method's result. */
export declare const MethodKind: {
  readonly TOOL: 'tool';
  readonly AGENT: 'agent';
  readonly BEHAVIOR: 'behavior';
  readonly MULTIMODAL_AGENT: 'multimodal-agent';
};
export type MethodKind = (typeof MethodKind)[keyof typeof MethodKind];

/** A method's failure, for the AI. */
export declare class PluginError extends Error {
  constructor(message: string, kind?: 'failed' | 'invalid-arguments' | 'denied');
  readonly kind: 'failed' | 'invalid-arguments' | 'denied' | 'unknown-method';
}

/** A host service's refusal. */
export declare class ServiceError extends Error {
  readonly kind: 'denied' | 'invalid' | 'limit-exceeded' | 'unavailable';
}

/** An image for a multimodal result or a chat message. */
export declare class Image {
  constructor(data: Uint8Array, mimeType?: string);
  readonly data: Uint8Array;
  readonly mimeType: string;
}

/** Where a store key lives: the call's chat (the default), its user, both, or the whole plugin. */
export type Scope = 'chat' | 'user' | 'chat-user' | 'global';
export interface ScopeOption {
  scope?: Scope;
}

/** Key-value data kept between calls (capability `store`). */
export interface Store {
  get(key: string, options?: ScopeOption): string | Uint8Array | undefined;
  set(key: string, value: string | Uint8Array, options?: ScopeOption): void;
  delete(key: string, options?: ScopeOption): boolean;
  keys(options?: ScopeOption): string[];
  getJson<T = unknown>(key: string, fallback?: T, options?: ScopeOption): T;
  setJson(key: string, value: unknown, options?: ScopeOption): void;
}

/** Messages to the current chat (capability `chat`). */
export interface Chat {
  sendText(text: string): void;
  sendImage(image: Image): void;
  pushSystem(message: string, options?: { triggerAgent?: boolean }): void;
}

/** Who and where the AI code runs for, and the services of the call. */
export declare class Ctx {
  readonly chatKey: string;
  readonly userId?: string;
  readonly channelId?: string;
  readonly channelName?: string;
  readonly channelType?: string;
  readonly adapterKey?: string;
  readonly store: Store;
  readonly chat: Chat;
}

/** Log lines to the host's log and the run's events. */
export declare const log: {
  readonly [level in 'trace' | 'debug' | 'info' | 'warn' | 'error']: (...parts: unknown[]) => void;
};

/** A multimodal agent's part. */
export type Part = string | Image | { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } | string };

/** A method's declaration. `params` is an object JSON Schema, or the name of
 * a TypeScript type exported by the plugin's entry module (its schema is
 * generated at build). */
export interface MethodSpec {
  name: string;
  description: string;
  docstring?: string;
  params?: JsonSchema | string;
  returns?: JsonSchema | string;
}

type Handler<A, R> = (ctx: Ctx, args: A) => R | Promise<R>;

/** The plugin's manifest, as the WIT `plugin-manifest`. */
export interface Manifest {
  id: string;
  name: string;
  version: string;
  author: string;
  description: string;
  methods: { name: string; kind: MethodKind; description: string; docstring: string; params: { name: string; schema: string; required: boolean }[]; returns?: string }[];
  configSchema?: string;
  capabilities: string[];
}

export declare class Plugin {
  constructor(options: {
    id: string;
    name?: string;
    version?: string;
    /** Who wrote it (required, as the host requires it). */
    author: string;
    /** What it does, in a sentence or two (required). */
    description: string;
    /** An object JSON Schema; a property with `secret: true`, or named like a key, token, secret or password, is redacted by the host. */
    config?: JsonSchema;
    /** Capabilities beyond store, chat and config, e.g. `http:api.example.com`. */
    capabilities?: string[];
  });
  readonly id: string;
  readonly capabilities: string[];
  /** The operator's configuration (capability `config`). */
  readonly config: { get<T = Value>(key: string): T | undefined };
  method<A = any>(kind: MethodKind, spec: MethodSpec, fn: Handler<A, unknown>): this;
  tool<A = any, R = unknown>(spec: MethodSpec, fn: Handler<A, R>): this;
  agent<A = any>(spec: MethodSpec, fn: Handler<A, string>): this;
  behavior<A = any>(spec: MethodSpec, fn: Handler<A, string>): this;
  multimodalAgent<A = any>(spec: MethodSpec, fn: Handler<A, Part | Part[]>): this;
  promptInject(fn: (ctx: Ctx) => string | undefined | Promise<string | undefined>): this;
  collectMethods(fn: (ctx: Ctx) => string[] | Promise<string[]>): this;
  manifest(): Manifest;
}

/** `Name: message` and the plugin's own frames of an exception. */
export declare function report(error: unknown): string;
