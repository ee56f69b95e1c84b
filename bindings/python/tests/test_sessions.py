"""Sessions: a chat's variables, imports and objects kept from one run to
the next, in that chat only, stored so another host over the same store
(and key) resumes them; the outcome reports them; they can be listed and
closed."""

import asyncio
import pickle

import sandwit


def test_a_session_keeps_what_its_last_run_left(host, toolbox):
    ctx = sandwit.AgentCtx("py-sessions")
    first = host.run(
        "import statistics\nclass Box:\n    pass\nbox = Box()\nbox.values = [1, 2, 3]\n"
        "total = calculate_sum(1, 2)",
        ctx=ctx,
        plugins=toolbox,
        session="turns",
    )
    assert first.status == "ok", first
    assert first.session["started"] and first.session["kept"]
    assert (first.session["name"], first.session["runs"]) == ("turns", 1)
    assert first.session["stored_bytes"] > 0 and not first.session["rolled_back"]
    second = host.run(
        "statistics.mean(box.values) + total", ctx=ctx, plugins=toolbox, session="turns"
    )
    assert (second.status, second.result) == ("ok", 5)
    assert not second.session["started"] and second.session["runs"] == 2
    # The outcome's session survives pickling and to_dict.
    assert pickle.loads(pickle.dumps(second)) == second
    assert second.to_dict()["session"] == second.session

    # Without the session, or in another chat: a fresh interpreter.
    plain = host.run("total", ctx=ctx, plugins=toolbox)
    assert (plain.status, plain.error.type, plain.session) == ("error", "NameError", None)
    other = host.run("total", ctx=sandwit.AgentCtx("py-other"), session="turns")
    assert other.error.type == "NameError"
    # Its first run failed: nothing good to keep.
    assert not other.session["kept"]
    assert host.sessions(sandwit.AgentCtx("py-other")) == []

    listed = host.sessions(ctx)
    assert [s["name"] for s in listed] == ["turns"]
    assert listed[0]["memory_bytes"] > 0 and not listed[0]["busy"]
    assert listed[0]["stored_bytes"] > 0
    assert host.close_session("turns", ctx)
    assert not host.close_session("turns", ctx)
    assert host.sessions(ctx) == []


def test_a_session_runs_from_asyncio_and_refuses_a_bad_name(host):
    ctx = sandwit.AgentCtx("py-sessions-async")

    async def turns():
        await host.run_async("n = 41", ctx=ctx, session="a")
        return await host.run_async("n + 1", ctx=ctx, session="a")

    assert asyncio.run(turns()).result == 42
    host.close_session("a", ctx)
    bad = host.run("1", ctx=ctx, session="not a name")
    assert (bad.status, bad.error.type) == ("error", "InvalidSession")


def test_a_session_is_resumed_by_another_host_with_the_store_and_key(cache_dir, tmp_path):
    store, key = str(tmp_path / "store.db"), bytes(range(32))
    ctx = sandwit.AgentCtx("py-sessions-restart")
    first = sandwit.Host(cache_dir=cache_dir, store=store, session_key=key)
    first.warmup()
    assert first.run("import decimal\nd = decimal.Decimal('1.1')", ctx=ctx, session="s").status == "ok"
    first.close()

    again = sandwit.Host(cache_dir=cache_dir, store=store, session_key=key)
    again.warmup()
    resumed = again.run("str(d * 2)", ctx=ctx, session="s")
    assert (resumed.status, resumed.result) == ("ok", "2.2"), resumed
    assert resumed.session["restored"] and resumed.session["runs"] == 2
    again.close()

    # Another key: refused, not restored.
    other = sandwit.Host(cache_dir=cache_dir, store=store, session_key=bytes(32))
    other.warmup()
    refused = other.run("d", ctx=ctx, session="s")
    assert refused.error.type == "SessionRefused", refused
    assert "session key" in refused.error.message
    other.close()
    try:
        sandwit.Host(cache_dir=cache_dir, session_key=b"short")
    except ValueError as e:
        assert "at least 32 bytes" in str(e)
    else:
        raise AssertionError("a short session key was accepted")
