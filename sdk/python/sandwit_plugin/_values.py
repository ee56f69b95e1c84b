"""Python values to and from sandwit's value tree, as (kind, payload) nodes.

A tree is a list of nodes, root first; containers name their children by
index (`wit/plugin@0.1.0/types.wit`, `value`). Kinds: "null", "bool", "int", "float",
"text", "bytes", "array" (child indices), "object" ((key, index) pairs).
"""

from __future__ import annotations

from typing import Any

#: The deepest value encoded; deeper nesting is a plugin bug, not data.
MAX_DEPTH = 64


def encode(value: Any) -> list[tuple[str, Any]]:
    """The nodes of `value`: None, bool, int (64-bit), float, str, bytes,
    list or tuple, dict with str keys (and a dataclass-free object with
    `to_value()`)."""
    nodes: list[tuple[str, Any]] = []

    def add(v: Any, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise ValueError(f"the value is nested more than {MAX_DEPTH} deep")
        index = len(nodes)
        if v is None:
            nodes.append(("null", None))
        elif isinstance(v, bool):
            nodes.append(("bool", v))
        elif isinstance(v, int):
            if not -(2**63) <= v < 2**63:
                raise ValueError(f"the integer {v} does not fit in 64 bits")
            nodes.append(("int", v))
        elif isinstance(v, float):
            nodes.append(("float", v))
        elif isinstance(v, str):
            nodes.append(("text", v))
        elif isinstance(v, (bytes, bytearray, memoryview)):
            nodes.append(("bytes", bytes(v)))
        elif isinstance(v, (list, tuple)):
            nodes.append(("array", []))
            children = [add(item, depth + 1) for item in v]
            nodes[index] = ("array", children)
        elif isinstance(v, dict):
            nodes.append(("object", []))
            entries = []
            for key, item in v.items():
                if not isinstance(key, str):
                    raise ValueError(f"a dict key is {type(key).__name__}, not str")
                entries.append((key, add(item, depth + 1)))
            nodes[index] = ("object", entries)
        else:
            raise ValueError(f"a {type(v).__name__} is not a value sandwit can pass")
        return index

    add(value, 0)
    return nodes


def decode(nodes: list[tuple[str, Any]]) -> Any:
    """The Python value of a tree the host checked (well formed, bounded)."""

    def get(index: int) -> Any:
        kind, payload = nodes[index]
        if kind == "array":
            return [get(i) for i in payload]
        if kind == "object":
            return {key: get(i) for key, i in payload}
        return payload

    return get(0)
