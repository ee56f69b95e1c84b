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


def test_a_session_object_runs_forks_resets_dumps_and_loads(cache_dir, tmp_path):
    key = bytes(range(32))
    ctx = sandwit.AgentCtx("py-session-object")
    host = sandwit.Host(cache_dir=cache_dir, store=str(tmp_path / "a.db"), session_key=key)
    host.warmup()
    limits = sandwit.RunLimits(max_calls=5)
    with host.session("work", ctx=ctx, limits=limits) as session:
        assert session.info() is None
        assert session.run("rows = [i * i for i in range(100)]").status == "ok"
        assert asyncio.run(session.run_async("len(rows)")).result == 100
        assert session.info()["runs"] == 2

        fork = session.fork("branch")
        assert fork.run("rows.append(-1)\nlen(rows)").result == 101
        assert session.run("len(rows)").result == 100

        dump = session.dump()
        assert isinstance(dump, bytes) and len(dump) > 0
        assert session.reset()
        assert session.run("'rows' in globals()").result is False
        fork.close()
        try:
            fork.run("1")
        except ValueError as e:
            assert "closed" in str(e)
        else:
            raise AssertionError("a closed session ran")
    assert host.sessions(ctx) == []
    host.close()

    # Loaded on another host with the key: the session as dumped, under the
    # limits it was saved with.
    other = sandwit.Host(cache_dir=cache_dir, store=str(tmp_path / "b.db"), session_key=key)
    other.warmup()
    loaded = other.load_session(dump, ctx=ctx)
    assert (loaded.name, loaded.limits.max_calls) == ("work", 5)
    assert loaded.run("rows[-1]").result == 99 * 99
    for bad, says in [
        (dump, "already"),
        (dump[:-1] + bytes([dump[-1] ^ 1]), "not signed"),
        (b"junk", "not a sandwit session"),
    ]:
        try:
            other.load_session(bad, ctx=ctx)
        except sandwit.SandwitError as e:
            assert str(e).startswith("SessionRefused: ") and says in str(e), e
        else:
            raise AssertionError(f"loaded {bad[:8]!r}")
    try:
        other.load_session(dump, ctx=sandwit.AgentCtx("someone-else"))
    except sandwit.SandwitError as e:
        assert "another chat" in str(e)
    else:
        raise AssertionError("loaded into another chat")
    other.close()
