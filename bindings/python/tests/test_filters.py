"""Which methods a context sees: a set's `filter` rule (per context) and
`Toolbox.filter` (a set of fewer methods). The prompt, the OpenAI tools
and a run's functions follow them, and a method left out cannot be called,
even through the raw import the method functions use."""

import pytest

import sandwit

# Calls `method` without its function: through the `_invoke` of a function
# the run has (`via`), and through the interpreter's import itself.
RAW_CALLS = """
import sys
try:
    print("invoke:", {via}.__globals__["_invoke"]({method!r}, (), ()))
except PluginError as e:
    print("invoke:", e.kind)
raw = sys.modules["_sandwit_methods"]
# An empty object in marshal format (the braces doubled for `format`); a
# failed call's answer is its `(kind, message)`.
print("raw:", sys.modules["marshal"].loads(raw.call({method!r}, b"{{0"))[0])
"""


@pytest.fixture(scope="module")
def admin_calls():
    return []


@pytest.fixture(scope="module")
def admin_only(admin_calls):
    @sandwit.method
    def ban_user(ctx, user: str = "nobody") -> str:
        """Ban a user from the chat.

        Args:
            user: Who.
        """
        admin_calls.append((ctx.user_id, user))
        return f"banned {user}"

    return ban_user


def is_admin_rule(calls):
    def rule(ctx, provider, method):
        calls.append((ctx.chat_key, provider, method["name"]))
        return method["name"] != "ban_user" or ctx.user_id == "admin"

    return rule


def test_a_rule_chooses_the_methods_each_context_sees(host, plugins, admin_only, admin_calls):
    asked = []
    toolbox = host.toolbox([plugins["calc"]], methods=[admin_only],
                                 filter=is_admin_rule(asked))
    user, admin = sandwit.AgentCtx("chat-f", "bob"), sandwit.AgentCtx("chat-f", "admin")
    assert "filter=..." in repr(toolbox)
    # Every method, whatever the rule.
    assert toolbox.methods == ["calculate_sum", "get_current_time", "ban_user"]

    assert "def ban_user(" not in toolbox.prompt(user)
    assert "def ban_user(" in toolbox.prompt(admin)
    assert "def calculate_sum(" in toolbox.prompt(user)
    assert [t["function"]["name"] for t in toolbox.openai_tools(user)] == [
        "calculate_sum", "get_current_time"]
    assert [t["function"]["name"] for t in toolbox.openai_tools(admin)] == [
        "calculate_sum", "get_current_time", "ban_user"]
    # The rule is given the context, the provider and the spec.
    assert ("chat-f", "calc", "calculate_sum") in asked and ("chat-f", "host", "ban_user") in asked

    admin_calls.clear()
    out = host.run("print(ban_user('eve'))", ctx=admin, plugins=toolbox)
    assert (out.status, out.stdout) == ("ok", "banned eve\n")
    out = host.run("ban_user('eve')", ctx=user, plugins=toolbox)
    assert (out.status, out.error.type) == ("error", "NameError")
    # Not through the raw import either: refused host-side.
    out = host.run(RAW_CALLS.format(via="calculate_sum", method="ban_user"), ctx=user, plugins=toolbox)
    assert out.stdout == "invoke: unknown_method\nraw: unknown_method\n", out.error
    assert admin_calls == [("admin", "eve")]
    # The same code as the admin reaches it both ways (so the check can fail).
    out = host.run(RAW_CALLS.format(via="calculate_sum", method="ban_user"), ctx=admin, plugins=toolbox)
    assert out.stdout.startswith("invoke: banned nobody\nraw: "), out.stdout
    assert len(admin_calls) == 3


def test_run_async_follows_the_rule(host, plugins, admin_only):
    import asyncio

    toolbox = host.toolbox([plugins["calc"]], methods=[admin_only],
                                 filter=is_admin_rule([]))

    async def main():
        user = await host.run_async("ban_user('x')", ctx=sandwit.AgentCtx("c", "bob"),
                                    plugins=toolbox)
        admin = await host.run_async("print(ban_user('x'))", ctx=sandwit.AgentCtx("c", "admin"),
                                     plugins=toolbox)
        return user, admin

    user, admin = asyncio.run(main())
    assert user.error.type == "NameError" and admin.stdout == "banned x\n"


def test_a_rule_that_raises_raises_where_it_is_asked(host, plugins):
    def broken(ctx, provider, method):
        raise RuntimeError("rule bug")

    toolbox = host.toolbox([plugins["calc"]], filter=broken)
    with pytest.raises(RuntimeError, match="rule bug"):
        toolbox.prompt()
    with pytest.raises(RuntimeError, match="rule bug"):
        host.run("print(1)", plugins=toolbox)
    with pytest.raises(TypeError, match="filter must be callable"):
        host.toolbox([plugins["calc"]], filter="admin")
    # No ctx: the rule sees the default context.
    seen = []
    host.toolbox([plugins["calc"]], filter=lambda c, p, m: seen.append(c) or True).prompt()
    assert seen and all(c == sandwit.AgentCtx("default") for c in seen)


def test_toolbox_filter_keeps_fewer_methods(host, plugins, admin_only):
    full = host.toolbox([plugins["calc"], plugins["echo"]], methods=[admin_only])
    given = []

    def keep(provider, method):
        given.append((provider, dict(method)))
        return method["kind"] == "tool" and method["name"] != "echo"

    tools = full.filter(keep)
    assert tools.methods == ["calculate_sum", "get_current_time", "nop", "ban_user"]
    assert tools.ids == ["calc", "echo"]
    provider, spec = given[0]
    assert provider == "calc" and spec["name"] == "calculate_sum"
    assert set(spec) == {"name", "kind", "description", "docstring", "params", "returns"}
    # The specs are read-only.
    def rename(provider, method):
        method["name"] = "x"

    with pytest.raises(TypeError, match="does not support item assignment"):
        full.filter(rename)

    no_calc = full.filter(lambda provider, method: provider != "calc")
    assert no_calc.ids == ["echo"] and no_calc.methods == ["nop", "echo", "ban_user"]
    assert "calculate_sum" not in no_calc.prompt()
    out = host.run(RAW_CALLS.format(via="nop", method="calculate_sum"), plugins=no_calc)
    assert out.stdout == "invoke: unknown_method\nraw: unknown_method\n", out.error
    assert host.run("print(calculate_sum(1, 2))", plugins=full).stdout == "3\n"
    with pytest.raises(ZeroDivisionError):
        full.filter(lambda p, m: 1 / 0)


def test_a_rule_and_a_filtered_set_together(host, plugins, admin_only):
    full = host.toolbox([plugins["calc"]], methods=[admin_only], filter=is_admin_rule([]))
    no_time = full.filter(lambda p, m: m["name"] != "get_current_time")
    user, admin = sandwit.AgentCtx("c", "bob"), sandwit.AgentCtx("c", "admin")
    assert [t["function"]["name"] for t in no_time.openai_tools(user)] == ["calculate_sum"]
    assert [t["function"]["name"] for t in no_time.openai_tools(admin)] == [
        "calculate_sum", "ban_user"]
