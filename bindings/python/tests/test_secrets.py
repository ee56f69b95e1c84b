"""A secret the policy configures never reaches anything Python sees: run
outcomes (output, errors, events, handoffs), call results and exceptions."""

import pytest

import sandwit
from conftest import pin, wasm

TOKEN = "tok-SECRET-4242"


@pytest.fixture(scope="module")
def services(cache_dir, tmp_path_factory):
    policy = tmp_path_factory.mktemp("secrets") / "policy.toml"
    policy.write_text(
        '[plugins.services]\ngrant = ["store", "config", "chat"]\n' + pin("services")
        + f'config = {{ token = "{TOKEN}", colour = "green" }}\n'
    )
    host = sandwit.Host(cache_dir=cache_dir, policy=policy)
    return host, host.load_plugin(wasm("services"))


def everything(*objects) -> str:
    """Every text reachable from `objects`, as repr, str and dict."""
    parts = []
    for obj in objects:
        parts += [repr(obj), str(obj)]
        if hasattr(obj, "to_dict"):
            parts.append(repr(obj.to_dict()))
        if isinstance(obj, BaseException):
            parts += [repr(obj.args), repr(vars(obj))]
    return "\n".join(parts)


def test_a_secret_never_reaches_a_run_outcome(services):
    host, plugin = services
    code = f"""
print(leak())
try:
    leak_in_error()
except PluginError as e:
    print("error:", e, e.message)
print("config:", read_config("token"), read_config("colour"))
print(put("chat", "k", leak()))
raise RuntimeError(leak())
"""
    out = host.run(code, ctx=sandwit.AgentCtx("chat-s", "user-s"), plugins=[plugin])
    assert out.status == "error" and out.error.type == "RuntimeError"
    assert "returned token [secret]" in out.stdout
    assert "failed with token [secret]" in out.stdout
    assert "config: [secret] green" in out.stdout
    texts = everything(out, out.error) + repr(out.events)
    assert "[secret]" in repr(out.events)
    assert TOKEN not in texts
    assert TOKEN not in out.stdout + out.stderr + out.error.message + out.error.traceback


def test_a_secret_never_reaches_a_call_result_or_exception(services):
    _, plugin = services
    ctx = sandwit.AgentCtx("chat-s", "user-s")
    result = plugin.call("leak", ctx=ctx)
    assert result.value == "returned token [secret]"
    assert plugin.call("read_config", {"key": "token"}, ctx=ctx).value == "[secret]"
    with pytest.raises(sandwit.CallError) as e:
        plugin.call("leak_in_error", ctx=ctx)
    assert e.value.message == "failed with token [secret]"
    assert TOKEN not in everything(result, e.value)
    assert TOKEN not in repr(plugin.manifest)


def test_a_secret_never_reaches_an_async_outcome(services):
    import asyncio

    host, plugin = services
    out = asyncio.run(host.run_async("print(leak())", plugins=[plugin]))
    assert out.stdout == "returned token [secret]\n"
    assert TOKEN not in everything(out) + repr(out.events)


def test_a_secret_never_reaches_host_methods_or_live_events(services):
    host, plugin = services
    received = []

    @sandwit.method
    def keep(ctx, text: str) -> str:
        """Keeps the text and hands it back.

        Args:
            text: The text.
        """
        received.append(text)
        return text

    @sandwit.method
    def complain(ctx, text: str) -> str:
        """Raises with the text.

        Args:
            text: The text.
        """
        raise ValueError(text)

    toolbox = host.toolbox([plugin], methods=[keep, complain])
    code = """
print(keep(leak()))
print(keep(read_config("token")))
try:
    leak_in_error()
except PluginError as e:
    keep(str(e))
complain(leak())
"""
    events = []
    out = host.run(code, ctx=sandwit.AgentCtx("chat-s", "user-s"), plugins=toolbox,
                   on_event=events.append)
    assert out.status == "error" and out.error.type == "PluginError"
    assert received == ["returned token [secret]", "[secret]",
                        "leak_in_error: failed with token [secret]"]
    assert out.error.message == "complain: raised ValueError: returned token [secret]"
    assert any("[secret]" in repr(e) for e in events)
    assert TOKEN not in everything(out, out.error) + repr(out.events) + repr(events)
    assert TOKEN not in repr(received)
