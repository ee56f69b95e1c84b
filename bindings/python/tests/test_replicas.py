"""Hosts as replicas: two ``Host(store="postgres://...")`` on one
database share the plugin store and the execution controls' rate limits
(the Rust tests run three servers behind haproxy, tests/cli/replicas.rs).
The server is ``$SANDWIT_TEST_POSTGRES`` (scripts/test starts one), else the
developer's cluster ``scripts/postgres start`` keeps in target/postgres."""

import os
import subprocess
import uuid

import pytest

import sandwit
from conftest import REPO, pin, wasm


@pytest.fixture
def database() -> str:
    """A fresh database's URL."""
    server = os.environ.get("SANDWIT_TEST_POSTGRES") or subprocess.run(
        [REPO / "scripts" / "postgres", "start"], check=True, capture_output=True, text=True
    ).stdout.strip()
    name = f"sandwit_py_{uuid.uuid4().hex[:12]}"
    subprocess.run(["psql", server, "-q", "-v", "ON_ERROR_STOP=1", "-c", f"CREATE DATABASE {name}"],
                   check=True, capture_output=True)
    return server.rsplit("/", 1)[0] + "/" + name


def test_replicas_share_the_store_and_the_rate_limits(database, cache_dir, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[store]\nurl = "{database}"\n'
                      + '[plugins.notes]\ngrant = ["store"]\n' + pin("notes")
                      + "[plugins.calc.methods.get_current_time]\nrate_limit = 2\n")
    # One host takes the database from the policy's `[store] url`, one is
    # given it; a third, given a file, keeps its own store.
    hosts = [sandwit.Host(cache_dir=cache_dir, policy=policy, store=store,
                          prepared_interpreters=0)
             for store in (None, database, tmp_path / "own.db")]
    notes = [host.load_plugin(wasm("notes")) for host in hosts]
    ctx = sandwit.AgentCtx("room", user_id="ann")
    notes[0].call("remember", {"note": "written by one"}, ctx=ctx)
    assert notes[1].call("recall", ctx=ctx).value == ["written by one"]
    assert notes[2].call("recall", ctx=ctx).value == []

    calcs = [host.load_plugin(wasm("calc")) for host in hosts[:2]]
    calcs[0].call("get_current_time")
    calcs[1].call("get_current_time")
    with pytest.raises(sandwit.CallError, match="calls a minute"):
        calcs[0].call("get_current_time")


def test_an_unreachable_database_is_named_without_its_password(cache_dir):
    with pytest.raises(sandwit.SandwitError) as raised:
        sandwit.Host(cache_dir=cache_dir, store="postgres://u:pw-secret-1@127.0.0.1:9/nowhere")
    assert "127.0.0.1:9/nowhere" in str(raised.value)
    assert "pw-secret-1" not in str(raised.value)
