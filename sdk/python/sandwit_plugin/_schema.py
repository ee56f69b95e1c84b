"""JSON Schemas from type hints, and Google-style docstrings."""

from __future__ import annotations

import inspect
import re
import types
import typing
from typing import Any

_SCALARS: dict[Any, dict[str, Any]] = {
    int: {"type": "integer"},
    float: {"type": "number"},
    str: {"type": "string"},
    bool: {"type": "boolean"},
    # Bytes validate as strings (wit/plugin@0.1.0/types.wit, `param`).
    bytes: {"type": "string"},
    type(None): {"type": "null"},
}


def schema_of(hint: Any) -> dict[str, Any]:
    """The JSON Schema of a type hint; `{}` (anything) for none or `Any`."""
    if hint is inspect.Parameter.empty or hint is Any:
        return {}
    if hint is None:
        return {"type": "null"}
    if hint in _SCALARS:
        return dict(_SCALARS[hint])
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (list, tuple, set, frozenset) or hint in (list, tuple):
        schema: dict[str, Any] = {"type": "array"}
        if origin is tuple and args and args[-1] is not Ellipsis:
            schema["prefixItems"] = [schema_of(a) for a in args]
            schema["minItems"] = schema["maxItems"] = len(args)
        elif args:
            schema["items"] = schema_of(args[0])
        return schema
    if origin is dict or hint is dict:
        schema = {"type": "object"}
        if len(args) == 2:
            schema["additionalProperties"] = schema_of(args[1])
        return schema
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [schema_of(a) for a in args]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    return {}


def is_optional(hint: Any) -> bool:
    """Whether `hint` admits None (`Optional[T]`, `T | None`)."""
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(
        None
    ) in typing.get_args(hint)


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Return|Raises|Example|Examples):\s*$")
_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The summary (first paragraph, one line) and the Args section's
    description of each parameter."""
    doc = inspect.cleandoc(doc or "")
    summary = " ".join(doc.split("\n\n", 1)[0].split())
    args: dict[str, str] = {}
    section = None
    current = None
    args_indent = 0
    for line in doc.splitlines():
        stripped = line.strip()
        heading = _SECTION.match(stripped)
        if heading and not line.startswith((" ", "\t")):
            section = heading.group(1)
            current = None
            continue
        if section in ("Args", "Arguments", "Parameters") and stripped:
            indent = len(line) - len(line.lstrip())
            match = _ARG.match(stripped)
            if match and (current is None or indent <= args_indent):
                current = match.group(1).lstrip("*")
                args_indent = indent
                args[current] = match.group(3).strip()
            elif current is not None:
                args[current] = f"{args[current]} {stripped}".strip()
    return summary, args
