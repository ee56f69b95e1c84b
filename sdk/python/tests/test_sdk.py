"""Unit tests of the Python plugin SDK, on the host's Python with a fake host
(sandwit_plugin.testing); tests/all/python_plugins.rs runs built plugins."""

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Literal, Optional

import pytest

from sandwit_plugin import AgentCtx, ConfigBase, Image, NekroPlugin, PluginError, SandboxMethodType
from sandwit_plugin._values import decode, encode
from sandwit_plugin.testing import FakeHost

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load_example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / name / "plugin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def new_plugin():
    return NekroPlugin(name="T", module_name="t", description="d", version="0.1.0", author="a")


def test_schemas_and_docs_come_from_hints_and_the_docstring():
    plugin = new_plugin()

    @plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="Search")
    async def search(_ctx: AgentCtx, query: str, limit: int = 5, tags: Optional[list[str]] = None,
                     mode: Literal["a", "b"] = "a") -> dict[str, float]:
        """Search the notes.

        Args:
            query: What to look for,
                over two lines.
            limit (int): The most results.

        Returns:
            dict: Scores by note.
        """

    [m] = plugin.manifest()["methods"]
    assert m["name"] == "search" and m["kind"] == "tool"
    assert m["description"] == "Search the notes."
    assert m["docstring"].startswith("Search the notes.\n\nArgs:\n    query:")
    params = {n: (json.loads(s), r) for n, s, r in m["params"]}
    assert params["query"] == ({"type": "string", "description": "What to look for, over two lines."}, True)
    assert params["limit"] == ({"type": "integer", "description": "The most results.", "default": 5}, False)
    assert params["tags"][0] == {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]}
    assert params["tags"][1] is False
    assert params["mode"][0]["enum"] == ["a", "b"]
    assert json.loads(m["returns"]) == {"type": "object", "additionalProperties": {"type": "number"}}


def test_a_method_needs_the_context_first_and_a_plain_signature():
    plugin = new_plugin()
    mount = plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="x")

    def no_context():
        pass

    def var_args(_ctx, *a):
        pass

    with pytest.raises(ValueError, match="context"):
        mount(no_context)
    with pytest.raises(ValueError, match=r"\*args"):
        mount(var_args)
    with pytest.raises(ValueError, match="identifier"):
        mount(lambda _ctx: None)
    with pytest.raises(ValueError, match="module_name"):
        NekroPlugin(name="T", module_name="Not An Id", description="", version="1", author="")


def test_results_by_kind_for_async_and_plain_functions():
    plugin = new_plugin()
    host = FakeHost()

    @plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="t")
    def tool(_ctx, n: int):
        return {"n": n, "b": b"\x00"}

    @plugin.mount_sandbox_method(SandboxMethodType.AGENT, name="a")
    async def agent(_ctx):
        return 42

    @plugin.mount_sandbox_method(SandboxMethodType.MULTIMODAL_AGENT, name="m")
    async def multi(_ctx):
        return ["look", Image(b"png", "image/png"),
                {"type": "image_url", "image_url": {"url": "https://x.org/a.png"}}]

    @plugin.mount_sandbox_method(SandboxMethodType.BEHAVIOR, name="s")
    async def sleeper(_ctx):
        await asyncio.sleep(0)
        return "never"

    assert host.call(plugin, "tool", n=3) == ("tool", {"n": 3, "b": b"\x00"})
    with pytest.raises(PluginError, match="returned a int, not a str"):
        host.call(plugin, "agent")
    assert host.call(plugin, "multi") == ("multimodal_agent", [
        ("text", "look"), ("image", ("image/png", b"png")), ("image-url", "https://x.org/a.png")])
    with pytest.raises(RuntimeError, match="no event loop"):
        host.call(plugin, "sleeper")
    with pytest.raises(PluginError) as unknown:
        host.call(plugin, "nope")
    assert unknown.value.kind == "unknown-method"


def test_the_store_reaches_only_the_current_chat_and_user():
    plugin = new_plugin()
    host = FakeHost(ctx=AgentCtx(chat_key="c1", user_id="u1"))

    @plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="t")
    async def put(_ctx, chat_key: str = "", user_key: str = ""):
        await plugin.store.set(chat_key=chat_key, user_key=user_key, store_key="k", value="v")
        return await plugin.store.get(chat_key=chat_key, user_key=user_key, store_key="k")

    assert host.call(plugin, "put", chat_key="c1") == ("tool", "v")
    assert host.call(plugin, "put", chat_key="c1", user_key="u1") == ("tool", "v")
    assert ("chat", "c1", None, "k") in host.store and ("chat-user", "c1", "u1", "k") in host.store
    for other in ({"chat_key": "c2"}, {"user_key": "u2"}):
        with pytest.raises(PluginError, match="not the current") as denied:
            host.call(plugin, "put", **other)
        assert denied.value.kind == "denied"
    host.grants.discard("store")
    with pytest.raises(Exception, match="denied: the capability `store`"):
        host.call(plugin, "put")


def test_config_defaults_values_and_secrets():
    plugin = new_plugin()

    @plugin.mount_config()
    class Config(ConfigBase):
        BASE_URL: str = "https://api.example.org"
        API_KEY: str = ""
        RETRIES: int = 2

    schema = json.loads(plugin.manifest()["config_schema"])
    assert schema["properties"]["RETRIES"] == {"type": "integer", "default": 2}
    assert schema["properties"]["API_KEY"]["format"] == "password"
    assert "config" in plugin.manifest()["capabilities"]
    # As Nekro's plugins do, at module level: the defaults until a call
    # reads the operator's values.
    config = plugin.get_config(Config)
    assert config.RETRIES == 2
    host = FakeHost(config={"RETRIES": 5})
    values = host._bound(plugin, lambda: (config.BASE_URL, config.RETRIES))
    assert values == ("https://api.example.org", 5)


def test_values_round_trip_and_refuse_what_cannot_cross():
    value = {"a": [1, 2.5, None, True, "x", b"y", {"b": []}]}
    nodes = encode(value)
    assert nodes[0][0] == "object"
    assert decode(nodes) == value
    with pytest.raises(ValueError, match="64 bits"):
        encode(2**64)
    with pytest.raises(ValueError, match="not a value"):
        encode({1, 2})
    deep = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(ValueError, match="nested"):
        encode(deep)


def test_the_dice_example():
    dice = load_example("dice").plugin
    host = FakeHost(config={"DEFAULT_SIDES": 1})
    kind, text = host.call(dice, "roll_dice", event_name="jump", difficulty=2)
    assert (kind, text) == ("behavior", "🎲 jump: rolled 1 (d1) against 2: failure")
    assert host.sent == [("text", text)]
    kind, parts = host.call(dice, "show_dice", count=3, sides=6)
    assert parts[0][1].startswith("Rolled 3d6") and parts[1][1][0] == "image/svg+xml"


def test_the_memo_example_counts_memos_in_its_prompt():
    memo = load_example("memo").plugin
    host = FakeHost()
    assert host.prompt_inject(memo) is None
    assert host.call(memo, "save_memo", memo=" tea ") == ("tool", 1)
    assert host.prompt_inject(memo) == "The user has 1 memo(s) saved; list_memos() reads them."
    assert host.available_methods(memo) == ["save_memo", "list_memos", "clear_memos"]
    host.ctx = AgentCtx(chat_key="c")
    assert host.available_methods(memo) == []


def test_nekros_names_for_the_context():
    ctx = AgentCtx(chat_key="onebot_v11-group_1", user_id="42")
    assert ctx.from_chat_key == "onebot_v11-group_1"
    assert ctx.from_platform_userid == ctx.from_user_id == "42"


def test_collect_methods_is_called_as_nekro_calls_it_and_in_the_older_form():
    for form in ("nekro", "older"):
        plugin = new_plugin()

        @plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="A")
        async def a(_ctx: AgentCtx) -> int:
            """A."""
            return 1

        @plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="B")
        async def b(_ctx: AgentCtx) -> int:
            """B."""
            return 2

        if form == "nekro":
            @plugin.mount_collect_methods()
            async def collect(_ctx: AgentCtx) -> list:
                return [a] if _ctx.user_id else [a, b]
        else:
            @plugin.mount_collect_methods()
            async def collect(_plugin: NekroPlugin, _ctx: AgentCtx) -> list:
                return [a] if _ctx.user_id else ["b", a]

        assert plugin.available_methods(AgentCtx(chat_key="c", user_id="u")) == ["a"], form
        assert plugin.available_methods(AgentCtx(chat_key="c")) == ["a", "b"], form


def test_an_exception_is_reported_with_the_plugins_own_frames():
    from sandwit_plugin._errors import report

    plugin = new_plugin()

    def helper(ctx):
        return ctx.no_such_field

    @plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="Bad")
    async def bad(_ctx: AgentCtx) -> int:
        """Fails."""
        return helper(_ctx)

    with pytest.raises(AttributeError) as raised:
        plugin.invoke(AgentCtx(chat_key="c"), "bad", {})
    text = report(raised.value)
    lines = text.splitlines()
    assert lines[0] == "AttributeError: 'AgentCtx' object has no attribute 'no_such_field'"
    assert 'File "test_sdk.py"' in text and "in bad" in text and "in helper" in text
    assert "return ctx.no_such_field" in text
    # The SDK's frames (invoke, the coroutine runner) are left out.
    assert "_plugin.py" not in text and "_aio.py" not in text
