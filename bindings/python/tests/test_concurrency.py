"""Runs from many threads and asyncio tasks at once, and cancellation."""

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import sandwit


def test_runs_from_many_threads_at_once(host, toolbox):
    def work(i):
        ctx = sandwit.AgentCtx(f"thread-{i}")
        outs = [host.run(f"print(calculate_sum({i}, {j}))", ctx=ctx, plugins=toolbox)
                for j in range(5)]
        return [(o.status, o.stdout) for o in outs]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(8)))
    for i, outs in enumerate(results):
        assert outs == [("ok", f"{i + j}\n") for j in range(5)]


def test_the_gil_is_released_while_a_run_waits(host):
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        out = host.run("import time\ntime.sleep(0.5)\nprint('slept')")
        calls_during = ticks
    finally:
        stop.set()
        counter.join()
    assert out.stdout == "slept\n"
    assert calls_during > 50, calls_during


def test_direct_calls_from_many_threads(plugins):
    calc = plugins["calc"]
    with ThreadPoolExecutor(8) as pool:
        sums = list(pool.map(lambda i: calc.call("calculate_sum", {"num1": i, "num2": i}).value,
                             range(64)))
    assert sums == [2 * i for i in range(64)]


def test_runs_from_asyncio_at_once(host, toolbox):
    async def main():
        runs = [host.run_async(f"print(calculate_sum({i}, 1))", ctx=sandwit.AgentCtx(f"a-{i}"),
                               plugins=toolbox) for i in range(12)]
        return await asyncio.gather(*runs)

    outs = asyncio.run(main())
    assert [(o.status, o.stdout) for o in outs] == [("ok", f"{i + 1}\n") for i in range(12)]


def test_async_runs_overlap_and_leave_the_loop_free(host):
    async def main():
        start = time.monotonic()
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.create_task(tick())
        outs = await asyncio.gather(*[host.run_async("import time\ntime.sleep(0.5)")
                                      for _ in range(4)])
        ticker.cancel()
        return outs, time.monotonic() - start, ticks

    outs, elapsed, ticks = asyncio.run(main())
    assert all(o.status == "ok" for o in outs)
    assert elapsed < 1.9, elapsed  # 4 sleeps of 0.5 s overlap
    assert ticks > 10


def test_async_results_and_errors(host, plugins, toolbox):
    async def main():
        out = await host.run_async("print(calculate_sum(1, 2))", plugins=toolbox,
                                   limits=sandwit.RunLimits(timeout_s=5))
        result = await plugins["calc"].call_async("calculate_sum", {"num1": 2, "num2": 3})
        with pytest.raises(sandwit.CallError) as e:
            await plugins["calc"].call_async("nope")
        failed = await host.run_async("1/0")
        return out, result, e.value, failed

    out, result, error, failed = asyncio.run(main())
    assert (out.status, out.stdout) == ("ok", "3\n")
    assert (result.kind, result.value) == ("tool", 5)
    assert (error.kind, error.method) == ("unknown_method", "nope")
    assert failed.error.type == "ZeroDivisionError"


def test_run_async_is_a_coroutine_that_starts_when_awaited(host, toolbox):
    import gc
    import inspect
    import warnings

    coro = host.run_async("print('direct')")
    assert inspect.iscoroutine(coro)
    assert asyncio.run(coro).stdout == "direct\n"
    # One never awaited never runs.
    ctx = sandwit.AgentCtx("never-awaited", "never-user")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        host.run_async("remember('should not be kept')", ctx=ctx, plugins=toolbox)
        gc.collect()
    time.sleep(0.2)
    assert host.run("print(recall())", ctx=ctx, plugins=toolbox).stdout == "[]\n"


def test_bad_input_to_run_async_raises_at_once(host):
    async def main():
        with pytest.raises(TypeError):
            host.run_async(123)
        with pytest.raises(TypeError):
            host.run_async("print(1)", plugins=7)

    asyncio.run(main())


def test_cancelling_run_async_ends_the_run(host, toolbox):
    """Cancelled busy runs must stop: if they went on, they would hold the
    host's runtime threads and the quick run after them would wait."""

    async def main():
        long = sandwit.RunLimits(timeout_s=60)
        tasks = [asyncio.create_task(host.run_async("while True: pass", limits=long))
                 for _ in range(4)]
        tasks.append(asyncio.create_task(host.run_async("import time\ntime.sleep(60)",
                                                        limits=long)))
        tasks.append(asyncio.create_task(
            host.run_async("sleep()", plugins=toolbox, limits=long)))
        await asyncio.sleep(0.5)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with pytest.raises(asyncio.CancelledError):
                await task
        # The runs stopped: the process is idle.
        cpu = time.process_time()
        await asyncio.sleep(1)
        assert time.process_time() - cpu < 0.5
        start = time.monotonic()
        out = await host.run_async("print(calculate_sum(20, 22))", plugins=toolbox)
        return out, time.monotonic() - start

    start = time.monotonic()
    out, quick = asyncio.run(main())
    assert (out.status, out.stdout) == ("ok", "42\n")
    assert quick < 5, quick
    assert time.monotonic() - start < 20


def test_wait_for_times_out_and_ends_the_run(host):
    async def main():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(
                host.run_async("while True: pass", limits=sandwit.RunLimits(timeout_s=60)), 0.3)
        return await host.run_async("print('after')")

    start = time.monotonic()
    assert asyncio.run(main()).stdout == "after\n"
    assert time.monotonic() - start < 10


def test_cancelling_call_async_ends_the_call(plugins):
    async def main():
        task = asyncio.create_task(plugins["hostile"].call_async("sleep"))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await plugins["calc"].call_async("calculate_sum", {"num1": 1, "num2": 1})

    assert asyncio.run(main()).value == 2


def test_threads_and_asyncio_together(host, toolbox):
    def sync_runs():
        return [host.run(f"print({i})").stdout for i in range(10)]

    async def main():
        loop = asyncio.get_running_loop()
        in_thread = loop.run_in_executor(None, sync_runs)
        asyncs = asyncio.gather(*[host.run_async(f"print(calculate_sum({i}, 0))",
                                                 plugins=toolbox) for i in range(10)])
        return await in_thread, await asyncs

    sync_out, async_out = asyncio.run(main())
    assert sync_out == [f"{i}\n" for i in range(10)]
    assert [o.stdout for o in async_out] == [f"{i}\n" for i in range(10)]


def test_ctrl_c_ends_a_synchronous_run(cache_dir):
    import signal
    import subprocess
    import sys

    # Python keeps SIGINT ignored when it starts with it ignored (as a
    # background job of a non-interactive shell does): install the default
    # handler, so the test does not depend on how it was started.
    code = ("import signal, sys, sandwit\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "host = sandwit.Host(cache_dir=sys.argv[1], prepared_interpreters=0)\n"
            "print('started', flush=True)\n"
            "host.run('while True: pass', limits=sandwit.RunLimits(timeout_s=60))\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(cache_dir)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "started\n"
    time.sleep(0.5)
    start = time.monotonic()
    child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=30)
    assert time.monotonic() - start < 5
    assert child.returncode != 0 and "KeyboardInterrupt" in stderr, stderr
