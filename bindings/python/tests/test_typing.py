"""What the stubs say is what the package does at run time: coroutines from
run_async and call_async, a generic HostMethod, and events whose keys are
their TypedDicts'. (scripts/test-python runs stubtest and mypy --strict.)"""

import asyncio
import inspect
import typing

import sandwit


def test_run_async_and_call_async_return_coroutines(host, plugins):
    async def main():
        pending = host.run_async("print(1)")
        # A coroutine, not a future: no done(), and create_task takes it.
        assert inspect.iscoroutine(pending) and not hasattr(pending, "done")
        out = await asyncio.create_task(pending)
        call = plugins["calc"].call_async("calculate_sum", {"num1": 1, "num2": 2})
        assert inspect.iscoroutine(call)
        return out, await call

    out, result = asyncio.run(main())
    assert (out.stdout, result.value) == ("1\n", 3)


def test_host_method_is_generic_at_run_time():
    @sandwit.method
    def shout(ctx: sandwit.AgentCtx, text: str) -> str:
        """Shout it."""
        return text.upper()

    alias = sandwit.HostMethod[[sandwit.AgentCtx, str], str]
    assert typing.get_origin(alias) is sandwit.HostMethod
    assert isinstance(shout, sandwit.HostMethod)
    assert shout(sandwit.AgentCtx("c"), "hi") == "HI"


def keys_fit(event: dict, typed: type) -> None:
    hints = typing.get_type_hints(typed)
    assert set(event) <= set(hints), (event, typed)
    assert typed.__required_keys__ <= set(event), (event, typed)


def test_events_have_their_typed_dicts_keys(host, toolbox, ctx):
    by_type = {
        "call": sandwit.CallEvent,
        "system_message": sandwit.SystemMessageEvent,
        "control": sandwit.ControlEvent,
        "log": sandwit.LogEvent,
        "chat": sandwit.ChatEvent,
        "denied": sandwit.DeniedEvent,
        "stdout": sandwit.OutputEvent,
        "stderr": sandwit.OutputEvent,
    }
    live = []
    code = ("import sys\nprint(calculate_sum(1, 2))\nprint('oops', file=sys.stderr)\n"
            "send_channel_message('hi')\nremember('tea')\nsend_chat_message('hello')")
    out = host.run(code, ctx=ctx, plugins=toolbox, on_event=live.append)
    seen = {e["type"] for e in live}
    assert {"call", "system_message", "stdout", "stderr"} <= seen, live
    for event in live:
        keys_fit(event, by_type[event["type"]])
        if event["type"] == "chat":
            keys_fit(event["message"], sandwit.ChatMessage)
    for event in out.events:
        assert event["type"] not in ("stdout", "stderr")
        keys_fit(event, by_type[event["type"]])
    assert set(typing.get_args(sandwit.Event)) | {sandwit.OutputEvent} == set(
        typing.get_args(sandwit.LiveEvent))
