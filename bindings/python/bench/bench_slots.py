"""Runs beyond the cores: many CPU-bound runs started at once, with the
host's run slots (one per core, the default) and without them in effect
(as many slots as runs: every run shares the cores from its start, as all
runs did before the slots).

    .venv-py/bin/python bindings/python/bench/bench_slots.py [--runs N] [--work S]

Each run computes for about `--work` seconds of CPU under a time limit of
three times that: alone it has time to spare. Printed per setting: how many
runs finished, how many ran out of time, the wall time of them all, and the
longest wait for a slot.
"""

import argparse
import asyncio
import os
import time
from pathlib import Path

import sandwit

REPO = Path(__file__).resolve().parents[3]
CACHE = REPO / "target" / "tmp" / "sandwit-cache"


def busy_code(seconds: float, host: sandwit.Host) -> str:
    """Code that computes for about `seconds` of CPU: a loop calibrated by
    one run of it alone."""
    probe = 2_000_000
    code = "n = 0\nfor i in range({}):\n    n += i % 7\nn"
    out = host.run(code.format(probe), limits=sandwit.RunLimits(timeout_s=60))
    if out.status != "ok":
        raise SystemExit(f"the calibration run failed: {out!r}")
    per_iteration = out.elapsed_ms / 1e3 / probe
    return code.format(int(seconds / per_iteration))


async def burst(host: sandwit.Host, code: str, runs: int,
                limit: float) -> tuple[list[sandwit.RunOutcome], float]:
    start = time.perf_counter()
    limits = sandwit.RunLimits(timeout_s=limit)
    outs = await asyncio.gather(*[host.run_async(code, limits=limits) for _ in range(runs)])
    return list(outs), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs started at once [20]")
    parser.add_argument("--work", type=float, default=0.5,
                        help="CPU seconds each run computes [0.5]")
    parser.add_argument("--cache-dir", type=Path, default=CACHE,
                        help="compiled code [the tests' cache, target/tmp/sandwit-cache]")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    limit = 3 * args.work
    print(f"{args.runs} runs at once of ~{args.work} s of CPU each, time limit {limit} s, "
          f"{cores} cores")
    print(f"{'run slots':<28} {'finished':>8} {'out of time':>11} {'wall':>7} {'longest wait':>12}")
    for label, slots in ((f"{cores} (the default)", cores), (f"{args.runs} (one per run)",
                                                                args.runs)):
        with sandwit.Host(cache_dir=args.cache_dir, max_running=slots) as host:
            host.warmup()
            code = busy_code(args.work, host)
            outs, wall = asyncio.run(burst(host, code, args.runs, limit))
        finished = sum(o.status == "ok" for o in outs)
        timed_out = sum(o.limit is not None and o.limit.kind == "time" for o in outs)
        wait = max(o.queued_ms for o in outs) / 1e3
        print(f"{label:<28} {finished:>8} {timed_out:>11} {wall:>6.1f}s {wait:>11.1f}s")


if __name__ == "__main__":
    main()
