"""Live events (`on_event`): output, calls, chat messages, system messages
and log lines as they happen, in order, on the caller's thread (or the
loop's), the outcome unchanged; a callback that raises."""

import asyncio
import threading
import time

import pytest

import sandwit
from conftest import becomes_idle

CODE = """
import sys
print("before")
print("to stderr", file=sys.stderr)
print(calculate_sum(1, 2))
print(send_channel_message("deploy done"))
print("after")
"""


def output(events, stream):
    return "".join(e["text"] for e in events if e["type"] == stream)


def recorded(events):
    """The events the outcome records too: all but the output."""
    return [e for e in events if e["type"] not in ("stdout", "stderr")]


def test_on_event_shows_output_and_events_in_order(host, toolbox, ctx):
    seen = []
    threads = set()

    def on_event(event):
        seen.append(event)
        threads.add(threading.current_thread())

    out = host.run(CODE, ctx=ctx, plugins=toolbox, on_event=on_event)
    assert out.status == "ok", out.error
    # The outcome is the same as without a listener.
    plain = host.run(CODE, ctx=ctx, plugins=toolbox)
    assert (out.stdout, out.stderr) == (plain.stdout, plain.stderr)
    # Time varies, and so does a call's fuel: a plugin instance made ahead of
    # the run has already run its `describe`, warming what a fresh one's
    # first call pays for.
    strip = lambda events: [{k: v for k, v in e.items() if k not in ("ms", "fuel")} for e in events]  # noqa: E731
    assert strip(out.events) == strip(plain.events)
    # Everything, in order, on the calling thread.
    assert threads == {threading.current_thread()}
    assert output(seen, "stdout") == out.stdout
    assert output(seen, "stderr") == out.stderr == "to stderr\n"
    assert recorded(seen) == out.events
    kinds = [e["type"] for e in seen]
    assert {"log", "chat", "call", "system_message"} <= set(kinds)
    texts = [e.get("text") for e in seen]
    assert texts.index("before") < kinds.index("call") < texts.index("after")
    # The messenger's chat message and log come with its call's return,
    # before the behavior's system message and what the code then prints.
    chat = kinds.index("chat")
    assert kinds.index("call") < chat < kinds.index("system_message") < texts.index("after")
    assert seen[chat] == {"type": "chat", "plugin": "messenger",
                          "message": {"kind": "text", "text": "deploy done"}}
    assert all(set(e) == {"type", "text"} for e in seen if e["type"] in ("stdout", "stderr"))


def test_on_event_shows_an_agent_handoff_call_before_the_outcome(host, toolbox):
    seen = []
    out = host.run("print('searching')\nsearch_knowledge_base('fuel')", plugins=toolbox,
                   on_event=seen.append)
    assert out.status == "agent_handoff"
    assert [e["type"] for e in seen] == ["stdout", "stdout", "call"]
    assert seen[-1]["method"] == "search_knowledge_base" and seen[-1]["ok"] is True


def test_run_async_shows_events_on_the_loop_before_the_result(host, toolbox, ctx):
    seen = []
    threads = set()

    def on_event(event):
        seen.append(event)
        threads.add(threading.current_thread())

    async def main():
        out = await host.run_async(CODE, ctx=ctx, plugins=toolbox, on_event=on_event)
        # Delivered before the result: nothing more arrives after it.
        count = len(seen)
        await asyncio.sleep(0.1)
        return out, count

    out, count = asyncio.run(main())
    assert out.status == "ok"
    assert count == len(seen)
    assert threads == {threading.main_thread()}
    assert output(seen, "stdout") == out.stdout and output(seen, "stderr") == out.stderr
    assert recorded(seen) == out.events


def test_events_come_as_they_happen(host):
    """The first line is shown while the run still sleeps."""
    shown_at = []
    start = time.monotonic()
    out = host.run("print('first', flush=True)\nimport time\ntime.sleep(0.5)\nprint('second')",
                   on_event=lambda e: shown_at.append((e["text"], time.monotonic() - start)))
    assert out.stdout == "first\nsecond\n"
    first = next(t for text, t in shown_at if text == "first")
    second = next(t for text, t in shown_at if text == "second")
    assert second - first > 0.4, shown_at


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_raising_callback_is_reported_once_and_the_run_goes_on(host, toolbox, monkeypatch,
                                                                 mode):
    reported = []
    monkeypatch.setattr("sys.unraisablehook", reported.append)
    calls = []

    def on_event(event):
        calls.append(event)
        if len(calls) == 2:
            raise ValueError("listener bug")

    code = "for i in range(5):\n    print(calculate_sum(i, 1))"
    if mode == "sync":
        out = host.run(code, plugins=toolbox, on_event=on_event)
    else:
        async def main():
            return await host.run_async(code, plugins=toolbox, on_event=on_event)
        out = asyncio.run(main())
    # The outcome is whole; the callback was not called after it raised.
    assert (out.status, out.stdout) == ("ok", "1\n2\n3\n4\n5\n")
    assert len(out.events) == 5 and len(calls) == 2
    [unraisable] = reported
    assert isinstance(unraisable.exc_value, ValueError)
    assert unraisable.object is on_event
    assert host.run("print(1)", on_event=lambda e: None).stdout == "1\n"


def test_a_keyboard_interrupt_from_the_callback_ends_a_sync_run(quiet_host):
    def on_event(event):
        raise KeyboardInterrupt

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        quiet_host.run("print('tick', flush=True)\nwhile True: pass", on_event=on_event,
                       limits=sandwit.RunLimits(timeout_s=60))
    assert time.monotonic() - start < 5
    # The run stopped: the process is idle, and the host serves.
    assert becomes_idle()
    assert quiet_host.run("print(2 + 2)").stdout == "4\n"


def test_a_keyboard_interrupt_from_an_async_callback_leaves_the_loop(quiet_host):
    def on_event(event):
        raise KeyboardInterrupt

    async def main():
        await quiet_host.run_async("print('tick', flush=True)\nwhile True: pass",
                                   on_event=on_event, limits=sandwit.RunLimits(timeout_s=60))

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(main())
    assert time.monotonic() - start < 5
    # asyncio.run cancelled the task on the way out, which ended the run.
    assert becomes_idle()
    assert quiet_host.run("print('after')").stdout == "after\n"


def test_on_event_must_be_callable(host):
    with pytest.raises(TypeError, match="on_event must be callable, not int"):
        host.run("print(1)", on_event=5)

    async def main():
        with pytest.raises(TypeError, match="on_event must be callable"):
            host.run_async("print(1)", on_event="print")

    asyncio.run(main())
    assert host.run("print(1)", on_event=None).stdout == "1\n"


def test_on_event_can_be_print(host, toolbox, capsys):
    ctx = sandwit.AgentCtx("group_1", user_id="42")
    out = host.run("print(calculate_sum(1, 2))", ctx=ctx, plugins=toolbox,
                   limits=sandwit.RunLimits(timeout_s=2), on_event=print)
    assert (out.status, out.stdout) == ("ok", "3\n")
    # Each event printed as a dict: the call, then the output's chunks.
    printed = [eval(line) for line in capsys.readouterr().out.splitlines()]
    assert printed[0]["type"] == "call" and printed[0]["method"] == "calculate_sum"
    assert output(printed, "stdout") == "3\n" and recorded(printed) == out.events
