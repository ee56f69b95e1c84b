"""The interpreter side of sandwit's Python sandbox.

componentize-py runs this module once at build time and snapshots the
interpreter, so every module imported here is ready in every run, and no other
module can be imported later (there are no files at run time). The host
instantiates a fresh copy of that snapshot for every run.

`Runner.exec` runs the AI's code in a fresh namespace where each plugin method
is a plain Python function; a call checks the bound arguments, writes them
with `marshal` (format 2) and goes through the `sandwit:plugin/methods` import
to the host, which answers in the same format.
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
import marshal
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
    """A value that cannot cross, raised by `plain`: the path to it is
    collected on the way up, so a good call builds no paths."""

    def __init__(self, error, message):
        super().__init__(message)
        self.error = error
        self.message = message
        self.path = []

    def raise_for(self, name):
        path = "".join(reversed(self.path))
        raise self.error(f"argument {name!r}{path}: {self.message}") from None


# The marshal format a value crosses in (`marshalled` in wit/python.wit):
# version 2 has no back-references, so the host reads every object where it
# occurs.
MARSHAL_VERSION = 2
# A list of at least RUN_MIN items of one exact type of int, float and str
# is checked by C loops (ints for their range, strs for being ASCII, hence
# UTF-8) and crosses as a copy made in C.
RUN_MIN = 8
UNSUPPORTED = (
    "cannot be passed to a plugin method "
    "(use None, bool, int, float, str, bytes, list, tuple or dict)"
)


def plain(value, depth):
    """`value` as it crosses: itself when it is made of exact None, bool, int
    within 64 bits, float, str without lone surrogates, bytes, and lists,
    tuples and str-keyed dicts of those, else a copy with subclasses taken as
    their base types; at nesting `depth` (an argument is at 1). Raises
    `BadValue`."""
    kind = type(value)
    if kind is str:
        if not value.isascii():
            check_text(value)
        return value
    if kind is int:
        if not I64_MIN <= value <= I64_MAX:
            raise BadValue(OverflowError, f"the int {value} does not fit in 64 bits")
        return value
    if kind is float or kind is bool or kind is bytes or value is None:
        return value
    if kind is list or kind is tuple:
        return plain_array(value, depth)
    if kind is dict:
        return plain_object(value, depth)
    return plain_other(value, depth)


def check_text(text):
    """Raises `BadValue` if `text` has a lone surrogate (it would not be UTF-8)."""
    try:
        text.encode()
    except UnicodeEncodeError as e:
        message = f"the str has a lone surrogate at index {e.start}, which is not valid UTF-8"
        raise BadValue(ValueError, message) from None


def too_deep(first):
    """The error for a container at MAX_DEPTH with children, naming its first."""
    error = BadValue(ValueError, f"nested deeper than {MAX_DEPTH} levels")
    error.path.append(first)
    return error


def plain_array(value, depth):
    n = len(value)
    if depth >= MAX_DEPTH and n:
        raise too_deep("[0]")
    if n >= RUN_MIN:
        run = type(value[0])
        # Types compared by identity: a metaclass's `__eq__` cannot pass.
        if (
            (run is int or run is float or run is str)
            and len(set(map(type, value))) == 1
            and (run is not int or I64_MIN <= min(value) and max(value) <= I64_MAX)
            and (run is not str or all(map(str.isascii, value)))
        ):
            # A copy: the code could change its list after this check (from
            # a subclass's method called later, or a stream's `flush`).
            return value[:]
    items = []
    for i, item in enumerate(value):
        try:
            items.append(plain(item, depth + 1))
        except BadValue as e:
            e.path.append(f"[{i}]")
            raise
    return items


def plain_object(value, depth):
    if depth >= MAX_DEPTH and value:
        raise too_deep(f"[{next(iter(value))!r}]")
    out = {}
    for key, item in value.items():
        if type(key) is not str:
            if not isinstance(key, str):
                raise BadValue(TypeError, f"dict keys must be str, not {type(key).__name__}")
            # The base type's conversion: a subclass's `__str__` could
            # return another subclass.
            key = str.__str__(key)
        try:
            if not key.isascii():
                check_text(key)
            out[key] = plain(item, depth + 1)
        except BadValue as e:
            e.path.append(f"[{key!r}]")
            raise
    return out


def plain_other(value, depth):
    """`plain` of subclasses (bool is final): an IntEnum as its int, a
    namedtuple as a list, an OrderedDict as a dict; bytearray and memoryview
    as bytes. Scalars are taken by their base type's own conversion, which a
    subclass's `__str__` or `__int__` cannot override."""
    if isinstance(value, int):
        return plain(int.__int__(value), depth)
    if isinstance(value, float):
        return plain(float.__float__(value), depth)
    if isinstance(value, str):
        return plain(str.__str__(value), depth)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(memoryview(value))
    if isinstance(value, (list, tuple)):
        return plain(list(value), depth)
    if isinstance(value, dict):
        return plain(dict(value), depth)
    raise BadValue(TypeError, f"values of type {type(value).__name__} {UNSUPPORTED}")


ERROR_KINDS = {
    t.CallError_InvalidArguments: "invalid_arguments",
    t.CallError_UnknownMethod: "unknown_method",
    t.CallError_Failed: "failed",
    t.CallError_Denied: "denied",
    t.CallError_LimitExceeded: "limit_exceeded",
}
call_host = host_methods.call
dumps, loads = marshal.dumps, marshal.loads


def invoke(method, params, values):
    """Calls `method`; `params` are its parameters' (name, required) and
    `values` the arguments bound to them. An optional parameter given None
    is left out. A tool's value or a behavior's string comes back (agent and
    multimodal results end the run in the host, never returning here)."""
    args = {}
    for (name, required), value in zip(params, values):
        kind = type(value)
        # The commonest arguments cross as they are, without `plain`'s call.
        if kind is int and I64_MIN <= value <= I64_MAX or kind is str and value.isascii():
            args[name] = value
        elif value is None and not required:
            continue
        else:
            try:
                args[name] = plain(value, 1)
            except BadValue as e:
                e.raise_for(name)
    # Written before anything else of the code's can run (a replaced
    # stream's `flush`), so what crosses is what was checked.
    marshalled = dumps(args, MARSHAL_VERSION)
    # What was printed before the call must not be lost if the run ends in it.
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        result = call_host(method, marshalled)
    except Err as e:
        kind = ERROR_KINDS.get(type(e.value), "failed")
        cls = PluginArgumentError if kind == "invalid_arguments" else PluginError
        raise cls(method, kind, e.value.value) from None
    # The host wrote it: a value of the types above, nothing else.
    return loads(result)


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


# Bytes of the host's entropy each run seeds `random` with: 256 bits, as
# many as a Mersenne Twister seed usefully takes from a caller. (`seed()`
# with no argument reads 2,496 bytes through WASI and took 16 us of a
# ~50 us `print(1+1)` run; this takes 5.)
SEED_BYTES = 32


def run(code, functions):
    """Runs `code` in a fresh namespace holding `functions`, `random` seeded
    from the host's entropy: the host restores a reused interpreter's memory
    to its state before its first run, the generator's included."""
    random.seed(int.from_bytes(os.urandom(SEED_BYTES)))
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
    before the run starts, not during it. (The run replaces the code's lines
    in linecache.)"""
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
