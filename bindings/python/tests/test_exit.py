"""The interpreter exits cleanly after `run_async`, however the runs stand
at exit: awaited, cancelled by `asyncio.run`, still running in another
thread's loop, synchronous runs in daemon threads, or runs in daemon
threads calling Python host methods (plain and async, with live events). (pyo3-async-runtimes' `future_into_py` crashed at exit in 12
of 30 such runs; sandwit completes asyncio futures from its own threads,
which stop entering Python when the interpreter begins to exit.)"""

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from conftest import wasm

SCRIPT = r"""
import asyncio, sys, threading, time
import sandwit

scenario, cache, calc = int(sys.argv[1]), sys.argv[2], sys.argv[3]
host = sandwit.Host(cache_dir=cache, max_instances=32)
plugins = host.toolbox([host.load_plugin(calc)])

async def awaited():
    outs = await asyncio.gather(*[host.run_async(f"print(calculate_sum({i}, 1))", plugins=plugins)
                                  for i in range(3)])
    print("".join(o.stdout for o in outs), end="")

async def left_running():
    await awaited()
    # Still running when asyncio.run returns: cancelled then, at exit.
    for _ in range(3):
        asyncio.ensure_future(host.run_async("while True: pass"))
    asyncio.ensure_future(host.run_async("print(1)"))
    await asyncio.sleep(0.05)

def loop_in_a_thread():
    async def forever():
        while True:
            await host.run_async("import time\ntime.sleep(0.01)")
    threading.Thread(target=asyncio.run, args=(forever(),), daemon=True).start()

def sync_runs_in_daemon_threads():
    def forever():
        while True:
            host.run("import time\ntime.sleep(0.02)")
    for _ in range(2):
        threading.Thread(target=forever, daemon=True).start()

@sandwit.method
def nap(ctx, s: float) -> str:
    '''Sleeps on the host's thread.

    Args:
        s: Seconds.
    '''
    time.sleep(s)
    return "rested"

@sandwit.method
async def async_nap(ctx, s: float) -> str:
    '''Sleeps on a loop.

    Args:
        s: Seconds.
    '''
    await asyncio.sleep(s)
    return "rested"

def host_methods_in_daemon_threads():
    methods = host.toolbox(methods=[nap, async_nap])
    def sync_runs():
        while True:
            host.run("nap(0.01)\nasync_nap(0.01)", plugins=methods, on_event=lambda e: None)
    async def async_runs():
        while True:
            await host.run_async("async_nap(0.01)\nnap(0.01)", plugins=methods,
                                 on_event=lambda e: None)
    threading.Thread(target=sync_runs, daemon=True).start()
    threading.Thread(target=asyncio.run, args=(async_runs(),), daemon=True).start()
    time.sleep(0.1)

if scenario == 0:
    asyncio.run(awaited())
elif scenario == 1:
    asyncio.run(left_running())
elif scenario == 2:
    loop_in_a_thread()
    asyncio.run(awaited())
elif scenario == 3:
    sync_runs_in_daemon_threads()
    asyncio.run(awaited())
else:
    host_methods_in_daemon_threads()
    asyncio.run(awaited())
print("exiting")
"""


def test_thirty_processes_exit_cleanly(cache_dir):
    def one(i):
        scenario = i % 5
        return i, subprocess.run(
            [sys.executable, "-c", SCRIPT, str(scenario), str(cache_dir), str(wasm("calc"))],
            capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(one, range(30)))
    failures = [(i, p.returncode, p.stderr[-2000:]) for i, p in results
                if p.returncode != 0 or p.stdout != "1\n2\n3\nexiting\n"]
    assert not failures, failures
    for _, p in results:
        assert "panicked" not in p.stderr and "Fatal" not in p.stderr, p.stderr
