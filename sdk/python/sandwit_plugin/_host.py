"""The host's services as the SDK calls them: the component's WIT imports
in a build (`_component`), a fake in unit tests (`testing`). With what they
take and raise: `ServiceError`, and for outbound HTTP the parsed `Url` a
request goes to and the `RequestError` of one that gets no response (the
client, `_http`, builds on them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Protocol
from urllib.parse import urlencode, urlsplit

#: The longest URL sent, in bytes; a longer one is refused before the host
#: sees it (no capability matches a host that long anyway).
MAX_URL_BYTES = 8192


class ServiceError(Exception):
    """A host service refused a request: `kind` is `denied` (the capability
    was not granted), `invalid`, `limit-exceeded` or `unavailable`."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class HTTPError(Exception):
    """Any error of the HTTP client (httpx's base class of the same name)."""


class RequestError(HTTPError, ServiceError):
    """The request got no response: `kind` is `denied` (the host did not
    grant the host and port, or the name resolves to an internal address),
    `invalid` (a bad URL, method or header), `limit-exceeded` (the response
    body is past the host's cap) or `unavailable` (the connection failed or
    timed out). Uncaught, it fails the method; a `denied` one fails it as
    denied."""


@dataclass(frozen=True)
class Url:
    """A parsed `http(s)://authority/path?query` URL."""

    scheme: str
    #: `host[:port]` as written (an IPv6 host bracketed).
    authority: str
    #: The host, lowercase, an IPv6 address bracketed.
    host: str
    port: int
    #: The path and query, at least `/`.
    path: str

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}{self.path}"

    @classmethod
    def parse(cls, url: str, params: Optional[Mapping[str, Any]] = None) -> "Url":
        """Parses `url` and appends `params` to its query."""
        if not isinstance(url, str):
            raise RequestError("invalid", f"http: the URL must be a str, not {type(url).__name__}")
        if len(url.encode()) > MAX_URL_BYTES:
            raise RequestError("invalid", f"http: the URL is longer than {MAX_URL_BYTES} bytes")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as e:
            raise RequestError("invalid", f"http: `{url}` is not a valid URL: {e}") from None
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise RequestError("invalid", f"http: `{url}` is not an http:// or https:// URL")
        if not parts.hostname or "@" in parts.netloc:
            raise RequestError("invalid", f"http: `{url}` has no usable host")
        host = parts.hostname.lower()
        if ":" in host:
            host = f"[{host}]"
        path = parts.path or "/"
        query = parts.query
        if params:
            extra = urlencode(list(params.items()), doseq=True)
            query = f"{query}&{extra}" if query else extra
        if query:
            path = f"{path}?{query}"
        return cls(
            scheme=scheme,
            authority=parts.netloc,
            host=host,
            port=port if port is not None else (443 if scheme == "https" else 80),
            path=path,
        )


class Backend(Protocol):
    """What the SDK asks of the host. Scopes: "chat", "user", "chat-user",
    "global" (`wit/plugin@0.1.0/services.wit`)."""

    def store_get(self, scope: str, key: str) -> Optional[str | bytes]: ...
    def store_set(self, scope: str, key: str, value: str | bytes) -> None: ...
    def store_delete(self, scope: str, key: str) -> bool: ...
    def store_keys(self, scope: str) -> list[str]: ...
    def config_get(self, key: str) -> Any: ...
    def send_text(self, text: str) -> None: ...
    def send_image(self, mime_type: str, data: bytes) -> None: ...
    def push_system(self, message: str, trigger_agent: bool) -> None: ...
    def log(self, level: str, message: str) -> None: ...
    def http_request(
        self, method: str, url: Url, headers: list[tuple[str, bytes]], body: bytes, timeout: Optional[float]
    ) -> tuple[int, list[tuple[str, bytes]], bytes]:
        """(status, headers, body); raises `RequestError`."""
        ...


class Unbound:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(
            "no host: sandwit_plugin runs inside a component built by "
            "`sandwit plugin build`, or under sandwit_plugin.testing"
        )


#: The backend calls go to; set by `_component` or `testing`.
backend: Backend = Unbound()  # type: ignore[assignment]
