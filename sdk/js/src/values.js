// JavaScript values to and from sandwit's value tree (the WIT `value` of
// sandwit:plugin/types@0.1.0): a list of nodes, root first, containers naming
// their children by index. The host checks every tree it is given, so
// `decode` trusts its shape; `encode` refuses what JSON-like data cannot be.

/** The deepest value encoded: deeper nesting is a plugin bug, not data. */
export const MAX_DEPTH = 64;

const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;

/**
 * The nodes of `value`, as the component model's JavaScript bindings spell
 * the `node` variant (`{ tag, val }`). Numbers that are safe integers are
 * integers, other numbers floats; a bigint must fit in 64 bits; a
 * `Uint8Array` (or any typed array or `ArrayBuffer`) is bytes; arrays and
 * plain objects nest; `undefined` in an object is left out, as JSON does.
 */
export function encode(value) {
  const nodes = [];
  const add = (v, depth, where) => {
    if (depth > MAX_DEPTH) throw new TypeError(`the value is nested more than ${MAX_DEPTH} deep`);
    const index = nodes.length;
    if (v === null || v === undefined) {
      nodes.push({ tag: 'null' });
    } else if (typeof v === 'boolean') {
      nodes.push({ tag: 'boolean', val: v });
    } else if (typeof v === 'number') {
      nodes.push(Number.isSafeInteger(v) ? { tag: 'integer', val: BigInt(v) } : { tag: 'float', val: v });
    } else if (typeof v === 'bigint') {
      if (v < I64_MIN || v > I64_MAX) throw new RangeError(`${where}: the integer ${v} does not fit in 64 bits`);
      nodes.push({ tag: 'integer', val: v });
    } else if (typeof v === 'string') {
      nodes.push({ tag: 'text', val: v });
    } else if (v instanceof Uint8Array) {
      nodes.push({ tag: 'bytes', val: v });
    } else if (ArrayBuffer.isView(v)) {
      nodes.push({ tag: 'bytes', val: new Uint8Array(v.buffer, v.byteOffset, v.byteLength) });
    } else if (v instanceof ArrayBuffer) {
      nodes.push({ tag: 'bytes', val: new Uint8Array(v) });
    } else if (Array.isArray(v)) {
      nodes.push(null);
      const children = v.map((item, i) => add(item, depth + 1, `${where}[${i}]`));
      nodes[index] = { tag: 'array', val: Uint32Array.from(children) };
    } else if (v instanceof Map) {
      nodes.push(null);
      const entries = [];
      for (const [key, item] of v) {
        if (typeof key !== 'string') throw new TypeError(`${where}: a Map key is a ${typeof key}, not a string`);
        entries.push([key, add(item, depth + 1, `${where}.${key}`)]);
      }
      nodes[index] = { tag: 'object', val: entries };
    } else if (typeof v === 'object' && (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null)) {
      nodes.push(null);
      const entries = [];
      for (const [key, item] of Object.entries(v)) {
        if (item === undefined) continue;
        entries.push([key, add(item, depth + 1, `${where}.${key}`)]);
      }
      nodes[index] = { tag: 'object', val: entries };
    } else if (typeof v === 'object' && typeof v.toJSON === 'function') {
      nodes.pop();
      return add(v.toJSON(), depth, where);
    } else {
      const what = typeof v === 'object' ? (v.constructor?.name ?? 'object') : typeof v;
      throw new TypeError(`${where}: a ${what} is not a value sandwit can pass (null, boolean, number, bigint, string, bytes, array or plain object)`);
    }
    return index;
  };
  add(value, 0, 'value');
  return nodes;
}

/**
 * The JavaScript value of a tree the host checked: integers are numbers when
 * they are safe integers, bigints otherwise; bytes are `Uint8Array`s;
 * objects are plain objects with their keys in order.
 */
export function decode(nodes) {
  const get = (index) => {
    const node = nodes[index];
    switch (node.tag) {
      case 'null':
        return null;
      case 'integer': {
        const n = node.val;
        return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
      }
      case 'array':
        return Array.from(node.val, get);
      case 'object': {
        const out = {};
        for (const [key, i] of node.val) {
          Object.defineProperty(out, key, { value: get(i), enumerable: true, writable: true, configurable: true });
        }
        return out;
      }
      default:
        return node.val;
    }
  };
  return get(0);
}
