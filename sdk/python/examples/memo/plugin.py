"""A per-user memo store, after Nekro Agent's built-in note plugins: memos
kept in the host's store for the current user, and their count injected into
the chat's prompt."""

import json

from sandwit_plugin import AgentCtx, NekroPlugin, PluginError, SandboxMethodType

plugin = NekroPlugin(
    name="Memo",
    module_name="memo",
    description="Keeps short memos for each user.",
    version="0.1.0",
    author="sandwit",
    url="https://example.org/sandwit/memo",
)

MAX_MEMOS = 100
MAX_MEMO_CHARS = 1000


async def _memos(_ctx: AgentCtx) -> list:
    text = await plugin.store.get(user_key=_ctx.user_id or "", store_key="memos")
    return json.loads(text) if text else []


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="记下", description="Save a memo for the user")
async def save_memo(_ctx: AgentCtx, memo: str) -> int:
    """Save a memo for the current user, kept across chats.

    Args:
        memo: The text to keep (at most 1000 characters).

    Returns:
        int: How many memos the user has now.

    Example:
        >>> save_memo("Ada prefers tea.")
        1
    """
    if not _ctx.user_id:
        raise PluginError("memos need a user", "denied")
    memo = memo.strip()
    if not memo or len(memo) > MAX_MEMO_CHARS:
        raise PluginError(f"a memo is 1 to {MAX_MEMO_CHARS} characters", "invalid-arguments")
    memos = await _memos(_ctx)
    if len(memos) >= MAX_MEMOS:
        raise PluginError(f"the user has {MAX_MEMOS} memos; clear some first")
    memos.append(memo)
    await plugin.store.set(user_key=_ctx.user_id, store_key="memos", value=json.dumps(memos))
    return len(memos)


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="查看", description="List the user's memos")
async def list_memos(_ctx: AgentCtx) -> list[str]:
    """List the current user's memos, oldest first.

    Returns:
        list[str]: The memos.
    """
    return await _memos(_ctx)


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="清空", description="Clear the user's memos")
async def clear_memos(_ctx: AgentCtx) -> bool:
    """Forget all of the current user's memos.

    Returns:
        bool: Whether there were any.
    """
    return await plugin.store.delete(user_key=_ctx.user_id or "", store_key="memos")


@plugin.mount_prompt_inject_method(name="memo_count", description="How many memos the user has")
async def memo_count(_ctx: AgentCtx) -> str:
    if not _ctx.user_id:
        return ""
    count = len(await _memos(_ctx))
    return f"The user has {count} memo(s) saved; list_memos() reads them." if count else ""


@plugin.mount_collect_methods()
async def collect(_ctx: AgentCtx) -> list:
    # Without a user there is nobody to keep memos for.
    return [save_memo, list_memos, clear_memos] if _ctx.user_id else []
