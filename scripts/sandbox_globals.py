#!/usr/bin/env python3
"""Writes a type stub of what sandboxed code finds in its globals when the
example plugins are loaded: each method as a function typed from its
manifest (parameters' JSON Schemas; a tool's `returns`, a behavior's str, an
agent's `NoReturn`, as the script stops there), and `PluginError`. So the
sandboxed examples (examples/*.py: the code an LLM writes) are type-checked
against the methods they call (scripts/test-python runs mypy --strict).

    python scripts/sandbox_globals.py OUT.pyi

Needs the `sandwit` package (scripts/test-python installs it) and the
example plugins: the Rust ones from target/guests and the JavaScript SDK's
from target/js-plugins (sdk/js/build-examples), their manifests as the host
reads them; the Python SDK's from their sources
(sdk/python/examples/*/plugin.py, read as text: building them needs
componentize-py).
"""

from __future__ import annotations

import ast
import os
import sys
from pathlib import Path
from typing import Any

import sandwit

REPO = Path(__file__).resolve().parents[1]
GUESTS = REPO / "target" / "guests" / "wasm32-wasip2" / "guest"
RUST_EXAMPLES = ["calc", "knowledge", "messenger", "imagegen", "notes"]
JS_PLUGINS = REPO / "target" / "js-plugins"
JS_EXAMPLES = REPO / "sdk" / "js" / "examples"
PYTHON_EXAMPLES = REPO / "sdk" / "python" / "examples"

HEADER = '''"""The globals of sandboxed code with sandwit's example plugins: written
by scripts/sandbox_globals.py."""

from typing import Any, NoReturn


class PluginError(Exception):
    """A method call that failed."""

    method: str
    kind: str
    message: str


class PluginArgumentError(PluginError, TypeError):
    """Arguments the method's schemas refuse."""

'''


def py_type(schema: Any) -> str:
    """The Python type of values a JSON Schema accepts (as sandwit sends
    them: bytes for a string with a media type)."""
    if not isinstance(schema, dict):
        return "Any"
    if "anyOf" in schema:
        return " | ".join(dict.fromkeys(py_type(s) for s in schema["anyOf"]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(py_type({**schema, "type": k}) for k in kind)
    if kind == "string":
        return "bytes" if "contentMediaType" in schema else "str"
    if kind == "array":
        return f"list[{py_type(schema.get('items'))}]"
    if kind == "object":
        return f"dict[str, {py_type(schema.get('additionalProperties'))}]"
    return {"integer": "int", "number": "float", "boolean": "bool", "null": "None"}.get(kind, "Any")


def result_type(kind: str, returns: str) -> str:
    """What a call of a method of `kind` returns in the code."""
    if kind in ("agent", "multimodal-agent"):
        return "NoReturn"  # the script stops at the call
    if kind == "behavior":
        return "str"
    return returns


def component_methods() -> list[str]:
    """The methods of the built example components (Rust and JavaScript),
    from their manifests as the host reads them."""
    paths = [(GUESTS / f"{name}.wasm", "scripts/test-python builds the guests") for name in RUST_EXAMPLES]
    paths += [(JS_PLUGINS / f"{d.name}.wasm", "sdk/js/build-examples builds it")
              for d in sorted(JS_EXAMPLES.iterdir()) if d.is_dir()]
    host = sandwit.Host(prepared_interpreters=0, prepared_plugin_instances=0)
    out = []
    for path, how in paths:
        if not path.exists():
            raise SystemExit(f"{path} is missing: {how}")
        name = path.stem
        for m in host.load_plugin(path).manifest["methods"]:
            params = [f"{p['name']}: {py_type(p['schema'])}" + ("" if p["required"] else " = ...")
                      for p in m["params"]]
            returns = result_type(m["kind"], py_type(m.get("returns")))
            out.append(f"def {m['name']}({', '.join(params)}) -> {returns}:\n"
                       f"    \"\"\"{m['description']} (plugin `{name}`)\"\"\"\n")
    host.close()
    return out


def annotation(node: ast.expr | None) -> str:
    """A hint of the SDK's sources, with bare `list` and `dict` given their
    parameters (mypy --strict asks for them)."""
    if node is None:
        return "Any"
    if isinstance(node, ast.Name) and node.id == "list":
        return "list[Any]"
    if isinstance(node, ast.Name) and node.id == "dict":
        return "dict[str, Any]"
    return ast.unparse(node)


def python_methods() -> list[str]:
    kinds = {"TOOL": "tool", "AGENT": "agent", "BEHAVIOR": "behavior",
             "MULTIMODAL_AGENT": "multimodal-agent"}
    out = []
    for source in sorted(PYTHON_EXAMPLES.glob("*/plugin.py")):
        for node in ast.parse(source.read_text()).body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for deco in node.decorator_list:
                if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute)
                        and deco.func.attr == "mount_sandbox_method" and deco.args
                        and isinstance(deco.args[0], ast.Attribute)):
                    continue
                args = node.args.args[1:]  # the context is the host's
                defaults = [None] * (len(args) - len(node.args.defaults)) + node.args.defaults
                params = [f"{a.arg}: {annotation(a.annotation)}" + ("" if d is None else " = ...")
                          for a, d in zip(args, defaults)]
                kind = kinds[deco.args[0].attr]
                returns = result_type(kind, annotation(node.returns))
                where = source.relative_to(REPO)
                out.append(f"def {node.name}({', '.join(params)}) -> {returns}:\n"
                           f"    \"\"\"{where}\"\"\"\n")
    return out


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    methods = component_methods() + python_methods()
    Path(sys.argv[1]).write_text(HEADER + "\n\n".join(methods))


if __name__ == "__main__":
    os.environ.setdefault("SANDWIT_CACHE_DIR", str(REPO / "target" / "tmp" / "sandwit-cache"))
    main()
