"""Cancelling runs: a `Cancel` handle from another thread or task (status
`cancelled`), a cancelled asyncio task; the run really stops."""

import asyncio
import threading
import time

import pytest

import sandwit
from conftest import becomes_idle, wasm

LONG = sandwit.RunLimits(timeout_s=60)


@pytest.fixture(scope="module")
def quiet_set(quiet_host):
    return quiet_host.toolbox([quiet_host.load_plugin(wasm(name)) for name in ["calc", "hostile"]])


def test_the_cancel_handle():
    cancel = sandwit.Cancel()
    assert not cancel.cancelled and repr(cancel) == "Cancel(cancelled=False)"
    cancel.cancel()
    cancel.cancel()
    assert cancel.cancelled and repr(cancel) == "Cancel(cancelled=True)"


@pytest.mark.parametrize("code", ["while True: pass", "import time\ntime.sleep(60)",
                                  "print('started', flush=True)\nsleep()"])
def test_a_cancel_handle_ends_a_sync_run_from_another_thread(quiet_host, quiet_set, code):
    host, toolbox = quiet_host, quiet_set
    cancel = sandwit.Cancel()
    timer = threading.Timer(0.3, cancel.cancel)
    timer.start()
    start = time.monotonic()
    out = host.run(code, plugins=toolbox, limits=LONG, cancel=cancel)
    elapsed = time.monotonic() - start
    assert (out.status, out.error, out.limit, out.handoff) == ("cancelled", None, None, None)
    assert 0.25 < elapsed < 3, elapsed
    assert out.to_dict()["status"] == "cancelled"
    # Stopped: the process is idle and the host serves.
    assert becomes_idle()
    assert host.run("print(calculate_sum(1, 1))", plugins=toolbox).stdout == "2\n"


def test_a_cancelled_handle_ends_later_runs_at_once(host):
    cancel = sandwit.Cancel()
    cancel.cancel()
    seen = []
    start = time.monotonic()
    out = host.run("print('never')", cancel=cancel, on_event=seen.append)
    assert (out.status, out.stdout, seen) == ("cancelled", "", [])
    assert time.monotonic() - start < 1


def test_a_cancel_handle_ends_run_async_with_an_outcome(quiet_host):
    host = quiet_host
    seen = []

    async def main():
        cancel = sandwit.Cancel()
        task = asyncio.create_task(host.run_async(
            "n = 0\nwhile True:\n    n += 1\n    if n % 100000 == 0: print(n)",
            limits=LONG, cancel=cancel, on_event=seen.append))
        await asyncio.sleep(0.5)
        cancel.cancel()
        out = await task
        shown = len(seen)
        await asyncio.sleep(0.3)
        return out, shown

    out, shown = asyncio.run(main())
    assert out.status == "cancelled"
    # Printed before it was cancelled, and shown; nothing after the outcome.
    assert out.stdout and out.stdout == "".join(e["text"] for e in seen)
    assert shown == len(seen)
    assert becomes_idle()


def test_cancelling_the_task_stops_events_and_the_run(quiet_host):
    host = quiet_host
    seen = []

    async def main():
        task = asyncio.create_task(host.run_async("print('tick', flush=True)\nwhile True: pass",
                                                  limits=LONG, on_event=seen.append))
        while not seen:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        shown = len(seen)
        await asyncio.sleep(0.3)
        return shown

    shown = asyncio.run(main())
    assert shown == len(seen)
    assert becomes_idle()


def test_cancelling_a_run_cancels_its_host_methods_coroutine(host):
    started, cancelled = threading.Event(), threading.Event()

    @sandwit.method
    async def wait_forever(ctx) -> None:
        """Waits forever."""
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    toolbox = host.toolbox(methods=[wait_forever])

    async def main():
        task = asyncio.create_task(host.run_async("wait_forever()", plugins=toolbox,
                                                  limits=LONG))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The coroutine runs on this loop: give it the chance to see it.
        for _ in range(100):
            if cancelled.is_set():
                break
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert cancelled.is_set()

    # A synchronous run's, on sandwit's own loop.
    started.clear()
    cancelled.clear()
    cancel = sandwit.Cancel()
    threading.Thread(target=lambda: started.wait(5) and cancel.cancel()).start()
    out = host.run("wait_forever()", plugins=toolbox, limits=LONG, cancel=cancel)
    assert out.status == "cancelled"
    assert cancelled.wait(5)


def test_cancel_must_be_a_cancel(host):
    with pytest.raises(TypeError):
        host.run("print(1)", cancel=True)
