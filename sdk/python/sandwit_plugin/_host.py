"""The host's services as the SDK calls them: the component's WIT imports
in a build (`_component`), a fake in unit tests (`testing`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Protocol

if TYPE_CHECKING:
    from ._http import Url


class ServiceError(Exception):
    """A host service refused a request: `kind` is `denied` (the capability
    was not granted), `invalid`, `limit-exceeded` or `unavailable`."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


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
        self, method: str, url: "Url", headers: list[tuple[str, bytes]], body: bytes, timeout: Optional[float]
    ) -> tuple[int, list[tuple[str, bytes]], bytes]:
        """(status, headers, body); raises `_http.RequestError`."""
        ...


class Unbound:
    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(
            "no host: sandwit_plugin runs inside a component built by "
            "`sandwit plugin build`, or under sandwit_plugin.testing"
        )


#: The backend calls go to; set by `_component` or `testing`.
backend: Backend = Unbound()  # type: ignore[assignment]
