"""Durable pauses: a run that calls a method the policy pauses ends
``paused`` with the call and a token; ``Host.resume`` continues it with a
person's answer, on another host over the same store and key, once, and
the calls made before the pause are not made again."""

import pickle

import pytest

import sandwit

POLICY = """
[approval]
pause_for = ["dangerous"]

[plugins.app.methods.send]
dangerous = true
"""

CODE = """
import uuid
token = uuid.uuid4().hex
total = sum(fetch(n) for n in range(3))
answer = send(f"{token}:{total}")
result = [token, total, answer]
"""


def test_a_paused_run_resumes_on_another_host_once(cache_dir, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    store, key = str(tmp_path / "store.db"), bytes(range(32))
    calls = {"fetch": 0, "send": 0}

    @sandwit.method(provider="app")
    def fetch(ctx: sandwit.AgentCtx, n: int) -> int:
        """Fetch a number."""
        calls["fetch"] += 1
        return n * 10

    @sandwit.method(provider="app")
    def send(ctx: sandwit.AgentCtx, text: str) -> str:
        """Send a message."""
        calls["send"] += 1
        return f"sent {text}"

    ctx = sandwit.AgentCtx("py-pauses")
    first = sandwit.Host(cache_dir=cache_dir, policy=policy, store=store, session_key=key)
    outcome = first.run(CODE, ctx=ctx, plugins=first.toolbox(methods=[fetch, send]))
    assert outcome.status == "paused", outcome
    paused = outcome.paused
    assert (paused["plugin"], paused["method"]) == ("app", "send")
    assert paused["args"]["text"].endswith(":30")
    assert calls == {"fetch": 3, "send": 0}
    assert pickle.loads(pickle.dumps(outcome)) == outcome
    assert outcome.to_dict()["paused"] == paused
    first.close()

    again = sandwit.Host(cache_dir=cache_dir, policy=policy, store=store, session_key=key)
    tools = again.toolbox(methods=[fetch, send])
    assert again.pending(paused["token"], ctx=ctx) == paused
    with pytest.raises(sandwit.SandwitError, match="ResumeRefused"):
        again.pending(paused["token"], ctx=sandwit.AgentCtx("another-chat"))
    with pytest.raises(ValueError, match="exactly one answer"):
        again.resume(paused["token"], approve=True, deny="no", ctx=ctx, plugins=tools)
    resumed = again.resume(paused["token"], approve=True, ctx=ctx, plugins=tools)
    assert resumed.status == "ok", resumed
    token = paused["args"]["text"].split(":")[0]
    assert resumed.result == [token, 30, f"sent {token}:30"]
    assert calls == {"fetch": 3, "send": 1}
    spent = again.resume(paused["token"], result="x", ctx=ctx, plugins=tools)
    assert spent.error.type == "ResumeRefused", spent

    # Answered None: `result=None` is no answer, `answer` is.
    outcome = again.run("result = [fetch(1), send('hello')]", ctx=ctx, plugins=tools)
    token = outcome.paused["token"]
    with pytest.raises(ValueError, match=r"Host\.answer\(token, None\)"):
        again.resume(token, result=None, ctx=ctx, plugins=tools)
    answered = again.answer(token, None, ctx=ctx, plugins=tools)
    assert answered.status == "ok", answered
    assert answered.result == [10, None]
    assert calls == {"fetch": 4, "send": 1}
    again.close()
