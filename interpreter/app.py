"""The interpreter side of sandwit's Python sandbox.

componentize-py runs this module once at build time and snapshots the
interpreter, so every module imported here is ready in every run, and no other
module can be imported later (there are no files at run time). The host
instantiates a fresh copy of that snapshot for every run.

`Runner.exec` runs the AI's code in a fresh namespace where each plugin method
is a plain Python function; a call checks the bound arguments, writes them
with `marshal` (format 2) and goes through the `sandwit:interpreter/methods` import
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

from wit_world import exports
from wit_world.exports import runner

import _sandwit_methods
import crossing
from crossing import Session, inputs_of, make_function, run, seed_random_on_first_use

AVAILABLE_MODULES = sorted(
    name
    for name in sys.modules
    if "." not in name
    and not name.startswith(("_", "wit_world", "componentize"))
    and name not in ("app", "crossing", "site", "builtins", "posix", "poll_loop")
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


if not hasattr(builtins, "help"):
    builtins.help = pydoc.help

# The crossing to the host: `sandwit:interpreter/methods.call`, lowered by
# hand (methods.c) rather than through componentize-py's generic binding,
# and the method functions' common case of `crossing.invoke` in C there.
_sandwit_methods.configure(crossing)
crossing.bind(_sandwit_methods.call, _sandwit_methods.invoke)


def function_of(spec):
    """The method function of a `method-spec`."""
    params = tuple((p.name, p.required) for p in spec.params)
    return make_function(spec.name, spec.docstring, params)


def outcome(ended):
    """The WIT outcome of `crossing.run`'s `(error, result)`."""
    error, result = ended
    if error is None:
        return runner.Outcome_Ok(result)
    return runner.Outcome_Error(runner.ErrorInfo(*error))


# The method functions `prepare` made for the next run, if any.
prepared = None

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


def enter_workspace():
    """Makes the chat's workspace the working directory, when the host keeps
    workspaces (it then preopens `/workspace`): every run starts from the
    prepared interpreter's, or a new one's, `/`."""
    try:
        os.chdir("/workspace")
    except OSError:
        pass


# The session of `exec-in-session`, made by its first call.
session = None


class Runner(exports.Runner):
    def exec(self, code, inputs, methods):
        take_prepared()
        enter_workspace()
        # `random`: armed by `prepare` on a prepared interpreter; on a new
        # one this is its first call, in which componentize-py seeds it.
        functions = {spec.name: function_of(spec) for spec in methods}
        return outcome(run(code, functions, inputs_of(inputs)))

    def prepare(self, methods):
        global prepared
        prepared = {spec.name: function_of(spec) for spec in methods}
        warm_up()
        enter_workspace()
        seed_random_on_first_use()
        # As at the end of the build (below): every run starts with what
        # preparing made out of the collector's reach, its counts at zero.
        gc.collect()
        gc.freeze()

    def exec_in_session(self, code, inputs, methods):
        global session
        take_prepared()
        enter_workspace()
        if session is None:
            session = Session()
        functions = {spec.name: function_of(spec) for spec in methods}
        return outcome(session.run(code, functions, inputs_of(inputs)))

    def exec_prepared(self, code, inputs):
        # The working directory and `random`'s state are prepare's: the
        # interpreter's memory (wasi-libc's working directory in it) is
        # restored to it after every run.
        return outcome(run(code, take_prepared(), inputs_of(inputs)))


# Everything above is the snapshot every run starts from: move it out of the
# collector's reach, so a run's first collection does not walk (and fault in)
# the whole image.
gc.collect()
gc.freeze()
