"""sandwit: a WebAssembly plugin host for AI agents.

AI-written Python runs in a CPython interpreter compiled to a WebAssembly
component, and calls *sandbox methods* that plugins (WebAssembly components)
provide as plain Python functions, under fuel, time and memory limits::

    import sandwit

    host = sandwit.Host(limits=sandwit.RunLimits(timeout_s=10))
    calc = host.load_plugin("calc.wasm")
    plugins = host.plugin_set([calc])
    out = host.run("print(calculate_sum(1, 2))", ctx=sandwit.AgentCtx("chat-1"),
                   plugins=plugins)
    assert (out.status, out.stdout) == ("ok", "3\\n")

The interpreter is carried inside the package. Its first use on a machine
compiles it into the cache (10-30 s, said on stderr); ``sandwit.warmup()``
does that ahead.
"""

from ._sandwit import (
    EMBEDDED_PYTHON_SHA256,
    AgentCtx,
    CallError,
    CallLimits,
    ContentPart,
    Handoff,
    Host,
    LimitHit,
    LoadError,
    MethodResult,
    Plugin,
    PluginSet,
    PluginSetError,
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

__all__ = [
    "EMBEDDED_PYTHON_SHA256",
    "AgentCtx",
    "CallError",
    "CallLimits",
    "ContentPart",
    "Handoff",
    "Host",
    "LimitHit",
    "LoadError",
    "MethodResult",
    "Plugin",
    "PluginSet",
    "PluginSetError",
    "PolicyError",
    "RunError",
    "RunLimits",
    "RunOutcome",
    "SandwitError",
    "__version__",
    "component_hash",
    "strip_code_fence",
    "warmup",
]
