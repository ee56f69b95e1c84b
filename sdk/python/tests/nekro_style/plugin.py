"""A plugin written as Nekro Agent's documentation shows it, with nothing
changed for sandwit: Nekro's import paths, pydantic's `Field` with
`ExtraField`, the four method types in both mounting forms, a config read at
module level, the store keyed by `_ctx.from_chat_key`, prompt inject,
collect methods, init and cleanup hooks, the logger and the message API."""

from typing import List

from pydantic import Field

from nekro_agent.api import core, i18n, message
from nekro_agent.api.plugin import ConfigBase, ExtraField, NekroPlugin, SandboxMethodType
from nekro_agent.api.schemas import AgentCtx

plugin = NekroPlugin(
    name="笔记",
    module_name="nekro_notes",
    description="Keeps a note per chat.",
    version="0.1.0",
    author="tests",
    url="https://example.org/nekro_notes",
    support_adapter=["onebot_v11", "sse"],
)


@plugin.mount_config()
class NoteConfig(ConfigBase):
    MAX_NOTE_LENGTH: int = Field(
        default=72,
        title="单条笔记最大显示长度",
        json_schema_extra=ExtraField(
            i18n_title=i18n.i18n_text(zh_CN="单条笔记最大显示长度", en_US="Max Note Display Length"),
        ).model_dump(),
    )
    ALLOW_GROUPS: List[str] = Field(default=[], title="允许的群组", description="如果为空，则允许所有群组")
    API_TOKEN: str = Field(default="", title="Token", json_schema_extra=ExtraField(is_secret=True).model_dump())


config = plugin.get_config(NoteConfig)
store = plugin.store
STARTED = []


@plugin.mount_init_method()
async def init():
    STARTED.append(True)
    core.logger.info("notes ready")


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, "记笔记")
async def set_note(_ctx: AgentCtx, chat_key: str, text: str) -> int:
    """Keep a note for the chat.

    Args:
        chat_key (str): The chat.
        text (str): The note.

    Returns:
        int: The note's length as kept.
    """
    text = text[: config.MAX_NOTE_LENGTH]
    await store.set(chat_key=_ctx.from_chat_key, store_key="note", value=text)
    plugin.logger.info("kept a note of {} characters", len(text))
    return len(text)


@plugin.mount_sandbox_method(SandboxMethodType.BEHAVIOR, name="读笔记", description="Read the note")
async def read_note(_ctx: AgentCtx, chat_key: str) -> str:
    """Read the chat's note back, sending it to the chat too.

    Args:
        chat_key (str): The chat.

    Returns:
        str: The note, or an empty string.
    """
    note = await store.get(chat_key=_ctx.from_chat_key, store_key="note") or ""
    await message.send_text(chat_key, f"note: {note}", _ctx)
    return note


@plugin.mount_sandbox_method(SandboxMethodType.AGENT, name="整理", description="Summarise")
async def summarise(_ctx: AgentCtx) -> str:
    """Hand the note back to the AI in a new round.

    Returns:
        str: What the AI reads.
    """
    return f"The chat's note: {await store.get(chat_key=_ctx.chat_key, store_key='note') or '(none)'}"


@plugin.mount_sandbox_method(SandboxMethodType.MULTIMODAL_AGENT, name="看图", description="An image")
async def show(_ctx: AgentCtx) -> list:
    """Show the AI a picture.

    Returns:
        list: Text and an image URL.
    """
    return [{"type": "text", "text": "a picture"}, {"type": "image_url", "image_url": {"url": "https://example.org/a.png"}}]


@plugin.mount_prompt_inject_method("note_prompt")
async def note_prompt(_ctx: AgentCtx):
    note = await store.get(chat_key=_ctx.from_chat_key, store_key="note")
    return f"The chat's note: {note}" if note else ""


@plugin.mount_collect_methods()
async def collect_available_methods(_ctx: AgentCtx):
    allowed = config.ALLOW_GROUPS
    if allowed and _ctx.channel_id not in allowed:
        return [read_note]
    return [set_note, read_note, summarise, show]


@plugin.mount_cleanup_method()
async def clean_up():
    """Nothing to clean: an instance is discarded whole."""
