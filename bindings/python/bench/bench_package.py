"""What the Python package costs: a fresh run, and one method call from
sandboxed code to a Python host method and to a WebAssembly plugin,
measured in one process so the rows are side by side.

    .venv-py/bin/python bindings/python/bench/bench_package.py [--quick] [--runs N]

Run it after scripts/test-python built the package into .venv-py (a dev
build: sandwit's own code unoptimised, its dependencies optimised). For
numbers comparable to BENCHMARKS.md (the Rust library, release build),
rebuild it optimised first:

    (cd bindings/python && SANDWIT_EMBED_PYTHON=$PWD/../../target/embed/sandbox.wasm \\
        VIRTUAL_ENV=$PWD/../../.venv-py ../../.venv-py/bin/maturin develop --release)

Rows (p50 over the runs; wall clock around `host.run`, as an embedder sees it):
- a fresh run of `print(1+1)`, back to back and spaced by 20 ms (the spaced
  run starts on caches gone cold, as a chat's runs do);
- a call of `nop()` from sandboxed code: a run calling it 1,000 times in a
  loop, less the same loop doing nothing, over 1,000; for a Python host
  method (`def`, and `async def`), and for the echo plugin's `nop()`.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import sandwit
from sandwit import _sandwit

REPO = Path(__file__).resolve().parents[3]
GUESTS = REPO / "target" / "guests" / "wasm32-wasip2" / "guest"
CACHE = REPO / "target" / "tmp" / "sandwit-cache"
CALLS = 1000
LOOP = "for _ in range(%d):\n    {}\n" % CALLS


@sandwit.method(name="nop")
def nop(ctx: sandwit.AgentCtx) -> None:
    """Does nothing."""


@sandwit.method(name="nop")
async def async_nop(ctx: sandwit.AgentCtx) -> None:
    """Does nothing, as a coroutine."""


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def timed(host: sandwit.Host, code: str, plugins: sandwit.Toolbox | None = None,
          limits: sandwit.RunLimits | None = None) -> float:
    """Seconds a run of `code` takes, checked to succeed."""
    start = time.perf_counter()
    out = host.run(code, plugins=plugins, limits=limits)
    elapsed = time.perf_counter() - start
    if out.status != "ok":
        sys.exit(f"bench run failed: {out!r}")
    return elapsed


def fresh_runs(host: sandwit.Host, runs: int, pause: float) -> float:
    samples = []
    for _ in range(runs):
        samples.append(timed(host, "print(1+1)"))
        if pause:
            time.sleep(pause)
    return p50(samples)


def per_call(host: sandwit.Host, sets: dict[str, sandwit.Toolbox],
             runs: int) -> dict[str, float]:
    """The p50 cost of one `nop()` call in each set, from runs with and
    without the calls, interleaved so that drift hits them alike."""
    limits = sandwit.RunLimits(max_calls=CALLS + 1, timeout_s=60)
    empty: list[float] = []
    calls: dict[str, list[float]] = {name: [] for name in sets}
    for _ in range(runs):
        empty.append(timed(host, LOOP.format("pass"), limits=limits))
        for name, toolbox in sets.items():
            calls[name].append(timed(host, LOOP.format("nop()"), plugins=toolbox,
                                     limits=limits))
    base = p50(empty)
    return {name: (p50(samples) - base) / CALLS for name, samples in calls.items()}


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few runs, to see that it works")
    parser.add_argument("--runs", type=int, help="runs per row [200; --quick: 10]")
    parser.add_argument("--cache-dir", type=Path, default=CACHE,
                        help="compiled code [the tests' cache, target/tmp/sandwit-cache]")
    parser.add_argument("--guests", type=Path, default=GUESTS,
                        help="where echo.wasm is [target/guests/wasm32-wasip2/guest]")
    args = parser.parse_args()
    runs = args.runs or (10 if args.quick else 200)
    call_runs = max(3, runs // 10)

    host = sandwit.Host(cache_dir=args.cache_dir)
    host.warmup()
    echo = host.load_plugin(args.guests / "echo.wasm")
    sets = {
        "Python host method nop() (def)": host.toolbox(methods=[nop]),
        "Python host method nop() (async def)": host.toolbox(methods=[async_nop]),
        "plugin echo.nop() (wasm)": host.toolbox([echo]),
    }
    # Warm: interpreters prepared, code paths and caches touched.
    for _ in range(5):
        timed(host, "print(1+1)")
        for toolbox in sets.values():
            timed(host, "nop()", plugins=toolbox)

    back_to_back = fresh_runs(host, runs, 0)
    spaced = fresh_runs(host, runs, 0.02)
    costs = per_call(host, sets, call_runs)
    plugin = "plugin echo.nop() (wasm)"

    build = "dev (unoptimised)" if _sandwit._DEBUG_BUILD else "release"
    print(f"sandwit {sandwit.__version__} Python package, {build} build; "
          f"{runs} fresh runs per row, {call_runs} runs of {CALLS:,} calls per call row")
    rows = [
        ("fresh run print(1+1), back to back, p50", back_to_back, ""),
        ("fresh run print(1+1), 20 ms apart, p50", spaced, ""),
    ] + [
        (f"call {name}", cost, f"{cost / costs[plugin]:.1f}× the plugin's" if name != plugin else "")
        for name, cost in costs.items()
    ]
    width = max(len(name) for name, _, _ in rows)
    print(f"{'row':<{width}}  {'time':>12}  ratio")
    for name, seconds, ratio in rows:
        print(f"{name:<{width}}  {us(seconds):>12}  {ratio}")


if __name__ == "__main__":
    main()
