"""A Nekro-style agent loop on sandwit's Python package.

The "LLM" is scripted: each of its answers is a markdown reply holding a
```python block, which the loop runs in the sandbox, in turn, for one chat.
The code calls the calc plugin (WebAssembly), and methods defined here in
Python: a tool, a behavior that sends chat messages, and an agent method
that hands the round back to the AI. After each run the loop shows the
outcome and what the framework would feed back to the AI.

    python examples/python/agent_loop.py [path/to/calc.wasm]

The calc plugin is taken from the first argument, else $SANDWIT_CALC, else
target/guests/wasm32-wasip2/guest/calc.wasm (scripts/test-python and
scripts/build-plugins build it there). Needs the `sandwit` package
(scripts/test-python installs it into .venv-py).
"""

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import sandwit

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CALC = REPO / "target" / "guests" / "wasm32-wasip2" / "guest" / "calc.wasm"

# What the chat adapter sent, in order: (chat, text).
CHAT: list[tuple[str, str]] = []

USERS = {"alice": {"name": "alice", "role": "admin", "joined": 2021}}
MEMORY = {"alice": "alice's favourite number is 7; she likes answers short."}


@sandwit.method(kind="behavior")
async def send_channel_message(ctx: sandwit.AgentCtx, text: str) -> str:
    """Send a message to the current channel.

    Args:
        text: The message.

    Returns:
        A confirmation for the code.
    """
    await asyncio.sleep(0)  # a real adapter awaits its bot API here
    CHAT.append((ctx.chat_key, text))
    print(f"    [chat {ctx.channel_name}] {text}")
    return f"sent to {ctx.channel_name}"


@sandwit.method
def lookup_user(ctx: sandwit.AgentCtx, name: str) -> dict[str, Any]:
    """Look up a member of this chat.

    Args:
        name: The member's name.

    Returns:
        dict: name, role and the year they joined.
    """
    if name not in USERS:
        raise KeyError(f"no member named {name!r} in {ctx.chat_key}")
    return USERS[name]


@sandwit.method(kind="agent")
def consult_memory(ctx: sandwit.AgentCtx, about: str) -> str:
    """Recall what is known about someone; the script stops and the memory
    goes to you in a new round.

    Args:
        about: Whose memory.
    """
    return MEMORY.get(about, f"nothing is known about {about}")


# The LLM's answers, one per round.
ANSWERS = [
    '''```python
total = calculate_sum(19, 23)
user = lookup_user("alice")
print(f"{user['name']} ({user['role']}) asked for 19 + 23 = {total}")
send_channel_message(f"@{user['name']}: 19 + 23 = {total}")
```''',
    '''```python
# What does alice like? Ask the memory: the round goes back to the AI.
print("checking memory")
consult_memory("alice")
print("never printed")
```''',
    '''```python
favourite = 7
send_channel_message(f"@alice: {favourite} * 6 = {calculate_sum(favourite * 5, favourite)}")
```''',
    '''```python
lookup_user("mallory")
```''',
]


def feedback(out: sandwit.RunOutcome) -> str:
    """What the framework tells the AI about a run, as Nekro does."""
    if out.status == "agent_handoff" and out.handoff:
        return f"[{out.handoff.method}] {out.handoff.result.text}"
    if out.status == "error" and out.error:
        return f"your code failed: {out.error.type}: {out.error.message}"
    if out.status == "limit_exceeded" and out.limit:
        return f"your code was stopped: {out.limit.message}"
    return f"your code printed: {out.stdout!r}"


async def main(calc_path: Path) -> None:
    host = sandwit.Host(limits=sandwit.RunLimits(timeout_s=10))
    calc = host.load_plugin(calc_path)
    plugins = host.toolbox([calc], methods=[send_channel_message, lookup_user,
                                               consult_memory])
    ctx = sandwit.AgentCtx("group_1", user_id="42", channel_name="#general")
    listing = [line for line in plugins.prompt(ctx).splitlines() if line.startswith("def ")]
    print(f"the AI is offered {len(listing)} methods:")
    for line in listing:
        print("   ", line.split("  #")[0])

    for turn, answer in enumerate(ANSWERS, 1):
        code = sandwit.strip_code_fence(answer)
        print(f"\nround {turn}: running {len(code.splitlines())} lines")
        system_messages: list[str] = []

        def on_event(event: sandwit.LiveEvent) -> None:
            if event["type"] == "system_message":
                system_messages.append(event["text"])

        out = await host.run_async(code, ctx=ctx, plugins=plugins, on_event=on_event)
        print(f"  status: {out.status}")
        for line in out.stdout.splitlines():
            print(f"  stdout: {line}")
        for message in system_messages:
            print(f"  system message: {message}")
        print(f"  to the AI: {feedback(out)}")

    print(f"\nchat messages sent: {len(CHAT)}")


if __name__ == "__main__":
    calc = Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SANDWIT_CALC", DEFAULT_CALC))
    if not calc.exists():
        sys.exit(f"{calc} is missing: build it with scripts/build-plugins or scripts/test-python")
    asyncio.run(main(calc))
