"""Chat workspaces through the Python package: a host made with
``workspace=`` gives each chat a folder of its own, in either interpreter,
and lists and reads its files."""

import pytest

import sandwit


@pytest.fixture(scope="module")
def host(cache_dir, scientific_dir, tmp_path_factory) -> sandwit.Host:
    root = tmp_path_factory.mktemp("workspaces")
    return sandwit.Host(cache_dir=cache_dir, scientific_dir=scientific_dir, workspace=root,
                        workspace_max_mib=1)


def test_a_chat_keeps_its_files_in_either_interpreter(host):
    a, b = sandwit.AgentCtx("ws-a"), sandwit.AgentCtx("ws-b")
    out = host.run("import os\nprint(os.getcwd())\nopen('n.txt', 'w').write('kept')", ctx=a)
    assert (out.status, out.stdout) == ("ok", "/workspace\n"), out
    assert out.files == [{"path": "n.txt", "size": 4}]
    out = host.run("print(open('n.txt').read())", ctx=a, interpreter="scientific")
    assert (out.status, out.stdout) == ("ok", "kept\n"), out
    assert host.workspace_files(a) == [{"path": "n.txt", "size": 4}]
    assert host.read_workspace_file("n.txt", a) == b"kept"
    assert host.workspace_files(b) == []
    out = host.run("import os\nprint(os.listdir('.'))", ctx=b)
    assert out.stdout == "[]\n"


def test_workspace_errors_name_what_was_wrong(host):
    a = sandwit.AgentCtx("ws-a")
    host.run("open('n.txt', 'w').write('kept')", ctx=a)
    with pytest.raises(FileNotFoundError):
        host.read_workspace_file("missing.txt", a)
    with pytest.raises(PermissionError):
        host.read_workspace_file("../x", a)
    with pytest.raises(ValueError):
        host.read_workspace_file("n.txt", a, max_bytes=1)
    out = host.run("open('big', 'wb').write(b'x' * (2 << 20))", ctx=a)
    assert out.status == "limit_exceeded" and out.limit.kind == "workspace", out
    with pytest.raises(sandwit.SandwitError, match="no workspaces"):
        sandwit.Host().workspace_files()
