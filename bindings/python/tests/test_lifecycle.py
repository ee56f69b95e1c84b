"""A host's end: close() and aclose(), `with` and `async with`, what they
release and what a closed host says."""

import asyncio
import threading
import time
from pathlib import Path

import pytest

import sandwit
from conftest import wasm

CLOSED = "this Host is closed"


def threads(name: str) -> int:
    """How many of this process's threads are named `name`."""
    count = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            count += (task / "comm").read_text().strip() == name
        except OSError:  # it ended meanwhile
            pass
    return count


def eventually(check, within: float = 20.0) -> bool:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_close_drops_the_interpreters_and_ends_the_runtime(cache_dir):
    prepare, runtime = threads("sandwit-prepare"), threads("sandwit-host")
    host = sandwit.Host(cache_dir=cache_dir)
    calc = host.load_plugin(wasm("calc"))
    assert host.run("print(calculate_sum(1, 2))", plugins=[calc]).stdout == "3\n"
    # The interpreter's thread prepares the next runs' interpreters (a
    # thread takes its name once it started).
    assert eventually(lambda: threads("sandwit-prepare") > prepare)
    assert threads("sandwit-host") > runtime
    assert not host.closed
    host.close()
    assert host.closed
    assert eventually(lambda: threads("sandwit-prepare") <= prepare), "the interpreter lives on"
    assert eventually(lambda: threads("sandwit-host") <= runtime), "the runtime's threads live on"
    host.close()  # again: nothing to do

    for use in [
        lambda: host.run("print(1)"),
        lambda: host.warmup(),
        lambda: host.load_plugin(wasm("calc")),
        lambda: calc.call("calculate_sum", {"num1": 1, "num2": 2}),
        lambda: asyncio.run(host.run_async("print(1)")),
        lambda: asyncio.run(calc.call_async("calculate_sum", {"num1": 1, "num2": 2})),
        lambda: host.workspace_files(),
    ]:
        with pytest.raises(sandwit.SandwitError, match=CLOSED):
            use()
    # What it was given stays readable.
    assert host.interpreter == "small" and host.limits == sandwit.RunLimits()


def test_a_run_in_flight_goes_on_to_its_end(cache_dir):
    host = sandwit.Host(cache_dir=cache_dir)
    host.warmup()
    outcomes = []
    code = "x = 0\nfor i in range(2_000_000):\n    x += i\nprint(x)"
    runner = threading.Thread(target=lambda: outcomes.append(host.run(code)))
    runner.start()
    time.sleep(0.2)
    host.close()
    runner.join(60)
    [out] = outcomes
    assert (out.status, out.stdout) == ("ok", f"{sum(range(2_000_000))}\n"), out
    with pytest.raises(sandwit.SandwitError, match=CLOSED):
        host.run(code)


def test_a_coroutine_made_before_close_does_not_run_after_it(cache_dir):
    host = sandwit.Host(cache_dir=cache_dir, prepared_interpreters=0)
    pending = host.run_async("print(1)")
    host.close()
    with pytest.raises(sandwit.SandwitError, match=CLOSED):
        asyncio.run(pending)


def test_with_closes_the_host(cache_dir):
    with sandwit.Host(cache_dir=cache_dir, prepared_interpreters=0) as host:
        assert isinstance(host, sandwit.Host)
        assert host.run("print(2)").stdout == "2\n"
    assert host.closed
    with pytest.raises(sandwit.SandwitError, match=CLOSED):
        host.run("print(2)")
    # An exception in the block propagates, and the host is closed.
    with pytest.raises(ZeroDivisionError):
        with sandwit.Host(cache_dir=cache_dir, prepared_interpreters=0) as other:
            1 / 0
    assert other.closed


def test_async_with_and_aclose_close_the_host(cache_dir):
    async def main() -> tuple[sandwit.Host, sandwit.RunOutcome, sandwit.Host]:
        async with sandwit.Host(cache_dir=cache_dir, prepared_interpreters=0) as host:
            out = await host.run_async("print(3)")
        assert host.closed
        other = sandwit.Host(cache_dir=cache_dir, prepared_interpreters=0)
        await other.aclose()
        return host, out, other

    host, out, other = asyncio.run(main())
    assert out.stdout == "3\n"
    for closed in (host, other):
        assert closed.closed
        with pytest.raises(sandwit.SandwitError, match=CLOSED):
            closed.run("print(3)")
