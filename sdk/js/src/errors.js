// An exception as a plugin author reads it: its name, its message and the
// frames of the plugin's own code (function, file, line, column), not the
// SDK's or the engine's. In a component the code is one bundle: its frames
// are mapped back to the author's files through the bundle's source map,
// which `sandwit plugin build` appends as `globalThis.__sandwitSourceMap`.

/** At most this many of the plugin's frames, the innermost ones. */
const MAX_FRAMES = 8;
/** The longest message kept of an exception. */
const MAX_MESSAGE = 2000;
/** The longest name kept of an exception. */
const MAX_NAME = 200;

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Decodes a source map's `mappings` into, per generated line, sorted
 * segments [column, source, line, column] (all 0-based). */
function decodeMappings(mappings) {
  const lines = [];
  let source = 0;
  let line = 0;
  let column = 0;
  for (const text of mappings.split(';')) {
    const segments = [];
    let generated = 0;
    for (const segment of text.split(',')) {
      if (!segment) continue;
      const fields = [];
      let value = 0;
      let shift = 0;
      for (const ch of segment) {
        const digit = BASE64.indexOf(ch);
        if (digit < 0) return lines;
        value += (digit & 31) << shift;
        if (digit & 32) {
          shift += 5;
        } else {
          fields.push(value & 1 ? -(value >>> 1) : value >>> 1);
          value = 0;
          shift = 0;
        }
      }
      generated += fields[0];
      if (fields.length >= 4) {
        source += fields[1];
        line += fields[2];
        column += fields[3];
        segments.push([generated, source, line, column]);
      }
    }
    lines.push(segments);
  }
  return lines;
}

let decoded = null;

/** The author's [file, line, column] (1-based) for a bundle position, or null. */
function mapped(line, column) {
  const map = globalThis.__sandwitSourceMap;
  if (!map) return null;
  decoded ??= decodeMappings(map.mappings);
  const segments = decoded[line - 1];
  if (!segments || segments.length === 0) return null;
  let best = segments[0];
  for (const segment of segments) {
    if (segment[0] > column - 1) break;
    best = segment;
  }
  return [map.sources[best[1]], best[2] + 1, best[3] + 1];
}

/** The frames of `stack`, SpiderMonkey's (`fn@file:line:col`) or V8's
 * (`at fn (file:line:col)`), as { fn, file, line, column }. */
function frames(stack) {
  const out = [];
  for (const raw of String(stack ?? '').split('\n')) {
    const text = raw.trim();
    let m = /^(.*?)@(.*):(\d+):(\d+)$/.exec(text);
    if (!m) {
      m = /^at (?:(.*?) \()?(.*):(\d+):(\d+)\)?$/.exec(text);
    }
    if (m) out.push({ fn: m[1] || '<anonymous>', file: m[2], line: Number(m[3]), column: Number(m[4]) });
  }
  return out;
}

/** Whether a (mapped) file is the plugin's own code: not the SDK, not a
 * dependency, not the engine's. */
function own(file) {
  return (
    !/(^|[\\/])(sandwit-plugin|\.sandwit[\\/]sdk|sdk[\\/]js[\\/]src)[\\/]/.test(file) &&
    !/(^|[\\/])node_modules[\\/]/.test(file) &&
    !file.startsWith('node:') &&
    !file.startsWith('internal/') &&
    file !== 'self-hosted'
  );
}

/** The last path component, or two for files under a folder of the project
 * (`src/helpers.ts`). */
function short(file) {
  const path = file.replace(/^file:\/\//, '').replace(/^(\.\.\/)+/, '');
  const parts = path.split(/[\\/]/).filter(Boolean);
  return parts.slice(-2).join('/');
}

/** `value` as text, whatever was thrown: a string as it is, a symbol as
 * `Symbol(description)`, else its JSON (`asJson`) or `String(value)`;
 * never throws (a getter or `toString` that throws gives its type). */
function text(value, asJson = false) {
  if (value === undefined || value === null) return asJson ? String(value) : '';
  if (typeof value === 'string') return value;
  if (typeof value === 'symbol') return value.toString();
  if (asJson) {
    try {
      const json = JSON.stringify(value);
      if (json !== undefined) return json;
    } catch {
      // A cycle or a BigInt: as String() words it.
    }
  }
  try {
    return String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/** `object[key]`, or undefined where its getter throws. */
function read(object, key) {
  try {
    return object[key];
  } catch {
    return undefined;
  }
}

/**
 * `Name: message`, then the plugin's frames, innermost first, as a
 * JavaScript stack shows them (`at helper (plugin.ts:27:5)`).
 */
export function report(error) {
  let head;
  if (error instanceof Error) {
    // Both are the thrower's to choose: cut alike.
    const name = text(read(error, 'name')).slice(0, MAX_NAME) || 'Error';
    const message = text(read(error, 'message')).slice(0, MAX_MESSAGE);
    head = message ? `${name}: ${message}` : name;
  } else {
    head = `thrown value: ${text(error, true).slice(0, MAX_MESSAGE)}`;
  }
  const stack = error instanceof Error ? read(error, 'stack') : '';
  const mine = [];
  const bundled = Boolean(globalThis.__sandwitSourceMap);
  for (const frame of frames(stack)) {
    // In a component, frames outside the bundle are componentize-js's glue.
    if (bundled && !/(^|[\\/])component\.js$/.test(frame.file)) continue;
    const at = mapped(frame.line, frame.column);
    const [file, line, column] = at ?? [frame.file, frame.line, frame.column];
    if (own(file)) mine.push(`  at ${frame.fn} (${short(file)}:${line}:${column})`);
    if (mine.length === MAX_FRAMES) break;
  }
  return mine.length ? `${head}\nStack (the plugin's frames, innermost first):\n${mine.join('\n')}` : head;
}
