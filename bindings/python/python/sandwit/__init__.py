"""sandwit: a WebAssembly plugin host for AI agents.

AI-written Python runs in a CPython interpreter compiled to a WebAssembly
component, and calls *sandbox methods* that plugins (WebAssembly components)
provide as plain Python functions, under fuel, time and memory limits::

    import sandwit

    host = sandwit.Host(limits=sandwit.RunLimits(timeout_s=10))
    calc = host.load_plugin("calc.wasm")
    plugins = host.toolbox([calc])
    out = host.run("print(calculate_sum(1, 2))", ctx=sandwit.AgentCtx("chat-1"),
                   plugins=plugins)
    assert (out.status, out.stdout) == ("ok", "3\\n")

Sandbox methods can be written in Python too (``@sandwit.method``), a set's
``filter`` rule chooses the methods each context sees, ``on_event`` shows a
run's output and events as they happen, and ``Cancel`` ends a run from
outside.

The interpreter is carried inside the package. Its first use on a machine
compiles it into the cache (10-30 s, said on stderr); ``sandwit.warmup()``
does that ahead. A second, scientific interpreter (CPython 3.15 with numpy,
pandas, matplotlib, scipy and the whole standard library; sandwit's
``scripts/scientific`` installs it) runs the code of a
``Host(interpreter="scientific", scientific_dir=...)``, or of a run that asks
for it (``host.run(code, interpreter="scientific")``).
"""

from ._sandwit import (
    EMBEDDED_PYTHON_SHA256,
    AgentCtx,
    CallError,
    CallLimits,
    Cancel,
    ContentPart,
    Handoff,
    Host,
    HostMethod,
    LimitHit,
    LoadError,
    MethodResult,
    MethodSpecError,
    Plugin,
    Toolbox,
    ToolboxError,
    PolicyError,
    RunError,
    RunLimits,
    RunOutcome,
    SandwitError,
    __version__,
    component_hash,
    strip_code_fence,
    warmup,
)
from ._calls import Call, ClientRun
from ._methods import method
from ._session import Session
from ._types import (
    CallEvent,
    ChatEvent,
    ChatMessage,
    CodeSource,
    ControlEvent,
    DeniedEvent,
    Event,
    InterpreterKind,
    Kind,
    LimitKind,
    LiveEvent,
    LogEvent,
    MethodSpec,
    OutputEvent,
    Paused,
    Status,
    StrPath,
    SystemMessageEvent,
    SessionInfo,
    SessionReport,
    WorkspaceFile,
)

__all__ = [
    "AgentCtx",
    "Call",
    "CallError",
    "CallEvent",
    "CallLimits",
    "Cancel",
    "ChatEvent",
    "ChatMessage",
    "ClientRun",
    "CodeSource",
    "ContentPart",
    "ControlEvent",
    "DeniedEvent",
    "EMBEDDED_PYTHON_SHA256",
    "Event",
    "Handoff",
    "Host",
    "HostMethod",
    "InterpreterKind",
    "Kind",
    "LimitHit",
    "LimitKind",
    "LiveEvent",
    "LoadError",
    "LogEvent",
    "MethodResult",
    "MethodSpec",
    "MethodSpecError",
    "OutputEvent",
    "Plugin",
    "Toolbox",
    "ToolboxError",
    "PolicyError",
    "RunError",
    "RunLimits",
    "RunOutcome",
    "SandwitError",
    "Status",
    "StrPath",
    "SystemMessageEvent",
    "Session",
    "SessionInfo",
    "Paused",
    "SessionReport",
    "WorkspaceFile",
    "__version__",
    "component_hash",
    "method",
    "strip_code_fence",
    "warmup",
]
