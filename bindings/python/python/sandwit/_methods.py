"""Host methods written in Python: ``@sandwit.method`` turns a function into a
``HostMethod`` whose spec (parameters with JSON Schemas, docstring) comes
from its type hints and its Google-style docstring; and the helpers the
extension calls to run such a method's coroutine and to report its failure.
"""

from __future__ import annotations

import asyncio
import collections.abc
import concurrent.futures
import inspect
import json
import logging
import threading
import types
import typing
from typing import Any, Callable, ParamSpec, TypeVar, overload

from ._sandwit import HostMethod
from ._types import Kind

P = ParamSpec("P")
R = TypeVar("R")

KINDS = ("tool", "agent", "behavior", "multimodal-agent")
NONE_TYPE = type(None)
SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}
SUPPORTED = (
    "str, int, float, bool, None, Any, list[T], dict[str, T], Optional[T], "
    "T | U, Literal[...]"
)
# Headers of the Google-style section that documents the parameters.
ARGS_HEADERS = ("Args:", "Arguments:", "Parameters:")

logger = logging.getLogger("sandwit")


@overload
def method(
    func: Callable[P, R],
    /,
    *,
    kind: Kind = "tool",
    name: str | None = None,
    provider: str = "host",
    description: str | None = None,
) -> HostMethod[P, R]: ...
@overload
def method(
    func: None = None,
    /,
    *,
    kind: Kind = "tool",
    name: str | None = None,
    provider: str = "host",
    description: str | None = None,
) -> Callable[[Callable[P, R]], HostMethod[P, R]]: ...
def method(
    func: Callable[P, R] | None = None,
    /,
    *,
    kind: Kind = "tool",
    name: str | None = None,
    provider: str = "host",
    description: str | None = None,
) -> HostMethod[P, R] | Callable[[Callable[P, R]], HostMethod[P, R]]:
    """Makes a Python function a sandbox method (a ``HostMethod``), usable
    bare (``@sandwit.method``, a tool), with arguments
    (``@sandwit.method(kind="behavior")``) or as a call on an existing
    function (``sandwit.method(send, kind="behavior")``).

    The function's first parameter receives the call's ``AgentCtx``; the
    others are the method's, each with a type hint that gives its JSON
    Schema (``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``,
    ``list[T]``, ``dict[str, T]``, ``Optional[T]``, ``T | U``,
    ``Literal[...]``); one with a default is optional. The docstring
    (Google style) is what the AI reads, and its ``Args:`` entries describe
    the parameters. An unsupported hint raises ``TypeError`` here, a spec
    the host refuses (no docstring, a reserved name) ``MethodSpecError``.

    Args:
        func: The function (``def`` or ``async def``).
        kind: ``tool``, ``agent``, ``behavior`` or ``multimodal-agent``.
        name: The name the AI calls it by [the function's name].
        provider: Who offers it, as events, errors and handoffs name it (a
            plugin id's form: lowercase letters, digits, ``-``, ``_``).
        description: A one-line summary [the docstring's first line].
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if func is not None and not callable(func):
        raise TypeError(
            f"method() takes the function to wrap, not {type(func).__name__} "
            "(pass kind= and name= as keywords)"
        )

    def wrap(f: Callable[P, R]) -> HostMethod[P, R]:
        spec = spec_of(f, kind, name)
        return HostMethod(f, provider=provider, description=description, **spec)

    return wrap if func is None else wrap(func)


def spec_of(func: Callable[..., Any], kind: str, name: str | None) -> dict[str, Any]:
    """The keyword arguments of ``HostMethod`` for ``func``: name, kind,
    docstring, params and (for a tool) returns."""
    where = f"host method {getattr(func, '__qualname__', repr(func))}"
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{where}: cannot read its signature: {e}") from None
    parameters = list(signature.parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not parameters or parameters[0].kind not in positional:
        raise TypeError(f"{where}: its first parameter must take the call's AgentCtx")
    try:
        hints = typing.get_type_hints(func)
    except Exception as e:
        raise TypeError(f"{where}: cannot resolve its type hints: {e}") from None
    ctx_name = parameters[0].name
    docstring, arg_docs = docstring_of(func, ctx_name)
    params = []
    for p in parameters[1:]:
        what = f"{where}, parameter {p.name!r}"
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise TypeError(f"{what}: *args and **kwargs cannot be a method's parameters")
        if p.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(f"{what}: is positional-only, but arguments are passed by name")
        if p.name not in hints:
            raise TypeError(f"{what}: has no type hint, which gives its JSON Schema")
        schema = schema_of(hints[p.name], what)
        if p.name in arg_docs:
            schema.setdefault("description", arg_docs[p.name])
        required = p.default is inspect.Parameter.empty
        if not required and json_default(p.default) is not None:
            schema["default"] = p.default
        params.append({"name": p.name, "schema": schema, "required": required})
    returns = None
    if "return" in hints:
        returned = hints["return"]
        if kind == "tool":
            returns = schema_of(returned, f"{where}, return value")
        elif kind in ("agent", "behavior") and returned is not str:
            article = "an" if kind == "agent" else "a"
            raise TypeError(f"{where}: {article} {kind} method returns a str, not {returned!r}")
    return {
        "name": name or func.__name__,
        "kind": kind,
        "docstring": docstring,
        "params": params,
        "returns": returns,
    }


def json_default(value: Any) -> str | None:
    """``value`` as JSON, or None if it is not plain JSON."""
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return None


def schema_of(hint: Any, what: str) -> dict[str, Any]:
    """The JSON Schema of a type hint; a hint without one is a TypeError
    naming ``what``."""
    if hint is Any:
        return {}
    if hint is None or hint is NONE_TYPE:
        return {"type": "null"}
    if hint in SCALARS:
        return {"type": SCALARS[hint]}
    if hint is list:
        return {"type": "array"}
    if hint is dict:
        return {"type": "object"}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is list and len(args) == 1:
        return {"type": "array", "items": schema_of(args[0], what)}
    if origin is dict and len(args) == 2:
        if args[0] is not str:
            raise TypeError(f"{what}: {hint!r}: a dict's keys must be str")
        return {"type": "object", "additionalProperties": schema_of(args[1], what)}
    if origin in (typing.Union, types.UnionType):
        schemas = [schema_of(a, what) for a in args if a is not NONE_TYPE]
        if NONE_TYPE in args:
            schemas.append({"type": "null"})
        return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    if origin is typing.Literal:
        if not all(a is None or type(a) in (str, int, bool) for a in args):
            raise TypeError(f"{what}: {hint!r}: a Literal's values must be str, int, bool or None")
        return {"enum": list(args)}
    raise TypeError(f"{what}: {hint!r} has no JSON Schema here (supported: {SUPPORTED})")


def docstring_of(func: Callable[..., Any], ctx_name: str) -> tuple[str, dict[str, str]]:
    """The function's docstring, cleaned and without an ``Args:`` entry for
    the context parameter (the AI does not pass it), and the ``Args:``
    entries' texts by parameter name."""
    doc = inspect.getdoc(func) or ""
    lines = doc.splitlines()
    kept: list[str] = []
    entries: dict[str, str] = {}

    def indent(line: str) -> int:
        return len(line) - len(line.lstrip())

    i = 0
    while i < len(lines):
        line = lines[i]
        kept.append(line)
        i += 1
        if line.strip() not in ARGS_HEADERS:
            continue
        header, section_start = indent(line), len(kept)
        entry_indent = None
        dropping = False
        while i < len(lines) and (not lines[i].strip() or indent(lines[i]) > header):
            line = lines[i]
            i += 1
            if not line.strip():
                kept.append(line)
                continue
            at = indent(line)
            entry_indent = entry_indent or at
            if at == entry_indent:
                name, _, text = line.strip().partition(":")
                name = name.split(" ", 1)[0].strip()
                dropping = name == ctx_name
                if not dropping:
                    entries[name] = text.strip()
            elif not dropping and entries:
                last = next(reversed(entries))
                entries[last] = f"{entries[last]} {line.strip()}".strip()
            if not dropping:
                kept.append(line)
        if not any(l.strip() for l in kept[section_start:]):
            # The section documented only the context: drop its header too.
            del kept[section_start - 1:]
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept), entries


# ---- called by the extension --------------------------------------------------

_own_loop: asyncio.AbstractEventLoop | None = None
_own_loop_lock = threading.Lock()


def own_loop() -> asyncio.AbstractEventLoop:
    """The event loop that runs host methods' coroutines during synchronous
    runs: sandwit's own, in a daemon thread, made at its first use."""
    global _own_loop
    with _own_loop_lock:
        if _own_loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="sandwit-methods", daemon=True).start()
            _own_loop = loop
        return _own_loop


def schedule(coro: collections.abc.Coroutine[Any, Any, Any],
             loop: asyncio.AbstractEventLoop | None,
             done: Callable[[Any], None]) -> concurrent.futures.Future[Any]:
    """Runs ``coro`` on ``loop`` (the run's, for ``run_async``; else
    sandwit's own) and calls ``done`` with its ``concurrent.futures.Future``
    when it ends. Returns that future (cancelling it cancels the
    coroutine)."""
    try:
        future = asyncio.run_coroutine_threadsafe(coro, loop or own_loop())
    except RuntimeError:
        coro.close()
        raise RuntimeError("the event loop of the run is closed") from None
    future.add_done_callback(done)
    return future


def failure(name: str, exc: BaseException) -> str:
    """What the run's code is told when host method ``name`` raised
    ``exc``: its type and message. The traceback goes to the ``sandwit``
    logger (DEBUG)."""
    logger.debug("host method %s raised", name, exc_info=exc)
    message = str(exc)
    return f"raised {type(exc).__name__}: {message}" if message else f"raised {type(exc).__name__}"
