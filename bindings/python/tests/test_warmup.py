"""The interpreter's first use on a machine compiles it into the cache and
says so on stderr, as the CLI does; `sandwit.warmup()` does it ahead."""

import subprocess
import sys

MESSAGE = ("sandwit: compiling the Python interpreter for this machine "
           "(once; about 10-30 s)... done in ")


def python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=600)


def test_warmup_compiles_once_and_says_so(tmp_path):
    cache = tmp_path / "cache"
    first = python("import sandwit, sys; print(sandwit.warmup(cache_dir=sys.argv[1]))", str(cache))
    assert first.returncode == 0, first.stderr
    assert first.stdout == "compiled\n"
    assert first.stderr.startswith(MESSAGE) and first.stderr.endswith(" s\n"), first.stderr

    again = python("import sandwit, sys; print(sandwit.warmup(cache_dir=sys.argv[1]))", str(cache))
    assert (again.returncode, again.stdout, again.stderr) == (0, "disk_cache\n", "")

    # A host with that cache runs at once, silently.
    run = python("import sandwit, sys\n"
                 "print(sandwit.Host(cache_dir=sys.argv[1]).run('print(6 * 7)').stdout, end='')",
                 str(cache))
    assert (run.returncode, run.stdout, run.stderr) == (0, "42\n", "")


def test_the_default_cache_is_the_clis(tmp_path):
    import os

    code = "import sandwit; print(sandwit.Host(prepared_interpreters=0).cache_dir)"
    base = {k: v for k, v in os.environ.items()
            if k not in ("HOME", "XDG_CACHE_HOME", "SANDWIT_CACHE_DIR")}
    for extra, expected in [
        ({"SANDWIT_CACHE_DIR": str(tmp_path / "a")}, tmp_path / "a"),
        ({"XDG_CACHE_HOME": str(tmp_path / "x")}, tmp_path / "x" / "sandwit"),
        ({"HOME": str(tmp_path / "h")}, tmp_path / "h" / ".cache" / "sandwit"),
        ({}, None),
    ]:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**base, **extra}, timeout=120)
        assert (out.returncode, out.stdout) == (0, f"{expected}\n"), out.stderr
