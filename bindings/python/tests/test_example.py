"""examples/python/agent_loop.py runs, round by round, as its docstring says."""

import os
import subprocess
import sys

from conftest import CACHE, REPO, wasm


def test_the_agent_loop_example_runs():
    example = REPO / "examples" / "python" / "agent_loop.py"
    env = {**os.environ, "SANDWIT_CACHE_DIR": str(CACHE)}
    done = subprocess.run([sys.executable, str(example), str(wasm("calc"))], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for line in [
        "the AI is offered 5 methods:",
        "    def send_channel_message(text):",
        "    def consult_memory(about):",
        "round 1: running 4 lines",
        "    [chat #general] @alice: 19 + 23 = 42",
        "  stdout: alice (admin) asked for 19 + 23 = 42",
        "  system message: sent to #general",
        "  status: agent_handoff",
        "  to the AI: [consult_memory] alice's favourite number is 7; she likes answers short.",
        "    [chat #general] @alice: 7 * 6 = 42",
        "  to the AI: your code failed: PluginError: lookup_user: raised KeyError: "
        "\"no member named 'mallory' in group_1\"",
        "chat messages sent: 2",
    ]:
        assert line in out.splitlines(), (line, out)
    assert "never printed" not in out
    # Rounds in order, each with its outcome.
    statuses = [l for l in out.splitlines() if l.startswith("  status: ")]
    assert statuses == ["  status: ok", "  status: agent_handoff", "  status: ok",
                        "  status: error"]
