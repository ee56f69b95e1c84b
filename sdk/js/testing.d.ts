// Types of sandwit-plugin/testing (src/testing.js).
import type { Plugin, Value } from './index.js';

export interface FakeResponse {
  status?: number;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  json?: unknown;
}

export interface FakeRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: Uint8Array;
}

export declare class FakeHost {
  constructor(options?: {
    config?: Record<string, Value>;
    grants?: string[];
    ctx?: { chatKey?: string; userId?: string; channelId?: string; channelName?: string; channelType?: string; adapterKey?: string };
  });
  readonly store: Map<string, string | Uint8Array>;
  readonly sent: ({ kind: 'text'; text: string } | { kind: 'image'; mimeType: string; data: Uint8Array } | { kind: 'system'; message: string; triggerAgent: boolean })[];
  readonly logs: [string, string][];
  readonly requests: FakeRequest[];
  route(url: string, response?: FakeResponse, method?: string): this;
  call(plugin: Plugin, method: string, args?: Record<string, Value>): Promise<{ kind: string; value: any }>;
  promptInject(plugin: Plugin): Promise<string | undefined>;
  availableMethods(plugin: Plugin): Promise<string[]>;
}

export declare class CallFailed extends Error {
  readonly kind: 'invalid-arguments' | 'unknown-method' | 'failed' | 'denied' | 'limit-exceeded';
  readonly detail: string;
}

export declare function httpGranted(caps: Iterable<string>, host: string, port: number): boolean;
