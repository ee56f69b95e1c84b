"""`Session`: a chat's interpreter state across runs, as an object."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._sandwit import AgentCtx, Host, RunLimits, RunOutcome
    from ._types import SessionInfo


class Session:
    """A session of one chat: each run finds the globals, imports and
    objects the session's last good run left (``Host.run(...,
    session=NAME)``). Made by ``Host.session`` or ``Host.load_session``;
    nothing is kept until its first run. Runs use the session's ``ctx``,
    ``plugins``, ``limits`` and ``interpreter`` unless they give their own.
    A ``with`` block closes it at its end."""

    def __init__(
        self,
        host: Host,
        name: str,
        *,
        ctx: AgentCtx | None = None,
        plugins: Any = None,
        limits: RunLimits | None = None,
        interpreter: str | None = None,
    ) -> None:
        self.host = host
        self.name = name
        self.ctx = ctx
        self.plugins = plugins
        self.limits = limits
        self.interpreter = interpreter
        self.closed = False

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<sandwit.Session {self.name!r} ({state})>"

    def _options(self, options: dict[str, Any]) -> dict[str, Any]:
        if self.closed:
            raise ValueError(f"the session {self.name!r} is closed")
        for key in ("ctx", "plugins", "limits", "interpreter"):
            if options.get(key) is None:
                options[key] = getattr(self, key)
        options["session"] = self.name
        return options

    def _where(self) -> dict[str, Any]:
        if self.closed:
            raise ValueError(f"the session {self.name!r} is closed")
        return {"ctx": self.ctx, "interpreter": self.interpreter}

    def run(self, code: str, **options: Any) -> RunOutcome:
        """``Host.run(code, session=name, ...)`` with the session's settings."""
        return self.host.run(code, **self._options(options))

    def run_async(self, code: str, **options: Any) -> Any:
        """``Host.run_async`` in the session: an awaitable outcome."""
        return self.host.run_async(code, **self._options(options))

    def fork(self, name: str) -> Session:
        """A new session ``name`` of the same chat, a copy of this one as its
        last good run left it; each goes on on its own."""
        self.host.fork_session(self.name, name, **self._where())
        return Session(
            self.host,
            name,
            ctx=self.ctx,
            plugins=self.plugins,
            limits=self.limits,
            interpreter=self.interpreter,
        )

    def reset(self) -> bool:
        """Empties the session (its next run starts afresh): whether it held
        anything."""
        where = self._where()
        return self.host.close_session(self.name, where["ctx"], interpreter=where["interpreter"])

    def dump(self) -> bytes:
        """The session as bytes, signed and bound to its chat and versions:
        ``Host.load_session`` takes it back on a host with the same
        ``session_key``."""
        return self.host.dump_session(self.name, **self._where())

    def info(self) -> SessionInfo | None:
        """The session as ``Host.sessions`` lists it, or None before its first
        run (or after a reset)."""
        where = self._where()
        listed = self.host.sessions(where["ctx"], interpreter=where["interpreter"])
        return next((s for s in listed if s["name"] == self.name), None)

    def close(self) -> None:
        """Ends the session, dropping what it kept; the object runs nothing
        more."""
        if not self.closed:
            self.reset()
            self.closed = True

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
