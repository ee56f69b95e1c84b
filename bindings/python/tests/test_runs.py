"""Python runs: outcomes of every status, events, limits, bad input, values in
and out, run slots."""

import asyncio

import pytest

import sandwit


def test_a_run_calls_plugin_methods(host, toolbox, ctx):
    out = host.run("print(calculate_sum(1, 2))", ctx=ctx, plugins=toolbox)
    assert (out.status, out.stdout, out.stderr) == ("ok", "3\n", "")
    assert (out.error, out.limit, out.handoff) == (None, None, None)
    assert out.fuel_used > 0 and out.elapsed_ms > 0
    [call] = out.events
    assert call["type"] == "call" and call["plugin"] == "calc" and call["method"] == "calculate_sum"
    assert call["kind"] == "tool" and call["ok"] is True and call["summary"] == "3"
    assert call["fuel"] > 0 and call["ms"] >= 0
    d = out.to_dict()
    assert d["status"] == "ok" and d["stdout"] == "3\n" and d["events"] == out.events
    assert d["fuel_used"] == out.fuel_used and d["elapsed_ms"] == out.elapsed_ms
    # A host without workspaces: no files.
    assert out.files == [] and d["files"] == []
    assert repr(out).startswith("RunOutcome(status='ok', stdout='3\\n'")


def test_a_run_takes_a_list_of_plugins_or_none(host, plugins):
    out = host.run("print(calculate_sum(2, 3))", plugins=[plugins["calc"]])
    assert (out.status, out.stdout) == ("ok", "5\n")
    out = host.run("print(1 + 1)")
    assert (out.status, out.stdout) == ("ok", "2\n")
    out = host.run("calculate_sum(1, 2)", plugins=None)
    assert out.status == "error" and out.error.type == "NameError"


def test_an_exception_is_an_error_outcome(host):
    out = host.run("x = 1\nprint('before')\n1 / 0\n")
    assert (out.status, out.stdout) == ("error", "before\n")
    assert out.error.type == "ZeroDivisionError" and out.error.line == 3
    assert "division by zero" in out.error.message and "ZeroDivisionError" in out.error.traceback
    assert out.to_dict()["error"]["type"] == "ZeroDivisionError"
    assert "RunError(type='ZeroDivisionError'" in repr(out)

    out = host.run("def f(:\n  pass")
    assert out.status == "error" and out.error.type == "SyntaxError"

    out = host.run("import socket")
    assert out.status == "error" and out.error.type == "ModuleNotFoundError"
    assert "the sandbox does not provide it" in out.error.message

    out = host.run("import sys\nprint('warn', file=sys.stderr)")
    assert (out.status, out.stderr) == ("ok", "warn\n")


def test_a_plugins_failure_raises_in_the_code(host, toolbox):
    code = """
try:
    calculate_sum(2**62, 2**62)
except PluginError as e:
    print(e.method, e.kind)
try:
    calculate_sum("a", 2)
except PluginArgumentError:
    print("refused")
trap()
"""
    out = host.run(code, plugins=toolbox)
    assert out.stdout == "calculate_sum failed\nrefused\n"
    assert out.status == "error" and out.error.type == "PluginError"
    assert [e["ok"] for e in out.events if e["type"] == "call"] == [False, False, False]
    # The host still serves.
    assert host.run("print(calculate_sum(1, 1))", plugins=toolbox).stdout == "2\n"


def test_an_agent_method_hands_off(host, toolbox, ctx):
    code = "print('searching')\nsearch_knowledge_base('sandwit')\nprint('never')"
    out = host.run(code, ctx=ctx, plugins=toolbox)
    assert (out.status, out.stdout, out.error) == ("agent_handoff", "searching\n", None)
    h = out.handoff
    assert (h.plugin, h.method, h.result.kind) == ("knowledge", "search_knowledge_base", "agent")
    assert isinstance(h.result.text, str) and h.result.text
    d = out.to_dict()["handoff"]
    assert d["plugin"] == "knowledge" and d["result"] == {"kind": "agent", "text": h.result.text}
    assert "Handoff(plugin='knowledge'" in repr(out)


def test_a_multimodal_agent_hands_off_its_parts(host, toolbox):
    out = host.run("generate_image_and_comment('a red fox')", plugins=toolbox)
    assert out.status == "agent_handoff"
    result = out.handoff.result
    assert result.kind == "multimodal-agent"
    image = next(p for p in result.parts if p.type == "image")
    assert image.mime_type == "image/png" and image.data.startswith(b"\x89PNG")
    assert out.to_dict()["handoff"]["result"]["kind"] == "multimodal-agent"


def test_a_behavior_is_recorded_as_a_system_message_and_chat(host, toolbox, ctx):
    out = host.run("print(send_channel_message('deploy done'))", ctx=ctx, plugins=toolbox)
    assert out.status == "ok"
    assert out.stdout == "Message sent to channel #general: deploy done\n"
    types = [e["type"] for e in out.events]
    assert types.count("call") == 1 and "system_message" in types
    chat = next(e for e in out.events if e["type"] == "chat")
    assert chat["plugin"] == "messenger" and chat["message"] == {"kind": "text", "text": "deploy done"}
    log = next(e for e in out.events if e["type"] == "log")
    assert log["plugin"] == "messenger" and log["level"] == "info"


def test_limits_end_runs(host, toolbox):
    out = host.run("while True: pass", limits=sandwit.RunLimits(fuel=20_000_000))
    assert (out.status, out.limit.kind) == ("limit_exceeded", "fuel")
    assert out.to_dict()["limit"]["kind"] == "fuel" and "LimitHit(kind='fuel'" in repr(out)

    out = host.run("import time\ntime.sleep(5)", limits=sandwit.RunLimits(timeout_s=0.3))
    assert (out.status, out.limit.kind) == ("limit_exceeded", "time")
    assert out.elapsed_ms < 4000

    out = host.run("for i in range(5): calculate_sum(i, i)", plugins=toolbox,
                   limits=sandwit.RunLimits(max_calls=3))
    assert (out.status, out.limit.kind) == ("limit_exceeded", "calls")

    out = host.run("print('x' * 5000)", limits=sandwit.RunLimits(max_output_bytes=1000))
    assert (out.status, out.limit.kind) == ("limit_exceeded", "output")

    out = host.run("x = bytearray(100 * 1024 * 1024)", limits=sandwit.RunLimits(memory_mib=64))
    assert (out.status, out.limit.kind) == ("limit_exceeded", "memory")

    # An ordinary exception, not a limit.
    out = host.run("def f(): f()\nf()")
    assert (out.status, out.limit, out.error.type) == ("error", None, "RecursionError")

    # The host's own limits apply when none are given.
    strict = sandwit.Host(cache_dir=host.cache_dir, limits=sandwit.RunLimits(fuel=20_000_000),
                          prepared_interpreters=0)
    assert strict.run("while True: pass").limit.kind == "fuel"


def test_a_code_fence_is_stripped(host):
    assert host.run("```python\nprint('fenced')\n```").stdout == "fenced\n"


def test_runs_share_nothing(host):
    assert host.run("x = 41\nprint(x + 1)").stdout == "42\n"
    out = host.run("print(x)")
    assert out.status == "error" and out.error.type == "NameError"


def test_bad_run_arguments_are_type_errors(host, toolbox):
    with pytest.raises(TypeError):
        host.run(123)
    with pytest.raises(TypeError):
        host.run(b"print(1)")
    with pytest.raises(TypeError):
        host.run("print(1)", ctx="chat-1")
    with pytest.raises(TypeError):
        host.run("print(1)", plugins=5)
    with pytest.raises(TypeError):
        host.run("print(1)", plugins=["calc"])
    with pytest.raises(TypeError):
        host.run("print(1)", limits={"timeout_s": 1})
    with pytest.raises(TypeError):
        host.run("print(1)", sandwit.AgentCtx("c"))  # keyword-only
    with pytest.raises(UnicodeEncodeError):
        host.run("print('\udc80')")
    # Still serving.
    assert host.run("print(calculate_sum(1, 2))", plugins=toolbox).stdout == "3\n"


def test_the_store_keeps_notes_per_user(host, toolbox):
    a, b = sandwit.AgentCtx("chat-store-a", "u1"), sandwit.AgentCtx("chat-store-a", "u2")
    assert host.run("remember('buy milk')", ctx=a, plugins=toolbox).status == "ok"
    assert host.run("print(recall())", ctx=a, plugins=toolbox).stdout == "['buy milk']\n"
    assert host.run("print(recall())", ctx=b, plugins=toolbox).stdout == "[]\n"
    host.run("forget_all()", ctx=a, plugins=toolbox)


def test_a_file_store_outlives_its_host(cache_dir, tmp_path, policy_file):
    from conftest import wasm

    store = tmp_path / "store.db"
    ctx = sandwit.AgentCtx("chat-file", "u")
    for code, expected in [("remember('kept')", ""), ("print(recall())", "['kept']\n")]:
        host = sandwit.Host(cache_dir=cache_dir, policy=policy_file, store=store,
                            prepared_interpreters=0)
        notes = host.load_plugin(wasm("notes"))
        out = host.run(code, ctx=ctx, plugins=[notes])
        assert (out.status, out.stdout) == ("ok", expected)
        del host, notes


def test_a_plugin_loaded_by_another_host_is_refused(host, plugins, cache_dir):
    # Its grants, configuration and store are the host's that loaded it: for
    # an embedder with a host per tenant, another host's run refuses it.
    other = sandwit.Host(cache_dir=cache_dir)
    out = other.run("print(recall())", plugins=[plugins["notes"]])
    assert out.status == "error" and out.error.type == "ForeignPlugin", out
    assert "plugin `notes` was loaded by another Host" in out.error.message
    assert host.run("print(1)", plugins=[plugins["notes"]]).status == "ok"


def test_a_runs_limits_override_only_the_fields_they_give(cache_dir):
    host = sandwit.Host(cache_dir=cache_dir, limits=sandwit.RunLimits(memory_mib=512))
    grow = "b = bytearray(300 << 20)\nprint(len(b) >> 20)"
    # The run gives a time limit only: the memory stays the host's 512 MiB.
    out = host.run(grow, limits=sandwit.RunLimits(timeout_s=20))
    assert (out.status, out.stdout) == ("ok", "300\n"), out
    # Asking for more memory than the host's instances hold is refused,
    # not capped where the run would not expect it.
    out = host.run("print(1)", limits=sandwit.RunLimits(memory_mib=4096))
    assert out.status == "error" and out.error.type == "LimitUnavailable", out
    assert "raise the host's run limits" in out.error.message


def test_busy_code_runs_until_the_time_limit_set_not_a_fuel_default(host):
    assert sandwit.RunLimits().fuel is None and host.limits.fuel is None
    out = host.run("while True: pass", limits=sandwit.RunLimits(timeout_s=1.5))
    assert (out.status, out.limit.kind) == ("limit_exceeded", "time")
    assert out.elapsed_ms >= 1500 and out.fuel_used > 0


def test_inputs_go_in_and_the_result_comes_out(host, toolbox):
    out = host.run("calculate_sum(a, len(rows)), {'who': who, 'raw': raw}", plugins=toolbox,
                   inputs={"a": 40, "rows": [1, 2], "who": "Ada", "raw": b"\x00"})
    assert out.status == "ok", out
    assert out.result == [42, {"who": "Ada", "raw": b"\x00"}]
    assert out.to_dict()["result"] == out.result and "result=[42" in repr(out)
    # The `result` variable when the last statement is not an expression.
    assert host.run("result = {'n': n * 2}\nprint('done')", inputs={"n": 21}).result == {"n": 42}
    assert host.run("x = 1").result is None
    # An input that cannot cross is named; a result that cannot is none.
    with pytest.raises(TypeError, match="the run's inputs: input 'bad'.*set"):
        host.run("1", inputs={"bad": {1}})
    out = host.run("object()")
    assert (out.status, out.result) == ("ok", None)
    out = host.run("print('ran')", inputs={"1x": 1})
    assert (out.status, out.error.type, out.stdout) == ("error", "InvalidInput", "")


def test_run_slots_queue_runs_and_count_time_from_the_slot(cache_dir):
    host = sandwit.Host(cache_dir=cache_dir, prepared_interpreters=0, max_running=1,
                        max_waiting=1, max_wait_s=30)

    async def until_runs(running: int, waiting: int) -> None:
        for _ in range(6000):
            if host.runs_now == (running, waiting):
                return
            await asyncio.sleep(0.005)
        raise AssertionError(f"never {running} running and {waiting} waiting: {host.runs_now}")

    async def main():
        code = "import time\ntime.sleep(0.8)\nprint('done')"
        limits = sandwit.RunLimits(timeout_s=1.5)
        first = asyncio.create_task(host.run_async(code, limits=limits))
        await until_runs(1, 0)
        second = asyncio.create_task(host.run_async(code, limits=limits))
        await until_runs(1, 1)
        # One runs, one waits: a third finds the queue full.
        third = await host.run_async("print('never')")
        return await first, await second, third

    first, second, third = asyncio.run(main())
    # The second waited for the first, then had its whole limit: both finish.
    assert (first.status, second.status) == ("ok", "ok"), (first, second)
    assert second.queued_ms >= 400 and second.queued_ms + second.elapsed_ms > 1500
    assert (third.status, third.limit.kind, third.stdout) == ("limit_exceeded", "queue", "")
    assert host.runs_now == (0, 0)
    with pytest.raises(ValueError, match="max_wait_s"):
        sandwit.Host(cache_dir=cache_dir, max_wait_s=-1)
