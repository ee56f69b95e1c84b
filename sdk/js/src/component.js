// The glue between the SDK and the component: the host backend on the
// component's imports, and the `plugin` and `lifecycle` exports of the world
// sandwit:js-sdk/plugin@0.2.0. Imported only by the entry module that
// `sandwit plugin build` generates; componentize-js binds the `sandwit:`
// specifiers to the component's imports.

import { log as hostLog } from 'sandwit:plugin/log@0.1.0';
import * as store from 'sandwit:plugin/store@0.1.0';
import * as config from 'sandwit:plugin/config@0.1.0';
import * as chat from 'sandwit:plugin/chat@0.1.0';

import { refusal } from './grants.js';
import { setHost, ServiceError } from './host.js';
import { encode, decode } from './values.js';
import { Ctx, Plugin, callError, report } from './index.js';

/** A service's `result` error (thrown by the bindings as a ComponentError
 * whose payload is the `service-error`) as the SDK's ServiceError. */
function service(call, ...args) {
  try {
    return call(...args);
  } catch (e) {
    const error = e?.payload ?? e;
    if (error && typeof error.tag === 'string') throw new ServiceError(error.tag, String(error.val));
    throw e;
  }
}

const backend = {
  storeGet(scope, key) {
    const entry = service(store.get, scope, key);
    return entry === undefined ? undefined : entry.val;
  },
  storeSet(scope, key, value) {
    service(store.set, scope, key, typeof value === 'string' ? { tag: 'text', val: value } : { tag: 'bytes', val: value });
  },
  storeDelete(scope, key) {
    return service(store.delete, scope, key);
  },
  storeKeys(scope) {
    return service(store.listKeys, scope);
  },
  configGet(key) {
    const value = service(config.get, key);
    return value === undefined ? undefined : decode(value.nodes);
  },
  sendText(text) {
    service(chat.sendText, text);
  },
  sendImage(mimeType, data) {
    service(chat.sendImage, { mimeType, data });
  },
  pushSystem(message, triggerAgent) {
    service(chat.pushSystem, message, triggerAgent);
  },
  log(level, message) {
    hostLog(level, message);
  },
};

/** An export that answers no error (describe, the hooks): an exception,
 * thrown or a rejected promise, is logged at error level, which the host
 * names as the call's failure, then ends the call. */
function reported(what, call) {
  const logged = (e) => {
    hostLog('error', `${what} threw ${report(e)}`);
    throw e;
  };
  try {
    const result = call();
    return result instanceof Promise ? result.catch(logged) : result;
  } catch (e) {
    return logged(e);
  }
}

function methodResult(kind, value) {
  if (kind === 'tool') return { tag: 'tool', val: { nodes: encode(value) } };
  return { tag: kind, val: value };
}

/** The engine's `fetch`, whose failure (a bare `NetworkError` whether the
 * host refused the request or the server did not answer) also says what the
 * plugin asked for. */
function explainedFetch(plugin, engineFetch) {
  return async (input, init) => {
    try {
      return await engineFetch(input, init);
    } catch (e) {
      if (!(e instanceof TypeError)) throw e;
      let url;
      let why;
      try {
        url = typeof input === 'string' || input instanceof URL ? String(input) : input.url;
        why = refusal(plugin.capabilities, url);
      } catch {
        throw e;
      }
      throw new TypeError(`fetch ${url}: ${e.message}: ${why}`);
    }
  };
}

/** The world's exports for `plugin`. */
export function serve(plugin) {
  if (!(plugin instanceof Plugin)) {
    throw new TypeError("the plugin's entry module must export a Plugin, as `export const plugin = new Plugin({...})` or as its default export");
  }
  setHost(backend);
  if (typeof globalThis.fetch === 'function') globalThis.fetch = explainedFetch(plugin, globalThis.fetch);
  return {
    plugin: {
      describe() {
        return reported('describing the plugin', () => plugin.manifest());
      },
      async invoke(ctx, method, args) {
        try {
          const { kind, value } = await plugin.invoke(new Ctx(ctx), method, decode(args.nodes));
          return methodResult(kind, value);
        } catch (e) {
          throw callError(e);
        }
      },
    },
    lifecycle: {
      promptInject(ctx) {
        return reported('the prompt-inject hook', () => plugin.promptText(new Ctx(ctx)));
      },
      availableMethods(ctx) {
        return reported('the collect-methods hook', () => plugin.availableMethods(new Ctx(ctx)));
      },
    },
  };
}
