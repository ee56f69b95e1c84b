"""Tool sources in the Python package: the policy's `[tools.shop]`, an
OpenAPI document served by a real FastAPI application on loopback
(tests/cli/tools/openapi_app.py, run by `.venv-tools`'s Python, which
scripts/test and scripts/test-python make), become methods that a run and
`Toolbox.call` reach, with the source's token hidden."""

import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import sandwit
from conftest import REPO

TOKEN = "tok-secret-9090-shop"


@pytest.fixture
def app() -> Iterator[str]:
    """The FastAPI application's base URL, for the test's length."""
    python = os.environ.get("SANDWIT_TOOLS_PYTHON") or str(REPO / ".venv-tools" / "bin" / "python")
    if not Path(python).exists():
        pytest.fail(f"{python} is missing: `source scripts/env.sh && tools_venv` makes it")
    child = subprocess.Popen(
        [python, str(REPO / "tests" / "cli" / "tools" / "openapi_app.py")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "TOOLS_TOKEN": TOKEN},
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.startswith("listening on "), line
    try:
        yield line.removeprefix("listening on ").strip()
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=10)


def test_a_sources_methods_are_called_in_runs_and_directly(app, cache_dir, tmp_path, monkeypatch):
    with urllib.request.urlopen(f"{app}/openapi.json") as answer:
        (tmp_path / "shop.json").write_bytes(answer.read())
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[tools.shop]\nopenapi = "shop.json"\n'
        f'base_url = "{app}"\noperations = ["get_item", "echo_auth"]\n'
        'auth = { type = "bearer", token = { env = "SHOP_TOKEN" } }\n')
    monkeypatch.setenv("SHOP_TOKEN", TOKEN)
    host = sandwit.Host(cache_dir=cache_dir, policy=policy, prepared_interpreters=0)
    methods = host.tool_sources()
    assert sorted(m.name for m in methods) == ["echo_auth", "get_item"]
    assert {m.provider for m in methods} == {"shop"}
    assert methods[0].func is None
    with pytest.raises(TypeError, match="tool source `shop`"):
        methods[0]()

    plugins = host.toolbox(methods=methods)
    outcome = host.run("result = get_item(5, q='z')['name']", plugins=plugins)
    assert outcome.status == "ok", outcome.error
    assert outcome.result == "item 5"
    assert plugins.call("echo_auth").value == {"authorization": "[secret]"}
    with pytest.raises(sandwit.CallError, match="invalid arguments"):
        plugins.call("get_item", {"item_id": "five"})


def test_a_source_that_cannot_load_is_named(cache_dir, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.shop]\nopenapi = "missing.json"\n'
                      'base_url = "http://127.0.0.1:9"\noperations = ["*"]\n')
    host = sandwit.Host(cache_dir=cache_dir, policy=policy, prepared_interpreters=0)
    with pytest.raises(sandwit.SandwitError, match="tool source `shop`: cannot read its document"):
        host.tool_sources()


def test_an_mcp_servers_tools_are_methods(cache_dir, tmp_path):
    python = os.environ.get("SANDWIT_TOOLS_PYTHON") or str(REPO / ".venv-tools" / "bin" / "python")
    server = REPO / "tests" / "cli" / "tools" / "mcp_server.py"
    policy = tmp_path / "policy.toml"
    policy.write_text(f'[tools.docs]\ncommand = ["{python}", "{server}", "stdio"]\n')
    host = sandwit.Host(cache_dir=cache_dir, policy=policy, prepared_interpreters=0)
    methods = host.tool_sources()
    assert {"add", "echo", "my_tool_v2"} <= {m.name for m in methods}
    plugins = host.toolbox(methods=methods)
    outcome = host.run("result = [add(2, 3), echo('hi')]", plugins=plugins)
    assert outcome.status == "ok", outcome.error
    assert outcome.result == [{"result": 5}, "hi"]
