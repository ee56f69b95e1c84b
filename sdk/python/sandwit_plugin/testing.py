"""Test a plugin without building it: a fake host with an in-memory store,
config values, and the chat messages and log lines it received.

    from sandwit_plugin.testing import FakeHost
    from plugin import plugin

    def test_roll():
        host = FakeHost(config={"DEFAULT_SIDES": 1})
        assert host.call(plugin, "roll_dice", event_name="x") == ("behavior", "...")

Capabilities are granted as in the host: a call may use what the plugin
requests (`NekroPlugin.capabilities`) and `grants` grants, so pass `grants`
to refuse some, and a capability the plugin forgot to request is denied here
as it is in production. HTTP requests are answered by the responses given to
`add_response` (none reaches the network), for the hosts both requested and
granted by `http:<host>[:<port>]`:

    host = FakeHost(grants=("config", "http:api.example.com"))
    host.add_response("https://api.example.com/v1/current?city=Porto", json={"temperature_c": 17.5})
    host.call(plugin, "current_weather", city="Porto")
    assert host.requests[0].headers["x-api-key"] == "..."
"""

from __future__ import annotations

import json as _json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional

from . import _host
from ._ctx import AgentCtx
from ._host import ServiceError
from ._http import RequestError, Url
from ._plugin import NekroPlugin


@dataclass
class FakeRequest:
    """A request a plugin sent to a `FakeHost`."""

    method: str
    url: str
    #: Lowercase names; a repeated header's values joined with `, `.
    headers: dict[str, str]
    content: bytes
    #: The timeout the plugin gave, in seconds, or None.
    timeout: Optional[float]

    def json(self) -> Any:
        """The body parsed as JSON."""
        return _json.loads(self.content)


@dataclass
class _Route:
    method: str
    url: str
    status: int = 200
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    content: bytes = b""
    error: Optional[tuple[str, str]] = None


def _port_matches(port: str, wanted: int) -> bool:
    if port == "*":
        return True
    if port == "":
        return wanted in (80, 443)
    return port.isdigit() and int(port) == wanted


def http_granted(grants: set[str], host: str, port: int) -> bool:
    """Whether a `http:<host>[:<port>]` grant (`*.domain` for subdomains,
    `:*` for any port, no port for 80 and 443) allows `host` (lowercase, an
    IPv6 address bracketed) on `port`, as the host decides."""
    for grant in grants:
        if not grant.startswith("http:"):
            continue
        target = grant[5:].lower()
        if target.startswith("["):
            name, _, rest = target.partition("]")
            name, gport = name + "]", rest.removeprefix(":")
        else:
            name, _, gport = target.partition(":")
        if name.startswith("*."):
            ok = host.endswith(name[1:]) and len(host) > len(name) - 1
        else:
            ok = host == name
        if ok and _port_matches(gport, port):
            return True
    return False


def http_allowed(requested: Iterable[str], granted: Iterable[str], host: str, port: int) -> bool:
    """Whether the host lets a plugin that requests `requested` and is
    granted `granted` send a request to `host` on `port`: the host keeps the
    intersection of the two (`Grants::effective`), and as patterns intersect
    exactly, a request is in it when some requested and some granted
    `http:` capability each allow it."""
    return http_granted(set(requested), host, port) and http_granted(set(granted), host, port)


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
        #: The HTTP requests the plugin sent, in order (refused ones too).
        self.requests: list[FakeRequest] = []
        self._routes: list[_Route] = []
        #: The capabilities the plugin being called requests, while a call runs.
        self._requested: Optional[list[str]] = None

    # -- faking HTTP --------------------------------------------------------

    def add_response(
        self,
        url: str,
        method: str = "GET",
        *,
        status: int = 200,
        headers: Optional[Mapping[str, str]] = None,
        content: bytes = b"",
        text: Optional[str] = None,
        json: Any = None,
    ) -> None:
        """Answers `method url` (the whole URL, query included) with this
        response, as often as it is asked, until another answer for it is
        added; `text` and `json` set the body and its content type."""
        raw = [(k.lower(), v.encode()) for k, v in (headers or {}).items()]
        if json is not None:
            content = _json.dumps(json).encode()
            raw.append(("content-type", b"application/json"))
        elif text is not None:
            content = text.encode()
            raw.append(("content-type", b"text/plain; charset=utf-8"))
        self._routes.append(_Route(method.upper(), str(Url.parse(url)), status, raw, content))

    def fail_request(self, url: str, method: str = "GET", kind: str = "unavailable", message: str = "") -> None:
        """Makes `method url` fail as the host would fail it: `kind` is
        `unavailable` (connection refused, timeout), `limit-exceeded` (a
        body past the host's cap) or `denied`."""
        detail = message or f"http: {Url.parse(url).authority} failed: the connection was refused"
        self._routes.append(_Route(method.upper(), str(Url.parse(url)), error=(kind, detail)))

    # -- the backend --------------------------------------------------------

    def _requests(self) -> list[str]:
        # Outside a call (a backend method called directly) only the grants
        # decide, as no plugin is known.
        return list(self.grants) if self._requested is None else self._requested

    def _need(self, capability: str) -> None:
        if capability not in self.grants or capability not in self._requests():
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

    def http_request(
        self, method: str, url: Url, headers: list[tuple[str, bytes]], body: bytes, timeout: Optional[float]
    ) -> tuple[int, list[tuple[str, bytes]], bytes]:
        joined: dict[str, str] = {}
        for name, value in headers:
            text = value.decode("latin-1")
            joined[name] = f"{joined[name]}, {text}" if name in joined else text
        self.requests.append(FakeRequest(method, str(url), joined, body, timeout))
        if not http_allowed(self._requests(), self.grants, url.host, url.port):
            raise RequestError(
                "denied",
                f"http: the host did not grant a capability for {url.authority} "
                f"(request one like `http:{url.authority}`)",
            )
        for route in reversed(self._routes):
            if route.method == method and route.url == str(url):
                if route.error is not None:
                    raise RequestError(*route.error)
                content = b"" if method == "HEAD" else route.content
                return route.status, list(route.headers), content
        raise RequestError(
            "unavailable", f"http: FakeHost has no response for {method} {url} (FakeHost.add_response)"
        )

    # -- calls --------------------------------------------------------------

    def _bound(self, plugin: NekroPlugin, run: Any) -> Any:
        previous = (_host.backend, self._requested)
        _host.backend, self._requested = self, list(plugin.capabilities)
        try:
            return run()
        finally:
            _host.backend, self._requested = previous

    def call(self, plugin: NekroPlugin, method: str, **args: Any) -> tuple[str, Any]:
        """Calls `method` as the host would: (kind, result)."""
        return self._bound(plugin, lambda: plugin.invoke(self.ctx, method, args))

    def prompt_inject(self, plugin: NekroPlugin) -> Optional[str]:
        """The plugin's injected prompt in this host's context."""
        return self._bound(plugin, lambda: plugin.prompt_inject(self.ctx))

    def available_methods(self, plugin: NekroPlugin) -> list[str]:
        """The methods the plugin makes available in this host's context."""
        return self._bound(plugin, lambda: plugin.available_methods(self.ctx))
