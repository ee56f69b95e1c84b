"""The agent context a method is called with, and the chat capability."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from . import _host
from ._aio import Ready
from ._http import HttpClient, http


@dataclass
class AgentCtx:
    """Who and where the AI code runs for, as Nekro Agent's `AgentCtx`."""

    #: The conversation's key.
    chat_key: str
    #: The user, if known.
    user_id: Optional[str] = None
    #: The channel's id, if any.
    channel_id: Optional[str] = None
    #: The channel's name, if any.
    channel_name: Optional[str] = None
    #: The channel's type (e.g. `group`, `private`), if any.
    channel_type: Optional[str] = None
    #: The chat adapter's key, if any.
    adapter_key: Optional[str] = None

    @property
    def from_chat_key(self) -> str:
        """Nekro's name for `chat_key` (the chat a store call or a message
        names)."""
        return self.chat_key

    @property
    def from_user_id(self) -> Optional[str]:
        """Nekro's (older) name for `user_id`."""
        return self.user_id

    @property
    def from_platform_userid(self) -> Optional[str]:
        """Nekro's name for `user_id`."""
        return self.user_id

    @property
    def http(self) -> HttpClient:
        """The HTTP client (capability `http:<host>`), as `plugin.http`."""
        return http

    def send_text(self, content: str) -> Ready[None]:
        """Sends a text message to the chat (capability `chat`)."""
        return Ready.of(lambda: _host.backend.send_text(str(content)))

    def send_image(self, image: bytes, mime_type: str = "image/png") -> Ready[None]:
        """Sends an image, given by its bytes, to the chat (capability `chat`)."""
        return Ready.of(lambda: _host.backend.send_image(mime_type, bytes(image)))

    def push_system(self, message: str, trigger_agent: bool = False) -> Ready[None]:
        """Adds a system message to the conversation; with `trigger_agent` the
        agent answers it in a new round (capability `chat`)."""
        return Ready.of(lambda: _host.backend.push_system(str(message), trigger_agent))
