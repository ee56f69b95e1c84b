"""Type stubs of sandwit's extension module (``sandwit._sandwit``).

Everything here is re-exported by ``sandwit``; the types of the dicts it
hands back (events, workspace files) are in ``sandwit._types``, also
re-exported.
"""

import pathlib
import types
from collections.abc import Coroutine
from typing import Any, Callable, Final, Generic, Iterable, Literal, Mapping, ParamSpec, Self, TypeVar, final

from ._calls import ClientRun
from ._session import Session
from ._types import (
    CodeSource,
    Event,
    InterpreterKind,
    Kind,
    LimitKind,
    LiveEvent,
    MethodSpec,
    Status,
    StrPath,
    SessionInfo,
    Paused,
    SessionReport,
    WorkspaceFile,
)

__all__ = [
    "Host",
    "Plugin",
    "Toolbox",
    "AgentCtx",
    "RunLimits",
    "CallLimits",
    "RunOutcome",
    "RunError",
    "LimitHit",
    "Handoff",
    "MethodResult",
    "ContentPart",
    "HostMethod",
    "Cancel",
    "SandwitError",
    "LoadError",
    "CallError",
    "ToolboxError",
    "PolicyError",
    "MethodSpecError",
    "warmup",
    "component_hash",
    "strip_code_fence",
    "_at_exit",
    "_restore",
    "EMBEDDED_PYTHON_SHA256",
    "__version__",
    "_DEBUG_BUILD",
]

_P = ParamSpec("_P")
_R = TypeVar("_R", covariant=True)

EMBEDDED_PYTHON_SHA256: Final[str | None]
"""The SHA-256 of the CPython component built into this package, or None
when it was built without one (then ``Host(python=...)`` or
``$SANDWIT_PYTHON`` must name one)."""

__version__: Final[str]
_DEBUG_BUILD: Final[bool]
"""Whether the extension is a dev build (sandwit's bench says so)."""

def _at_exit() -> None:
    """The ``atexit`` hook: no thread of sandwit's enters Python after it."""

def _restore(name: str, state: tuple[Any, ...]) -> Any:
    """Makes a value of the class ``name`` again from the state its
    ``__reduce__`` gave (unpickling)."""

# ---- exceptions ----------------------------------------------------------------

class SandwitError(Exception):
    """The base of every exception sandwit raises."""

class LoadError(SandwitError):
    """A plugin (or a Python interpreter) could not be loaded."""

    kind: Literal[
        "io", "rejected", "config", "unpinned", "tampered", "unsigned", "lock", "host"
    ]
    """Why: the file could not be read (``io``), the plugin is not acceptable
    (``rejected``), the policy's configuration for it does not match its
    schema (``config``), the policy grants its id only to other components
    (``unpinned``), the file's bytes are not those its folder's
    ``sandwit.lock`` records (``tampered``), the policy requires a trusted
    signature it does not have (``unsigned``), its folder's lock file is
    malformed (``lock``), or the host failed (``host``)."""
    plugin: str
    """The file name (or ``name=``), or the plugin's id once known."""
    problems: list[str]
    """Every problem found, one sentence each (for the other kinds than
    ``rejected`` and ``config``, the one message)."""
    digest: str | None
    """For ``unpinned``: the component's SHA-256, to pin if you trust it;
    for ``tampered``: the digest (``sha256:<hex>``) of the file's bytes."""

class CallError(SandwitError):
    """A method call returned no result. ``str(e)`` is the whole message,
    e.g. ``plugin `calc`, method `calculate_sum`: invalid arguments: ...``.
    Secrets configured in the policy never appear in it."""

    plugin: str
    """The plugin's id."""
    method: str
    """The method called."""
    kind: Literal[
        "unknown_method",
        "invalid_arguments",
        "failed",
        "denied",
        "limit_exceeded",
        "trapped",
        "bad_result",
    ]
    """What went wrong."""
    message: str | None
    """The detail (None for ``unknown_method``); for ``failed``, the
    plugin's message for the AI."""
    limit: str | None
    """For ``limit_exceeded``: ``fuel``, ``time``, ``memory``,
    ``value_size``, ``events``, ``instances``, ``rate`` or ``budget``."""

class ToolboxError(SandwitError):
    """Plugins cannot make one set."""

    kind: Literal["method", "id", "provider", "reserved"]
    """Two plugins offer a method of the same name (``method``), claim the
    same id (``id``), a host method's provider is a plugin's id
    (``provider``), or a plugin or provider is ``client``, the id of a
    run's own functions (``reserved``)."""
    method: str | None
    """For ``method``, ``provider`` and ``reserved``: the method's name."""
    id: str | None
    """For ``id``, ``provider`` and ``reserved``: the id."""
    first: str | None
    """For ``method``, the id of the plugin listed first; for ``id``, its
    SHA-256."""
    second: str | None
    """Likewise for the plugin listed second."""

class MethodSpecError(SandwitError):
    """A host method's spec does not pass the checks a plugin manifest's
    methods do: a Python identifier that is no keyword or builtin, a
    docstring, a one-line description, valid JSON Schemas, required
    parameters first, a provider of a plugin id's form."""

    provider: str
    """The provider given."""
    method: str
    """The method's name."""
    problems: list[str]
    """Every problem found, one sentence each."""

class PolicyError(SandwitError):
    """The policy file cannot be read or is not a valid policy (the message
    gives the line and column)."""

    path: str | None
    """The file."""

# ---- values ----------------------------------------------------------------------

@final
class AgentCtx:
    """Who and where the AI code runs for; every method call receives it.
    Plugins' stored data is scoped by ``chat_key`` and ``user_id``."""

    def __new__(
        cls,
        chat_key: str,
        user_id: str | None = None,
        *,
        channel_id: str | None = None,
        channel_name: str | None = None,
        channel_type: str | None = None,
        adapter_key: str | None = None,
    ) -> Self: ...
    @property
    def chat_key(self) -> str:
        """The conversation's key."""
    @property
    def user_id(self) -> str | None:
        """The user, if known."""
    @property
    def channel_id(self) -> str | None:
        """The channel's id, if any."""
    @property
    def channel_name(self) -> str | None:
        """The channel's name, if any."""
    @property
    def channel_type(self) -> str | None:
        """The channel's type (e.g. ``group``), if any."""
    @property
    def adapter_key(self) -> str | None:
        """The chat adapter's key, if any."""

@final
class RunLimits:
    """Limits on one Python run. Given to `Host`, what is not given has
    its default; given to a run, only the fields given override the
    interpreter's defaults. A plugin call made by the run draws on the
    run's remaining fuel and time. The README's limits table says what each
    bounds and how it ends a run."""

    def __new__(
        cls,
        *,
        timeout_s: float | None = None,
        memory_mib: int | None = None,
        fuel: int | None = None,
        max_calls: int | None = None,
        max_output_bytes: int | None = None,
        max_events: int | None = None,
        max_event_bytes: int | None = None,
    ) -> Self: ...
    @property
    def timeout_s(self) -> float:
        """Wall-clock deadline of the whole run, from when it gets a run
        slot (``Host(max_running=...)``) [10 s]. Busy code, sleeping code
        and plugin calls all stop there (limit ``time``)."""
    @property
    def memory_mib(self) -> float:
        """The interpreter's memory [256 MiB]."""
    @property
    def fuel(self) -> int | None:
        """A deterministic CPU budget for the interpreter and the plugins
        it calls, in fuel units (one per wasm instruction, roughly: about
        8,000,000,000 a CPU-second of Python, ``FUEL_PER_CPU_SECOND`` in the
        Rust library), or None for none: then the time limit alone bounds
        busy code [None]. Running out is the limit ``fuel``."""
    @property
    def max_calls(self) -> int:
        """Method calls per run [1,000]."""
    @property
    def max_output_bytes(self) -> int:
        """Bytes captured from stdout, and again from stderr [1 MiB]."""
    @property
    def max_events(self) -> int:
        """Events per run [10,000]."""
    @property
    def max_event_bytes(self) -> int:
        """Bytes the run's events may hold [64 MiB]."""

@final
class CallLimits:
    """Limits on every plugin call; what is not given has its default."""

    def __new__(
        cls,
        *,
        timeout_s: float | None = None,
        memory_mib: int | None = None,
        fuel: int | None = None,
        table_elements: int | None = None,
        max_core_instances: int | None = None,
        max_value_bytes: int | None = None,
        max_value_nodes: int | None = None,
        max_value_depth: int | None = None,
        max_event_bytes: int | None = None,
    ) -> Self: ...
    @property
    def timeout_s(self) -> float:
        """Wall-clock deadline of a call [10 s]."""
    @property
    def memory_mib(self) -> float:
        """Memory of an instance, all its memories together [64 MiB]."""
    @property
    def fuel(self) -> int | None:
        """A deterministic CPU budget in fuel units (about 8,000,000,000 a
        CPU-second), or None for none: the time limit bounds busy code
        [None]."""
    @property
    def table_elements(self) -> int:
        """Elements per table [20,000]."""
    @property
    def max_core_instances(self) -> int:
        """Core instances per store [64]."""
    @property
    def max_value_bytes(self) -> int:
        """Size of the arguments or a result [16 MiB]."""
    @property
    def max_value_nodes(self) -> int:
        """Nodes in one value [1,000,000]."""
    @property
    def max_value_depth(self) -> int:
        """Nesting depth of one value [64]."""
    @property
    def max_event_bytes(self) -> int:
        """Bytes of events (logs, chat messages, refusals) per call [16 MiB]."""

@final
class ContentPart:
    """One part of a multimodal agent's result."""

    def __new__(
        cls,
        type: Literal["text", "image", "image_url"],
        /,
        *,
        text: str | None = None,
        mime_type: str | None = None,
        data: bytes | None = None,
        url: str | None = None,
    ) -> Self:
        """A part for a multimodal-agent host method to return:
        ``ContentPart("text", text=...)``, ``ContentPart("image",
        mime_type="image/png", data=...)`` or ``ContentPart("image_url",
        url=...)``; other fields are a ``ValueError``."""
    @property
    def type(self) -> Literal["text", "image", "image_url"]: ...
    @property
    def text(self) -> str | None:
        """For ``text``."""
    @property
    def mime_type(self) -> str | None:
        """For ``image``, e.g. ``image/png``."""
    @property
    def data(self) -> bytes | None:
        """For ``image``: its bytes."""
    @property
    def url(self) -> str | None:
        """For ``image_url``."""
    def to_dict(self) -> dict[str, Any]:
        """``{"type": "text", "text": ...}``, ``{"type": "image",
        "mime_type": ..., "data": bytes}`` or ``{"type": "image_url", "url":
        ...}``."""

@final
class MethodResult:
    """A method's typed result."""

    @property
    def kind(self) -> Kind: ...
    @property
    def value(self) -> Any:
        """A tool's value (None, bool, int, float, str, bytes, list, dict);
        None for the other kinds."""
    @property
    def text(self) -> str | None:
        """An agent's or behavior's text."""
    @property
    def parts(self) -> list[ContentPart] | None:
        """A multimodal agent's parts."""
    def to_dict(self) -> dict[str, Any]:
        """``{"kind": "tool", "value": ...}``, ``{"kind": "agent" or
        "behavior", "text": ...}`` or ``{"kind": "multimodal-agent",
        "parts": [...]}``."""

@final
class RunError:
    """The Python exception that escaped a run's code (a record, not an
    exception object)."""

    @property
    def type(self) -> str:
        """The exception's type, e.g. ``ZeroDivisionError``
        (``InterpreterTrap`` when the interpreter itself trapped)."""
    @property
    def message(self) -> str: ...
    @property
    def line(self) -> int | None:
        """The line of the code it was raised at, if it was raised there."""
    @property
    def traceback(self) -> str:
        """The traceback, restricted to the code's own frames."""

@final
class LimitHit:
    """The limit that stopped a run."""

    @property
    def kind(self) -> LimitKind: ...
    @property
    def message(self) -> str:
        """What happened, with the limit's value (and the plugin and method
        if a call ran into it)."""

@final
class Handoff:
    """The agent handoff that ended a run."""

    @property
    def plugin(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def result(self) -> MethodResult:
        """An ``agent`` or ``multimodal-agent`` result, for the AI."""

@final
class RunOutcome:
    """Everything a run gives back."""

    @property
    def status(self) -> Status:
        """``ok`` (ran to the end), ``error`` (an exception escaped; see
        ``error``), ``agent_handoff`` (an agent method stopped the script;
        see ``handoff``), ``limit_exceeded`` (see ``limit``),
        ``cancelled`` (its ``Cancel`` handle ended it) or ``paused`` (it
        waits at a call the policy pauses; see ``paused``)."""
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...
    @property
    def error(self) -> RunError | None:
        """For ``error`` (and a limit Python reported as an exception,
        ``MemoryError``)."""
    @property
    def result(self) -> Any:
        """For ``ok``: the value of the code's last statement if it is an
        expression whose value is not None (the statement must start its
        own line), else of its ``result`` variable; None otherwise. A value
        as a method's result is (None, bool, int, float, str, bytes, list,
        dict; numpy arrays and scalars as their ``tolist()``): one that
        cannot leave the sandbox (a set, a plot, a DataFrame) is no result,
        and the ``result`` variable is tried next."""
    @property
    def limit(self) -> LimitHit | None:
        """For ``limit_exceeded``."""
    @property
    def handoff(self) -> Handoff | None:
        """For ``agent_handoff``."""
    @property
    def events(self) -> list[Event]:
        """What happened, in order, as the JSON of ``sandwit::Event``: each
        a dict with ``type`` ``call`` (``plugin``, ``method``, ``kind``,
        ``ms``, ``fuel``, ``ok``, ``summary``), ``system_message``
        (``plugin``, ``method``, ``text``), ``control`` (``plugin``,
        ``method``, ``control`` and its fields), ``log`` (``plugin``,
        ``level``, ``message``), ``chat`` (``plugin``, ``message``) or
        ``denied`` (``plugin``, ``capability``, ``request``): see
        ``sandwit.CallEvent`` and the others of ``sandwit.Event``."""
    @property
    def files(self) -> list[WorkspaceFile]:
        """The files of the chat's workspace the run created or changed,
        each a dict with ``path`` (``/``-separated, in the workspace) and
        ``size`` (bytes); empty without a workspace (the small
        interpreter, or a scientific sandbox without workspaces)."""
    @property
    def fuel_used(self) -> int:
        """Fuel used by the interpreter and the plugins it called."""
    @property
    def elapsed_ms(self) -> float:
        """Wall-clock time of the run, from when it got a run slot."""
    @property
    def queued_ms(self) -> float:
        """How long it waited for a run slot before that."""
    @property
    def session(self) -> SessionReport | None:
        """The session the run was in, if it named one."""
    @property
    def paused(self) -> Paused | None:
        """For ``paused``: the call it waits at and the token that resumes
        it (``Host.resume``)."""
    def to_dict(self) -> dict[str, Any]:
        """The outcome as plain values (as ``sandwit run --json`` prints
        it)."""

@final
class Cancel:
    """A handle that ends the runs given it (``run(..., cancel=c)``), from
    any thread or task: each ends with status ``cancelled`` (a method call
    in flight ends with it; busy code stops within about a million units
    of fuel). Cancelling is final: a run given a cancelled handle ends at
    once."""

    def __new__(cls) -> Self: ...
    def cancel(self) -> None:
        """Ends every run given this handle, and every later one."""
    @property
    def cancelled(self) -> bool:
        """Whether ``cancel()`` was called."""

# ---- host methods ---------------------------------------------------------------

@final
class HostMethod(Generic[_P, _R]):
    """A sandbox method answered by a Python function (see
    ``sandwit.method``, which makes one from type hints and a docstring).
    Listed in the prompt, checked against its schemas and routed like a
    plugin's method. Calling it calls the function.

    Generic in the function's parameters and result, so a decorated
    function keeps its signature for type checkers:
    ``HostMethod[[AgentCtx, str], str]`` for ``def f(ctx: AgentCtx, text:
    str) -> str``."""

    def __new__(
        cls,
        func: Callable[_P, _R],
        *,
        name: str,
        kind: Kind,
        docstring: str,
        params: Iterable[dict[str, Any]] | None = None,
        description: str | None = None,
        returns: dict[str, Any] | None = None,
        provider: str = "host",
    ) -> HostMethod[_P, _R]:
        """
        Args:
            func: Called as ``func(ctx, **args)`` on a thread of the host,
                with the call's ``AgentCtx`` and its checked arguments; a
                coroutine it returns runs on the loop of the ``run_async``
                that made the call, else on sandwit's own loop. Its result
                by kind: a tool's any value a plugin's may be, an agent's
                or behavior's a ``str``, a multimodal agent's a list of
                ``str``, ``ContentPart`` or their dicts (or one ``str``).
            name: What the AI calls it.
            kind: ``tool``, ``agent``, ``behavior`` or ``multimodal-agent``.
            docstring: What the AI reads.
            params: ``{"name": ..., "schema": JSON Schema, "required":
                bool}`` each (``required`` defaults to True), required ones
                first.
            description: A one-line summary [the docstring's first line].
            returns: A tool's result's JSON Schema, shown only.
            provider: Who offers it, as events, errors and handoffs name
                it (lowercase letters, digits, ``-``, ``_``; no plugin of
                the same set may have it as its id).

        Raises ``MethodSpecError`` listing what the host refuses.
        """
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> Kind: ...
    @property
    def provider(self) -> str: ...
    @classmethod
    def __class_getitem__(cls, item: Any) -> types.GenericAlias:
        """``HostMethod[P, R]``, for annotations at run time."""
    @property
    def func(self) -> Callable[_P, _R] | None:
        """The function (None for a tool source's method, which the host
        answers)."""
    @property
    def spec(self) -> dict[str, Any]:
        """The checked spec: name, kind, description, docstring, params
        (name, schema, required), returns."""
    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        """Calls the function (``TypeError`` for a tool source's method:
        call it in a run or with ``Toolbox.call``)."""

# ---- plugins and the host ---------------------------------------------------

@final
class Plugin:
    """A loaded, checked plugin (from ``Host.load_plugin``)."""

    @property
    def id(self) -> str: ...
    @property
    def sha256(self) -> str:
        """The component's SHA-256 (what a policy pins)."""
    @property
    def manifest(self) -> dict[str, Any]:
        """The checked manifest: id, name, version, author, description,
        methods (name, kind, description, docstring, params with JSON
        Schemas, returns), config_schema, capabilities."""
    @property
    def grants(self) -> list[str]:
        """The capabilities it may use: requested and granted."""
    @property
    def imports(self) -> list[str]:
        """The component's imports."""
    @property
    def prepared_instances(self) -> int:
        """Instances made ahead of the calls that need a new one (a run's
        first call of the plugin, a direct call), ready now."""
    def call(
        self, method: str, args: dict[str, Any] | None = None, *, ctx: AgentCtx | None = None
    ) -> MethodResult:
        """Calls ``method`` with ``args`` (parameter names to values) in a
        fresh instance under the host's call limits, with the GIL released.
        ``ctx`` defaults to ``AgentCtx("default")``. Raises ``CallError``
        (and ``TypeError``/``ValueError``/``OverflowError`` for arguments
        that cannot be sent)."""
    def call_async(
        self, method: str, args: dict[str, Any] | None = None, *, ctx: AgentCtx | None = None
    ) -> Coroutine[Any, Any, MethodResult]:
        """``call`` as a coroutine (await it, or make it a task, in a running
        event loop; a coroutine never awaited never calls). Cancelling its
        task ends the call."""

@final
class Toolbox:
    """The methods a run may call: plugins' and host methods (names unique
    across them, plugin ids unique). Reuse one set for many runs:
    interpreters prepared ahead of runs are made for the latest set."""

    def __new__(
        cls,
        plugins: Iterable[Plugin] | None = None,
        *,
        methods: Iterable[HostMethod[..., Any]] | None = None,
        filter: Callable[[AgentCtx, str, MethodSpec], bool] | None = None,
    ) -> Self:
        """The methods of ``plugins``, then the host methods ``methods``.
        ``filter(ctx, provider, method)``, if given, says which methods a
        context sees: asked for each method when a run starts (``run``,
        ``run_async``: when called) and by ``prompt(ctx)`` and
        ``openai_tools(ctx)``; an exception it raises is raised there.
        ``provider`` is a plugin's id or a host method's provider. Raises
        ``ToolboxError``."""
    @property
    def ids(self) -> list[str]:
        """The plugins' ids, in order."""
    @property
    def methods(self) -> list[str]:
        """The methods' names, in order, before any ``filter`` rule."""
    def filter(self, keep: Callable[[str, MethodSpec], bool]) -> Toolbox:
        """The set of the methods ``keep(provider, method)`` keeps: its
        prompt lists and its runs offer only those, and a run's code cannot
        call the others even through the raw import. The set's ``filter``
        rule still applies. Build it once per kind of context and keep
        it."""
    def prompt(self, ctx: AgentCtx | None = None) -> str:
        """The listing an LLM is given (what ``sandwit prompt`` prints) of
        the methods ``ctx`` sees: each method's Python signature, kind,
        provider and docstring."""
    def openai_tools(self, ctx: AgentCtx | None = None) -> list[dict[str, Any]]:
        """OpenAI function-calling definitions of the methods ``ctx`` sees
        (``{"type": "function", "function": {"name", "description",
        "parameters"}}``), from their names, docstrings and JSON
        Schemas."""
    def call(
        self, method: str, args: dict[str, Any] | None = None, *, ctx: AgentCtx | None = None
    ) -> MethodResult:
        """Calls ``method`` (of those ``ctx`` sees) with ``args`` directly,
        with no Python run: the tool call of an OpenAI-style loop, the
        model having asked for a tool by name. Under the set's host (the
        ``Host`` whose ``toolbox`` made it, else the one that loaded its
        first plugin): a plugin's method as ``Plugin.call`` calls it, a host
        method's function with its arguments checked against its schemas,
        both under the host's call limits and execution controls. Raises
        ``CallError`` (kind ``unknown_method`` for a method the set does not
        offer ``ctx``, ``denied`` for a plugin another host loaded), or
        ``SandwitError`` for a set with neither."""
    def call_async(
        self, method: str, args: dict[str, Any] | None = None, *, ctx: AgentCtx | None = None
    ) -> Coroutine[Any, Any, MethodResult]:
        """``call`` as a coroutine (cancelling its task ends the call)."""
    def __len__(self) -> int:
        """How many methods."""

@final
class Host:
    """A plugin host: loads plugins, runs Python code in the sandbox, calls
    methods. Thread-safe: every method that runs guest code releases the
    GIL, and many threads (and asyncio tasks) may run at once.

    A context manager, plain or async: ``with Host() as host:`` (``async
    with``) closes it at the block's end (see ``close``)."""

    def __new__(
        cls,
        *,
        cache_dir: StrPath | None = None,
        policy: StrPath | None = None,
        store: StrPath | None = None,
        limits: RunLimits | None = None,
        call_limits: CallLimits | None = None,
        python: StrPath | None = None,
        interpreter: InterpreterKind = "small",
        scientific_dir: StrPath | None = None,
        workspace: StrPath | None = None,
        workspace_max_mib: int | None = None,
        prepared_interpreters: int | None = None,
        prepared_plugin_instances: int | None = None,
        max_instances: int | None = None,
        cache_max_mib: int | None = None,
        max_running: int | None = None,
        max_waiting: int | None = None,
        max_wait_s: float | None = None,
        session_key: bytes | None = None,
    ) -> Self:
        """
        Args:
            cache_dir: Where compiled code is cached (a directory only this
                user can write) [``$SANDWIT_CACHE_DIR``, else
                ``$XDG_CACHE_HOME/sandwit``, else ``~/.cache/sandwit``].
            policy: The operator's policy file (TOML, docs/POLICY.md):
                capabilities granted, configuration and secrets [nothing
                granted]. Raises ``PolicyError``.
            store: The plugin store's SQLite file, made if missing [the
                policy's ``[store] url``, else in memory]. Its directory
                must exist: a missing one raises
                ``FileNotFoundError`` naming it (a directory given as the
                store, ``IsADirectoryError``). Or a PostgreSQL URL
                (``postgres://user:password@host:port/db``) that hosts
                running as replicas share: the store, and the execution
                controls' rate limits and chat budgets, hold across all of
                them (docs/DEPLOY.md). An unreachable server raises
                ``SandwitError`` naming it (never the password).
            limits: The default limits of runs (a scientific run's memory
                is 1 GiB instead).
            call_limits: The limits of every plugin call.
            python: The small interpreter's CPython component, a
                ``sandbox.wasm`` file [``$SANDWIT_PYTHON``, else the one
                built into the package]. A file (given or from the
                variable) that does not exist raises ``FileNotFoundError``
                here, naming it as the interpreter's.
            interpreter: The interpreter of runs that ask for none
                (``run(interpreter=...)``). Each kind is loaded at its first
                run (or ``warmup``), not here.
            scientific_dir: The scientific interpreter's directory, as
                sandwit's ``scripts/scientific`` unpacks it
                [``$SANDWIT_SCIENTIFIC``]. Without one, a scientific run (or
                ``interpreter="scientific"`` here) raises ``SandwitError``.
            workspace: Gives each chat a folder of its own under this
                directory, the working directory (``/workspace``) of runs
                of either interpreter, kept across the chat's runs and never
                another chat's [no files at all].
            workspace_max_mib: The most a chat's workspace may hold [64];
                a run that writes past it ends with the limit
                ``workspace``.
            prepared_interpreters: Small interpreters kept instantiated
                ahead of runs [2] (the scientific one keeps one ready).
            prepared_plugin_instances: Instances each plugin of the latest
                run keeps made ahead of a run's first call of it (fresh,
                nothing granted until taken; 0 for none) [1].
            max_instances: Component instances the host's pool holds at
                once [400].
            cache_max_mib: The most compiled code the cache keeps [1024].
            max_running: Runs executing at once, of either interpreter
                [the cores]: more wait for a slot, and a run's time limit
                counts from when it gets one. Raise it for runs that mostly
                wait on async host methods.
            max_waiting: Runs waiting for a slot at once; one past them ends
                at once with the limit ``queue``, its code not run [256].
            max_wait_s: How long a run waits for a slot before it ends with
                the limit ``queue`` [60 s].
            session_key: The key (32 bytes or more) sessions are signed
                with in the store: hosts over one store (replicas, or this
                one after a restart) need the same key to resume each
                other's sessions; a shorter one raises ``ValueError`` [a key
                for this host alone].
        """
    def close(self) -> None:
        """Closes the host: its interpreters (and those prepared ahead of
        runs) are dropped now, and its runtime's threads end once the runs
        and calls in flight, which go on to their end, have ended. Later
        runs, calls (its plugins' too), loads and warmups raise
        ``SandwitError`` saying the host is closed. Closing again does
        nothing; the properties stay readable."""
    def aclose(self) -> Coroutine[Any, Any, None]:
        """``close()``, as a coroutine."""
    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
    @property
    def runs_now(self) -> tuple[int, int]:
        """Runs executing now, and runs waiting for a run slot."""
    def __enter__(self) -> Host: ...
    def __exit__(self, exc_type: object, exc_value: object, traceback: object) -> bool:
        """Closes the host; exceptions propagate."""
    def __aenter__(self) -> Coroutine[Any, Any, Host]: ...
    def __aexit__(
        self, exc_type: object, exc_value: object, traceback: object
    ) -> Coroutine[Any, Any, bool]:
        """Closes the host; exceptions propagate."""
    @property
    def cache_dir(self) -> pathlib.Path | None:
        """The directory compiled code is cached in, if any."""
    @property
    def interpreter(self) -> InterpreterKind:
        """The interpreter of runs that ask for none."""
    @property
    def scientific_dir(self) -> pathlib.Path | None:
        """The scientific interpreter's directory, if any."""
    def sessions(
        self, ctx: AgentCtx | None = None, *, interpreter: InterpreterKind | None = None
    ) -> list[SessionInfo]:
        """The sessions of ``ctx``'s chat (the default context's when
        None), live in this host or stored, by name. A session
        (``run(..., session=NAME)``) is kept live between its runs and
        stored after each run that ends well, so another host over the same
        store with the same ``session_key`` resumes it; a run that fails
        leaves it as its last good run made it. It ends when closed or idle
        too long."""
    def close_session(
        self, name: str, ctx: AgentCtx | None = None, *, interpreter: InterpreterKind | None = None
    ) -> bool:
        """Ends the session ``name`` of ``ctx``'s chat, live and stored,
        dropping what it kept: whether there was one."""
    def session(
        self,
        name: str,
        *,
        ctx: AgentCtx | None = None,
        plugins: Toolbox | Iterable[Plugin] | None = None,
        limits: RunLimits | None = None,
        interpreter: InterpreterKind | None = None,
    ) -> Session:
        """A session of ``ctx``'s chat as a ``Session`` whose runs use these
        settings unless a run gives its own; nothing is made until its
        first run."""
    def fork_session(
        self,
        from_: str,
        to: str,
        *,
        ctx: AgentCtx | None = None,
        interpreter: InterpreterKind | None = None,
    ) -> SessionInfo:
        """Makes ``to`` a copy of the chat's session ``from_`` as its last
        good run left it; each goes on on its own. Raises ``SandwitError``
        (``SessionRefused: ...``, ``SessionLimit: ...``)."""
    def dump_session(
        self, name: str, *, ctx: AgentCtx | None = None, interpreter: InterpreterKind | None = None
    ) -> bytes:
        """The stored session ``name`` as bytes, signed with the host's
        ``session_key`` and bound to the chat and versions."""
    def load_session(
        self,
        dump: bytes,
        *,
        ctx: AgentCtx | None = None,
        name: str | None = None,
        plugins: Toolbox | Iterable[Plugin] | None = None,
        limits: RunLimits | None = None,
        interpreter: InterpreterKind | None = None,
    ) -> Session:
        """Stores ``dump`` as a session of ``ctx``'s chat (named ``name`` or
        as dumped) and returns it, its runs under the limits it was saved
        with unless ``limits`` is given. A changed, foreign-key, other-chat
        or other-version dump, or a name the chat has, raises
        ``SandwitError`` (``SessionRefused: ...``)."""
    def workspace_files(self, ctx: AgentCtx | None = None) -> list[WorkspaceFile]:
        """The files of ``ctx``'s chat's workspace (the default context's
        when None), each a dict with ``path`` and ``size``; links and
        folders left out. Raises ``SandwitError`` without workspaces."""
    def read_workspace_file(self, path: str, ctx: AgentCtx | None = None, *, max_bytes: int = 64 << 20) -> bytes:
        """The bytes of the file ``path`` (relative, ``/``-separated) of
        ``ctx``'s chat's workspace. Raises ``FileNotFoundError`` (missing,
        or a folder), ``PermissionError`` (a path leading outside),
        ``ValueError`` (a bad path, or larger than ``max_bytes``),
        ``SandwitError`` without workspaces."""
    @property
    def limits(self) -> RunLimits:
        """The default limits of runs (a scientific run's memory is 1 GiB
        unless the run gives its own limits)."""
    @property
    def call_limits(self) -> CallLimits:
        """The limits of every plugin call."""
    def warmup(self, *, interpreter: InterpreterKind | None = None) -> CodeSource:
        """Loads ``interpreter`` (the host's when None) now rather than at
        its first run, compiling it into the cache the first time (said on
        stderr: 10-30 s, the scientific one 1-3 min and 1.8 GB of memory);
        for the small one it also waits for the code its interpreters are
        reused and sessions stored with (compiled once per cache).
        Raises ``LoadError`` if it cannot be loaded, ``SandwitError`` for
        the scientific one without a directory."""
    def load_plugin(self, source: StrPath | bytes | bytearray | memoryview, *, name: str | None = None) -> Plugin:
        """Loads and checks a plugin from a path or its bytes (``name``
        labels bytes in errors). Raises ``LoadError`` listing every
        problem."""
    def tool_sources(self) -> list[HostMethod[..., Any]]:
        """The methods of the policy's tool sources (``[tools.<id>]``:
        OpenAPI documents whose operations, and MCP servers whose tools,
        become methods, see docs/TOOLS.md), loaded now: give them to a
        ``Toolbox`` as ``methods``. They are called under the policy's
        controls and ``[http]`` limits; an MCP server's session lasts while
        its methods do. Raises ``SandwitError`` naming a source that cannot
        be loaded."""
    def toolbox(
        self,
        plugins: Iterable[Plugin] | None = None,
        *,
        methods: Iterable[HostMethod[..., Any]] | None = None,
        filter: Callable[[AgentCtx, str, MethodSpec], bool] | None = None,
    ) -> Toolbox:
        """``Toolbox(plugins, methods=methods, filter=filter)``. Raises
        ``ToolboxError``."""
    def run(
        self,
        code: str,
        *,
        ctx: AgentCtx | None = None,
        plugins: Toolbox | Iterable[Plugin] | None = None,
        limits: RunLimits | None = None,
        inputs: dict[str, Any] | None = None,
        interpreter: InterpreterKind | None = None,
        on_event: Callable[[LiveEvent], object] | None = None,
        cancel: Cancel | None = None,
        session: str | None = None,
        functions: Mapping[str, Callable[..., Any]] | None = None,
    ) -> RunOutcome:
        """Runs ``code`` in a fresh sandboxed interpreter with the methods of
        ``plugins`` (those ``ctx`` sees) as functions, with the GIL
        released, and returns the outcome (a markdown fence around the
        whole code is stripped). ``ctx`` defaults to
        ``AgentCtx("default")``, ``limits`` to the host's (with 1 GiB of
        memory for a scientific run), ``interpreter`` to the host's.
        ``inputs`` become variables of the code (names that are ASCII
        identifiers, not keywords nor a method's; values as a method's arguments are: a
        bad one is a ``TypeError``, a bad name an ``InvalidInput`` error
        outcome); the outcome's ``result`` is what the code gives back. What
        the code does wrong is in the outcome, not raised; raises
        ``LoadError`` if the interpreter cannot be loaded, ``SandwitError``
        if a scientific run has no directory (``scientific_dir``).

        ``on_event`` is called on this thread with each live event, in
        order, as the run goes (the outcome is the same with or without
        it). An ``Exception`` it raises goes to ``sys.unraisablehook`` once
        and the run's later events are not shown; a ``KeyboardInterrupt``
        ends the run and is raised. ``cancel`` ends the run from another
        thread (status ``cancelled``); Ctrl-C ends it too.

        ``session`` (1 to 64 ASCII letters, digits, ``-``, ``_``, ``.``)
        runs the code in that session of ``ctx``'s chat: it finds the
        variables, imports and objects the session's last run left, and
        the first run starts it (either interpreter, each with sessions of
        its own; the outcome's ``session`` reports it).

        ``functions`` maps names to the application's own callables for
        this run: the code calls each as ``name(*args, **kwargs)``; a call
        pauses the run, the callable is called here with those arguments,
        and what it returns (a plain value, as a method's) or raises (by
        type: a builtin exception as itself, any other as a ``PluginError``
        subclass of its name) is what the code's call returns or raises.
        Each call runs the code again to it, without making any earlier
        call twice (``run_start`` for how); small interpreter."""
    def run_start(
        self,
        code: str,
        *,
        functions: Iterable[str] | Mapping[str, str | Callable[..., Any]],
        ctx: AgentCtx | None = None,
        plugins: Toolbox | Iterable[Plugin] | None = None,
        limits: RunLimits | None = None,
        inputs: dict[str, Any] | None = None,
        interpreter: InterpreterKind | None = None,
        on_event: Callable[[LiveEvent], object] | None = None,
        cancel: Cancel | None = None,
        session: str | None = None,
    ) -> ClientRun:
        """Starts ``code`` as ``run`` does with ``functions`` (names, or
        names mapped to docstrings or callables) the application answers
        itself: the returned ``ClientRun`` yields each call as a
        ``Call(name, args, kwargs, call_id)``, to answer with
        ``ClientRun.answer(value)`` or ``ClientRun.fail(exception)``;
        ``ClientRun.outcome`` is the run's once its calls end. A call is a
        durable pause: ``call_id`` is its token, good on any host over the
        same store and key (``Host.resume(call_id, result=...)`` or
        ``raise_=...``) until it expires. The wait counts in no limit of
        the run's. A function named as a method of ``plugins``, or not an
        identifier, gives an error outcome of type ``InvalidFunction``."""
    def run_async(
        self,
        code: str,
        *,
        ctx: AgentCtx | None = None,
        plugins: Toolbox | Iterable[Plugin] | None = None,
        limits: RunLimits | None = None,
        inputs: dict[str, Any] | None = None,
        interpreter: InterpreterKind | None = None,
        on_event: Callable[[LiveEvent], object] | None = None,
        cancel: Cancel | None = None,
        session: str | None = None,
        functions: Mapping[str, Callable[..., Any]] | None = None,
    ) -> Coroutine[Any, Any, RunOutcome]:
        """``run`` as a coroutine (await it, or make it a task with
        ``asyncio.create_task``, in a running event loop; a coroutine never
        awaited never runs): once awaited, the run goes on in the host's
        threads and completes an asyncio future the coroutine awaits;
        ``on_event`` is called on the loop's thread, every event before the
        result. Cancelling the task (``task.cancel()``,
        ``asyncio.wait_for``) ends the run and raises ``CancelledError``;
        ``cancel.cancel()`` ends it with status ``cancelled``. Host
        methods' coroutines run on this loop."""
    def pending(self, token: str, ctx: AgentCtx | None = None) -> Paused:
        """The call the run paused with ``token`` waits at, in ``ctx``'s
        chat (the outcome's ``paused`` dict), without resuming it: what a
        person is shown before answering; the token stays good. Raises
        ``SandwitError`` (``ResumeRefused: ...``) for a token that would
        not resume."""
    def discard(self, token: str, ctx: AgentCtx | None = None) -> Paused:
        """Ends the run that paused with ``token`` in ``ctx``'s chat without
        resuming it: the ``paused`` dict of the call it waited at, which is
        never made. The token is spent and the chat's place for a paused
        run freed. Raises ``SandwitError`` (``ResumeRefused: ...``) for a
        token that would not resume."""
    def resume(
        self,
        token: str,
        *,
        approve: bool = False,
        deny: str | None = None,
        result: Any = None,
        raise_: BaseException | None = None,
        ctx: AgentCtx | None = None,
        plugins: Toolbox | Iterable[Plugin] | None = None,
        on_event: Callable[[LiveEvent], object] | None = None,
        cancel: Cancel | None = None,
    ) -> RunOutcome:
        """Resumes the run that paused with ``token`` (its outcome's
        ``paused["token"]``) in ``ctx``'s chat with a person's answer,
        exactly one of: ``approve=True`` (the call is made now; not for the
        application's own functions), ``deny=REASON`` (the code's call
        raises ``PluginError`` of kind ``denied``), ``result=VALUE`` (the
        call returns VALUE, not None, without being made) or
        ``raise_=EXCEPTION`` (the call raises an exception of its type and
        message); otherwise ``ValueError`` (``result=None`` is no answer:
        ``Host.answer(token, None)`` answers None). The code runs again
        to the paused call without making any call twice, then goes on; the
        outcome is the run's as a whole. A token resumes once, on any host
        over the same store with the same ``session_key``; a spent, forged
        or other chat's one gives an error outcome of type
        ``ResumeRefused``."""
    def answer(
        self,
        token: str,
        value: Any,
        *,
        ctx: AgentCtx | None = None,
        plugins: Toolbox | Iterable[Plugin] | None = None,
        on_event: Callable[[LiveEvent], object] | None = None,
        cancel: Cancel | None = None,
    ) -> RunOutcome:
        """Resumes the run that paused with ``token`` as if its call
        returned ``value``, None included: ``resume(token, result=value)``
        for any value (``result=None`` there is no answer at all)."""

def warmup(
    *,
    cache_dir: StrPath | None = None,
    python: StrPath | None = None,
    interpreter: InterpreterKind = "small",
    scientific_dir: StrPath | None = None,
) -> CodeSource:
    """Compiles ``interpreter`` into the cache now (the first time on a
    machine, said on stderr: 10-30 s, the scientific one 1-3 min), so that
    later hosts with the same cache load it at once."""

def component_hash(bytes: bytes) -> str:
    """The SHA-256 (hex) of a component's bytes, as a policy pins it."""

def strip_code_fence(code: str) -> str:
    """``code`` without one markdown fence around all of it, as a run strips
    it."""
