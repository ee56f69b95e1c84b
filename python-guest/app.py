"""The interpreter side of sandwit's Python sandbox.

componentize-py runs this module once at build time and snapshots the
interpreter, so every module imported here is ready in every run, and no other
module can be imported later (there are no files at run time). The host
instantiates a fresh copy of that snapshot for every run.

`Runner.exec` runs the AI's code in a fresh namespace where each plugin method
is a plain Python function; a call encodes the bound arguments as a value tree
and goes through the `sandwit:plugin/methods` import to the host.
"""

# The curated standard library, loaded into the snapshot.
import abc
import array
import base64
import binascii
import bisect
import calendar
import cmath
import collections
import collections.abc
import contextlib
import copy
import csv
import dataclasses
import datetime
import decimal
import difflib
import enum
import fractions
import functools
import gc
import hashlib
import heapq
import hmac
import html
import io
import itertools
import json
import math
import operator
import os
import pprint
import random
import re
import statistics
import string
import struct
import textwrap
import time
import traceback
import types
import typing
import unicodedata
import urllib.parse
import uuid
import zlib

# Loaded lazily by the modules above; imported now so they work at run time.
import _strptime  # noqa: F401  (datetime.strptime)
import encodings.idna  # noqa: F401
import linecache
import pydoc

# Not offered: zoneinfo (the component has no tz database and no files to read
# one from), and anything touching files, processes or the network.

import builtins
import sys

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import runner
from wit_world.imports import methods as host_methods
from wit_world.imports import types as t

# The file name the AI's code is compiled under; frames with it are its own.
CODE_FILE = "<code>"
MAX_DEPTH = 64
I64_MIN, I64_MAX = -(2**63), 2**63 - 1

AVAILABLE_MODULES = sorted(
    name
    for name in sys.modules
    if "." not in name
    and not name.startswith(("_", "wit_world", "componentize"))
    and name not in ("app", "site", "builtins", "posix", "poll_loop")
)


class SandboxModuleBlocker:
    """The last finder on `sys.meta_path`: a module nothing else found is one
    the sandbox does not provide; say so plainly."""

    def find_spec(self, name, path=None, target=None):
        raise ModuleNotFoundError(
            f"No module named {name!r}: the sandbox does not provide it "
            f"(it offers: {', '.join(AVAILABLE_MODULES)})",
            name=name,
        )


sys.meta_path.append(SandboxModuleBlocker())


class PluginError(Exception):
    """A plugin method failed.

    `method` names the method; `kind` is one of `failed`, `invalid_arguments`,
    `unknown_method`, `denied` or `limit_exceeded`; `str()` gives the message.
    """

    def __init__(self, method, kind, message):
        super().__init__(f"{method}: {message}")
        self.method = method
        self.kind = kind
        self.message = message


class PluginArgumentError(PluginError, TypeError):
    """A plugin refused the arguments (also a `TypeError`)."""


builtins.PluginError = PluginError
builtins.PluginArgumentError = PluginArgumentError
if not hasattr(builtins, "help"):
    builtins.help = pydoc.help


class BadValue(Exception):
    """A value that cannot cross, raised by `encode`: the path to it is
    collected on the way up, so a good call builds no paths."""

    def __init__(self, error, message):
        super().__init__(message)
        self.error = error
        self.message = message
        self.path = []

    def raise_for(self, name):
        path = "".join(reversed(self.path))
        raise self.error(f"argument {name!r}{path}: {self.message}") from None


NULL = t.Node_Null()
TRUE = t.Node_Boolean(True)
FALSE = t.Node_Boolean(False)
# Made once: most ints crossing are small.
SMALL_INTS = {i: t.Node_Integer(i) for i in range(-16, 1025)}
# Scalars by exact type; subclasses take the slow path in `encode_other`.
SCALARS = {str: t.Node_Text, float: t.Node_Float, bytes: t.Node_Bytes}
Node_Array, Node_Object, Node_Null = t.Node_Array, t.Node_Object, t.Node_Null
Node_Integer = t.Node_Integer
UNSUPPORTED = (
    "cannot be passed to a plugin method "
    "(use None, bool, int, float, str, bytes, list, tuple or dict)"
)


def encode(value, nodes, depth):
    """Appends `value` to `nodes` as a tree, root first, at nesting `depth`
    (an argument is at 1); returns its index. Raises `BadValue`."""
    index = len(nodes)
    kind = type(value)
    make = SCALARS.get(kind)
    if make is not None:
        nodes.append(make(value))
    elif kind is int:
        node = SMALL_INTS.get(value)
        if node is None:
            if not I64_MIN <= value <= I64_MAX:
                raise BadValue(OverflowError, f"the int {value} does not fit in 64 bits")
            node = Node_Integer(value)
        nodes.append(node)
    elif value is None:
        nodes.append(NULL)
    elif kind is bool:
        nodes.append(TRUE if value else FALSE)
    elif kind is list or kind is tuple:
        encode_array(value, nodes, depth)
    elif kind is dict:
        encode_object(value, nodes, depth)
    else:
        return encode_other(value, nodes, depth)
    return index


def too_deep(first):
    """The error for a container at MAX_DEPTH with children, naming its first."""
    error = BadValue(ValueError, f"nested deeper than {MAX_DEPTH} levels")
    error.path.append(first)
    return error


def encode_array(value, nodes, depth):
    if depth >= MAX_DEPTH and value:
        raise too_deep("[0]")
    index = len(nodes)
    nodes.append(None)
    children = []
    for i, item in enumerate(value):
        try:
            children.append(encode(item, nodes, depth + 1))
        except BadValue as e:
            e.path.append(f"[{i}]")
            raise
    nodes[index] = Node_Array(children)


def encode_object(value, nodes, depth):
    if depth >= MAX_DEPTH and value:
        raise too_deep(f"[{next(iter(value))!r}]")
    index = len(nodes)
    nodes.append(None)
    entries = []
    for key, item in value.items():
        if type(key) is not str:
            if not isinstance(key, str):
                raise BadValue(TypeError, f"dict keys must be str, not {type(key).__name__}")
            key = str(key)
        try:
            entries.append((key, encode(item, nodes, depth + 1)))
        except BadValue as e:
            e.path.append(f"[{key!r}]")
            raise
    nodes[index] = Node_Object(entries)


def encode_other(value, nodes, depth):
    """`encode` of subclasses (bool is final): an IntEnum as its int, a
    namedtuple as a list, an OrderedDict as a dict; bytearray and memoryview
    as bytes. Scalars are taken by their base type's own conversion, which a
    subclass's `__str__` or `__int__` cannot override."""
    if isinstance(value, int):
        return encode(int.__int__(value), nodes, depth)
    if isinstance(value, float):
        return encode(float.__float__(value), nodes, depth)
    if isinstance(value, str):
        return encode(str.__str__(value), nodes, depth)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return encode(bytes(memoryview(value)), nodes, depth)
    if isinstance(value, (list, tuple)):
        return encode(list(value), nodes, depth)
    if isinstance(value, dict):
        return encode(dict(value), nodes, depth)
    raise BadValue(TypeError, f"values of type {type(value).__name__} {UNSUPPORTED}")


def decode(nodes):
    """A value tree as Python; children always follow their parent."""
    if len(nodes) == 1:
        node = nodes[0]
        kind = type(node)
        if kind is Node_Null:
            return None
        if kind is Node_Array:
            return []
        if kind is Node_Object:
            return {}
        return node.value
    out = [None] * len(nodes)
    for i in range(len(nodes) - 1, -1, -1):
        node = nodes[i]
        kind = type(node)
        if kind is Node_Array:
            out[i] = [out[j] for j in node.value]
        elif kind is Node_Object:
            out[i] = {key: out[j] for key, j in node.value}
        elif kind is not Node_Null:
            out[i] = node.value
    return out[0]


ERROR_KINDS = {
    t.CallError_InvalidArguments: "invalid_arguments",
    t.CallError_UnknownMethod: "unknown_method",
    t.CallError_Failed: "failed",
    t.CallError_Denied: "denied",
    t.CallError_LimitExceeded: "limit_exceeded",
}
MethodResult_Tool, MethodResult_Behavior = t.MethodResult_Tool, t.MethodResult_Behavior
Value = t.Value
call_host = host_methods.call


def invoke(method, params, values):
    """Calls `method`; `params` are its parameters' (name, required) and
    `values` the arguments bound to them. An optional parameter given None
    is left out."""
    nodes = [None]
    entries = []
    for (name, required), value in zip(params, values) if values else ():
        if value is None and not required:
            continue
        try:
            entries.append((name, encode(value, nodes, 1)))
        except BadValue as e:
            e.raise_for(name)
    nodes[0] = Node_Object(entries)
    # What was printed before the call must not be lost if the run ends in it.
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        result = call_host(method, Value(nodes))
    except Err as e:
        kind = ERROR_KINDS.get(type(e.value), "failed")
        cls = PluginArgumentError if kind == "invalid_arguments" else PluginError
        raise cls(method, kind, e.value.value) from None
    kind = type(result)
    if kind is MethodResult_Tool:
        return decode(result.value.nodes)
    if kind is MethodResult_Behavior:
        return result.value
    # Agent and multimodal results end the run in the host: never here.
    raise RuntimeError(f"{method}: unexpected {kind.__name__}")


# Host-side limit on a method's parameters (MAX_PARAMS in the manifest check).
MAX_PARAMS = 32
# Placeholders in the templates' constants, replaced per method.
METHOD_PLACEHOLDER = "\0method"
PARAMS_PLACEHOLDER = "\0params"


def compile_template(arity):
    """The code of `def f(p0, ..): return _invoke(method, params, (p0, ..))`,
    with placeholders for the method's name and parameters (the names of
    p0, .. are replaced too)."""
    names = ", ".join(f"p{i}" for i in range(arity))
    values = f"({names},)" if arity else "()"
    source = (
        f"def f({names}):\n"
        f"    return _invoke({METHOD_PLACEHOLDER!r}, {PARAMS_PLACEHOLDER!r}, {values})\n"
    )
    namespace = {}
    exec(source, namespace)
    return namespace["f"].__code__


# Compiled into the snapshot, so a run builds its method functions without
# running the compiler.
TEMPLATES = [compile_template(arity) for arity in range(MAX_PARAMS + 1)]
METHOD_GLOBALS = {"_invoke": invoke}


def make_function(spec):
    """A plain function named after the method, binding arguments the way
    Python does; optional parameters default to None (left out)."""
    names = tuple(p.name for p in spec.params)
    params = tuple((p.name, p.required) for p in spec.params)
    renames = {METHOD_PLACEHOLDER: spec.name, PARAMS_PLACEHOLDER: params}
    template = TEMPLATES[len(names)]
    code = template.replace(
        co_name=spec.name,
        co_qualname=spec.name,
        co_varnames=names,
        co_consts=tuple(renames.get(c, c) if isinstance(c, str) else c for c in template.co_consts),
    )
    optional = sum(1 for p in spec.params if not p.required)
    function = types.FunctionType(code, METHOD_GLOBALS, spec.name, (None,) * optional or None)
    function.__doc__ = spec.docstring
    function.__module__ = "sandwit.methods"
    return function


def error_info(exc, code):
    """The exception's type, message, line in the code and a traceback of the
    code's own frames."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == CODE_FILE]
    line = frames[-1].lineno if frames else None
    if isinstance(exc, SyntaxError) and exc.filename == CODE_FILE:
        line = exc.lineno
        message = exc.msg
    else:
        message = str(exc)
    text = "".join(
        (["Traceback (most recent call last):\n"] + traceback.format_list(frames) if frames else [])
        + traceback.format_exception_only(type(exc), exc)
    )
    return runner.ErrorInfo(type(exc).__name__, message, line, text)


# The method functions `prepare` made for the next run, if any.
prepared = None


def run(code, functions):
    """Runs `code` in a fresh namespace holding `functions`."""
    # The snapshot froze the generator's state: seed it from the host, with
    # 256 bits (random.seed() would read and hash 2,500 bytes).
    random.seed(int.from_bytes(os.urandom(32)))
    linecache.cache[CODE_FILE] = (len(code), None, code.splitlines(True), CODE_FILE)
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    namespace.update(functions)
    try:
        compiled = compile(code, CODE_FILE, "exec")
        exec(compiled, namespace)
    except SystemExit as e:
        if e.code not in (None, 0):
            return runner.Outcome_Error(error_info(e, code))
    except BaseException as e:  # noqa: BLE001: everything goes to the outcome
        return runner.Outcome_Error(error_info(e, code))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return runner.Outcome_Ok()


WARM_UP_CODE = "x = [i * 2 for i in range(10)]\nprint(sum(x), 'ok', file=out)\n"


def warm_up():
    """Runs a fixed snippet through `run`, printing into a throwaway buffer:
    the pages every run writes are then copied from the copy-on-write image
    before the run starts, not during it. (The run seeds random again and
    replaces the code's lines in linecache.)"""
    run(WARM_UP_CODE, {"out": io.StringIO()})
    # Opens the stdout stream without writing a byte (the run inherits it).
    sys.stdout.write("")
    sys.stdout.flush()


def take_prepared():
    """The prepared functions, which no later code can reach."""
    global prepared
    functions, prepared = prepared or {}, None
    return functions


class Runner(exports.Runner):
    def exec(self, code, methods):
        take_prepared()
        return run(code, {spec.name: make_function(spec) for spec in methods})

    def prepare(self, methods):
        global prepared
        prepared = {spec.name: make_function(spec) for spec in methods}
        warm_up()

    def exec_prepared(self, code):
        return run(code, take_prepared())


# Everything above is the snapshot every run starts from: move it out of the
# collector's reach, so a run's first collection does not walk (and fault in)
# the whole image.
gc.collect()
gc.freeze()
