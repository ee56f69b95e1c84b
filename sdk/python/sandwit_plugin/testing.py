"""Test a plugin without building it: a fake host with an in-memory store,
config values, and the chat messages and log lines it received.

    from sandwit_plugin.testing import FakeHost
    from plugin import plugin

    def test_roll():
        host = FakeHost(config={"DEFAULT_SIDES": 1})
        assert host.call(plugin, "roll_dice", event_name="x") == ("behavior", "...")

Capabilities are granted as in the host: pass `grants` to refuse some.
"""

from __future__ import annotations

from typing import Any, Optional

from . import _host
from ._ctx import AgentCtx
from ._host import ServiceError
from ._plugin import NekroPlugin


class FakeHost:
    """The host's services in memory, bound while a call runs."""

    def __init__(
        self,
        config: Optional[dict[str, Any]] = None,
        grants: tuple[str, ...] = ("store", "config", "chat"),
        ctx: Optional[AgentCtx] = None,
    ) -> None:
        self.config = dict(config or {})
        self.grants = set(grants)
        self.ctx = ctx or AgentCtx(chat_key="chat-1", user_id="user-1")
        #: (scope, chat key or None, user id or None, key) -> value.
        self.store: dict[tuple[str, Optional[str], Optional[str], str], str | bytes] = {}
        #: ("text", str), ("image", (mime, bytes)) or ("system", (str, bool)).
        self.sent: list[tuple[str, Any]] = []
        self.logs: list[tuple[str, str]] = []

    # -- the backend --------------------------------------------------------

    def _need(self, capability: str) -> None:
        if capability not in self.grants:
            raise ServiceError("denied", f"the capability `{capability}` was not granted")

    def _key(self, scope: str, key: str) -> tuple[str, Optional[str], Optional[str], str]:
        self._need("store")
        if not key:
            raise ServiceError("invalid", "the key is empty")
        chat = self.ctx.chat_key if scope in ("chat", "chat-user") else None
        user = self.ctx.user_id if scope in ("user", "chat-user") else None
        if scope in ("user", "chat-user") and user is None:
            raise ServiceError("invalid", "the call has no user")
        return (scope, chat, user, key)

    def store_get(self, scope: str, key: str) -> Optional[str | bytes]:
        return self.store.get(self._key(scope, key))

    def store_set(self, scope: str, key: str, value: str | bytes) -> None:
        self.store[self._key(scope, key)] = value

    def store_delete(self, scope: str, key: str) -> bool:
        return self.store.pop(self._key(scope, key), None) is not None

    def store_keys(self, scope: str) -> list[str]:
        self._need("store")
        probe = self._key(scope, "-")[:3]
        return sorted(k[3] for k in self.store if k[:3] == probe)

    def config_get(self, key: str) -> Any:
        self._need("config")
        return self.config.get(key)

    def send_text(self, text: str) -> None:
        self._need("chat")
        self.sent.append(("text", text))

    def send_image(self, mime_type: str, data: bytes) -> None:
        self._need("chat")
        self.sent.append(("image", (mime_type, data)))

    def push_system(self, message: str, trigger_agent: bool) -> None:
        self._need("chat")
        self.sent.append(("system", (message, trigger_agent)))

    def log(self, level: str, message: str) -> None:
        self.logs.append((level, message))

    # -- calls --------------------------------------------------------------

    def _bound(self, run: Any) -> Any:
        previous = _host.backend
        _host.backend = self
        try:
            return run()
        finally:
            _host.backend = previous

    def call(self, plugin: NekroPlugin, method: str, **args: Any) -> tuple[str, Any]:
        """Calls `method` as the host would: (kind, result)."""
        return self._bound(lambda: plugin.invoke(self.ctx, method, args))

    def prompt_inject(self, plugin: NekroPlugin) -> Optional[str]:
        """The plugin's injected prompt in this host's context."""
        return self._bound(lambda: plugin.prompt_inject(self.ctx))

    def available_methods(self, plugin: NekroPlugin) -> list[str]:
        """The methods the plugin makes available in this host's context."""
        return self._bound(lambda: plugin.available_methods(self.ctx))
