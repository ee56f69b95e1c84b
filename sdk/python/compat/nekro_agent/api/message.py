"""`nekro_agent.api.message`: messages to the chat a call is for.

A plugin reaches only the chat of the call it serves: a `chat_key` naming
another chat is refused (`PluginError`, kind `denied`), a security
difference from Nekro, where a plugin may post anywhere."""

from __future__ import annotations

from typing import Optional

from sandwit_plugin import AgentCtx, PluginError
from sandwit_plugin._aio import Ready


def _check(chat_key: str, ctx: Optional[AgentCtx]) -> AgentCtx:
    if ctx is None:
        raise PluginError("message: pass the call's context (`_ctx`) as Nekro's API takes it", "invalid-arguments")
    if chat_key != ctx.chat_key:
        raise PluginError(
            "message: chat_key is not the current chat's; a plugin reaches only the chat it is called for",
            "denied",
        )
    return ctx


def send_text(chat_key: str, message: str, ctx: Optional[AgentCtx] = None, record: bool = True) -> Ready[None]:
    """Sends `message` to the chat (capability `chat`). `record` is Nekro's
    (whether the bot remembers it); the host records every message."""
    return _check(chat_key, ctx).send_text(message)


def send_image(
    chat_key: str, image: bytes, ctx: Optional[AgentCtx] = None, record: bool = True, mime_type: str = "image/png"
) -> Ready[None]:
    """Sends an image, given by its bytes (a plugin has no files, so not by
    a path as in Nekro), to the chat (capability `chat`)."""
    if isinstance(image, str):
        raise PluginError(
            "message.send_image: a sandwit plugin has no files; pass the image's bytes", "invalid-arguments"
        )
    return _check(chat_key, ctx).send_image(image, mime_type)


def push_system(chat_key: str, message: str, ctx: Optional[AgentCtx] = None, trigger_agent: bool = False) -> Ready[None]:
    """Adds a system message to the chat; with `trigger_agent` the agent
    answers it in a new round (capability `chat`)."""
    return _check(chat_key, ctx).push_system(message, trigger_agent)


def send_file(chat_key: str, file_path: str, ctx: Optional[AgentCtx] = None, record: bool = True) -> Ready[None]:
    """Not supported: a sandwit plugin has no files."""
    raise PluginError("message.send_file: a sandwit plugin has no files; send text, or an image's bytes")


__all__ = ["push_system", "send_file", "send_image", "send_text"]
