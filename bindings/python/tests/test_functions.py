"""The application's own functions for a run: ``Host.run_start`` yields
each call the code makes of one as a ``Call`` to answer with a value or an
exception; ``Host.run`` and ``Host.run_async`` answer them with callables.
Calls of the host's methods made before a pause are not made again."""

import asyncio

import pytest

import sandwit
from conftest import wasm

CODE = """
seen = lookup(5)
try:
    weather("Oslo")
except KeyError as e:
    missing = str(e)
first = weather("Paris", 3, unit="C")
result = {"seen": seen, "missing": missing, "first": first, "none": weather()}
"""


def host_and_tools(cache_dir, tmp_path, calls):
    @sandwit.method(provider="app")
    def lookup(ctx: sandwit.AgentCtx, n: int) -> int:
        """Look a number up."""
        calls.append(n)
        return n * 10

    host = sandwit.Host(cache_dir=cache_dir, store=str(tmp_path / "store.db"))
    return host, host.toolbox(methods=[lookup])


def test_run_start_yields_each_call_to_answer_with_a_value_or_an_exception(cache_dir, tmp_path):
    calls = []
    host, tools = host_and_tools(cache_dir, tmp_path, calls)
    ctx = sandwit.AgentCtx("py-functions")
    run = host.run_start(CODE, functions={"weather": "The weather in a city."}, ctx=ctx, plugins=tools)
    seen = []
    for call in run:
        seen.append((call.name, call.args, call.kwargs))
        if call.args == ["Oslo"]:
            run.fail(KeyError("Oslo"))
        elif call.args:
            run.answer({"sky": "clear", "temp": 21})
        else:
            run.answer(None)
    assert seen == [
        ("weather", ["Oslo"], {}),
        ("weather", ["Paris", 3], {"unit": "C"}),
        ("weather", [], {}),
    ]
    outcome = run.outcome
    assert outcome.status == "ok", outcome
    assert outcome.result == {
        "seen": 50,
        "missing": "'Oslo'",
        "first": {"sky": "clear", "temp": 21},
        "none": None,
    }
    assert calls == [5], "lookup was called again by a resume"
    assert run.call is None
    with pytest.raises(RuntimeError, match="ended"):
        run.answer(1)

    # A run left waiting is ended by closing it (or leaving its `with`):
    # its token is spent, and the call never answered.
    with host.run_start(CODE, functions=["weather"], ctx=ctx, plugins=tools) as left:
        token = left.call.call_id
        assert host.pending(token, ctx=ctx)["method"] == "weather"
    assert left.call is None
    with pytest.raises(sandwit.SandwitError, match="ResumeRefused"):
        host.pending(token, ctx=ctx)
    waiting = host.run_start(CODE, functions=["weather"], ctx=ctx, plugins=tools)
    assert host.discard(waiting.call.call_id, ctx=ctx)["args"] == {"args": ["Oslo"], "kwargs": {}}
    with pytest.raises(sandwit.SandwitError, match="resumed or discarded already"):
        host.discard(waiting.call.call_id, ctx=ctx)


def test_run_answers_calls_with_callables_and_their_exceptions_by_type(cache_dir, tmp_path):
    calls = []
    host, tools = host_and_tools(cache_dir, tmp_path, calls)

    class Upstream(Exception):
        pass

    def weather(*args, **kwargs):
        if args == ("Oslo",):
            raise KeyError("Oslo")
        return list(args) + sorted(kwargs)

    outcome = host.run(CODE, plugins=tools, functions={"weather": weather})
    assert outcome.status == "ok", outcome
    assert outcome.result["first"] == ["Paris", 3, "unit"]

    def failing(*args, **kwargs):
        raise Upstream("503 from upstream")

    code = """
try:
    fetch_page("https://example.com")
except PluginError as e:
    result = [type(e).__name__, e.message]
"""
    outcome = host.run(code, functions={"fetch_page": failing})
    assert outcome.result == ["Upstream", "503 from upstream"], outcome

    def unplain(*args, **kwargs):
        return object()

    code = """
try:
    odd()
except TypeError as e:
    result = str(e)
"""
    outcome = host.run(code, functions={"odd": unplain})
    assert outcome.status == "ok", outcome
    assert "odd returned a value that cannot cross" in outcome.result, outcome

    with pytest.raises(TypeError, match="run_start"):
        host.run("print(1)", functions={"weather": "a docstring"})
    refused = host.run("print(1)", plugins=tools, functions={"lookup": weather})
    assert refused.status == "error"
    assert refused.error.type == "InvalidFunction", refused.error


def test_run_async_awaits_coroutine_functions(cache_dir, tmp_path):
    calls = []
    host, tools = host_and_tools(cache_dir, tmp_path, calls)

    async def weather(*args, **kwargs):
        await asyncio.sleep(0)
        if args == ("Oslo",):
            raise KeyError("Oslo")
        return len(args)

    async def main():
        return await host.run_async(CODE, plugins=tools, functions={"weather": weather})

    outcome = asyncio.run(main())
    assert outcome.status == "ok", outcome
    assert outcome.result == {"seen": 50, "missing": "'Oslo'", "first": 2, "none": 0}
    assert calls == [5]


def test_plugins_given_as_a_generator_serve_every_resume(cache_dir, tmp_path):
    host = sandwit.Host(cache_dir=cache_dir, store=str(tmp_path / "store.db"))
    calc = host.load_plugin(wasm("calc"))
    code = "before = calculate_sum(1, 2)\nasked = ask()\nresult = [before, asked, calculate_sum(asked, 1)]"
    # The first run reads the generator; each resume after an answer still
    # has its plugins.
    outcome = host.run(code, plugins=(p for p in [calc]), functions={"ask": lambda: 41})
    assert outcome.status == "ok", outcome
    assert outcome.result == [3, 41, 42]
    run = host.run_start(code, functions=["ask"], plugins=iter([calc]))
    for _call in run:
        run.answer(9)
    assert run.outcome.result == [3, 9, 10], run.outcome
