"""Host methods written in Python: specs from type hints and docstrings,
listing, calls from runs (arguments checked, results by kind), failures,
async methods, deadlines, concurrency and name clashes."""

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, Optional

import pytest

import sandwit

# ---- specs --------------------------------------------------------------------------


def test_the_decorator_makes_a_spec_from_type_hints_and_the_docstring():
    @sandwit.method(kind="tool", name="find_users")
    def find(ctx: sandwit.AgentCtx, query: str, limit: int, score: float, exact: bool,
             ids: list[int], weights: dict[str, float], note: Optional[str],
             page: int | None = None, order: Literal["asc", "desc"] = "asc",
             extra: Any = None) -> list[dict[str, Any]]:
        """Find users.

        Searches the directory.

        Args:
            ctx: The call's context.
            query: What to look for,
                over two lines.
            limit (int): At most this many.
            score: The least score.

        Returns:
            The users found.
        """
        return [{"query": query}]

    assert isinstance(find, sandwit.HostMethod)
    assert (find.name, find.kind, find.provider) == ("find_users", "tool", "host")
    assert repr(find) == "HostMethod('find_users', kind='tool', provider='host')"
    spec = find.spec
    assert spec["description"] == "Find users."
    # The AI does not pass the context: its entry is gone from what it reads.
    assert spec["docstring"] == (
        "Find users.\n\nSearches the directory.\n\nArgs:\n    query: What to look for,\n"
        "        over two lines.\n    limit (int): At most this many.\n"
        "    score: The least score.\n\nReturns:\n    The users found.")
    params = {p["name"]: (p["schema"], p["required"]) for p in spec["params"]}
    assert list(params) == ["query", "limit", "score", "exact", "ids", "weights", "note",
                            "page", "order", "extra"]
    assert params["query"] == ({"type": "string",
                                "description": "What to look for, over two lines."}, True)
    assert params["limit"] == ({"type": "integer", "description": "At most this many."}, True)
    assert params["score"] == ({"type": "number", "description": "The least score."}, True)
    assert params["exact"] == ({"type": "boolean"}, True)
    assert params["ids"] == ({"type": "array", "items": {"type": "integer"}}, True)
    assert params["weights"] == ({"type": "object",
                                  "additionalProperties": {"type": "number"}}, True)
    # Optional without a default: may be None, but must be given.
    assert params["note"] == ({"anyOf": [{"type": "string"}, {"type": "null"}]}, True)
    assert params["page"] == ({"anyOf": [{"type": "integer"}, {"type": "null"}],
                               "default": None}, False)
    assert params["order"] == ({"enum": ["asc", "desc"], "default": "asc"}, False)
    assert params["extra"] == ({"default": None}, False)
    assert spec["returns"] == {"type": "array",
                               "items": {"type": "object", "additionalProperties": {}}}
    # Calling it calls the function.
    ctx = sandwit.AgentCtx("c")
    assert find(ctx, "bob", 1, 0.5, True, [], {}, None) == [{"query": "bob"}]
    assert find.func.__name__ == "find"


def test_the_decorator_bare_and_as_a_call():
    @sandwit.method
    def ping(ctx) -> str:
        """Answers pong."""
        return "pong"

    def existing(ctx, text: str) -> str:
        """Shout it."""
        return text.upper()

    shout = sandwit.method(existing, kind="behavior", provider="app",
                           description="Shouts the text.")
    assert (ping.name, ping.kind, ping.spec["params"]) == ("ping", "tool", [])
    assert ping.spec["returns"] == {"type": "string"}
    assert (shout.name, shout.kind, shout.provider) == ("existing", "behavior", "app")
    assert shout.spec["description"] == "Shouts the text."
    assert shout(None, "hi") == "HI"


def test_a_hint_without_a_schema_is_a_type_error_at_decoration():
    def hinted(hint):
        def f(ctx, x: hint) -> str:
            """Doc."""
        return f

    for hint in [set[int], tuple[int, int], dict[int, str], bytes, object, Literal[1.5]]:
        with pytest.raises(TypeError, match=r"host method .*f, parameter 'x': .*"):
            sandwit.method(hinted(hint))

    def untyped(ctx, x):
        """Doc."""
    with pytest.raises(TypeError, match=r"untyped, parameter 'x': has no type hint"):
        sandwit.method(untyped)

    def star(ctx, *names: str):
        """Doc."""
    with pytest.raises(TypeError, match=r"star, parameter 'names': \*args and \*\*kwargs"):
        sandwit.method(star)

    def positional(ctx, a: int, /):
        """Doc."""
    with pytest.raises(TypeError, match=r"parameter 'a': is positional-only"):
        sandwit.method(positional)

    def no_ctx():
        """Doc."""
    with pytest.raises(TypeError, match=r"no_ctx: its first parameter must take"):
        sandwit.method(no_ctx)

    def says_int(ctx) -> int:
        """Doc."""
    with pytest.raises(TypeError, match=r"says_int: a behavior method returns a str, not <class 'int'>"):
        sandwit.method(says_int, kind="behavior")

    def unresolved(ctx, x: "NoSuchType"):  # noqa: F821
        """Doc."""
    with pytest.raises(TypeError, match=r"unresolved: cannot resolve its type hints"):
        sandwit.method(unresolved)

    with pytest.raises(TypeError, match="takes the function to wrap"):
        sandwit.method("behavior")
    with pytest.raises(ValueError, match="kind must be one of"):
        sandwit.method(kind="robot")


def test_the_host_refuses_a_bad_spec():
    def undocumented(ctx, x: int):
        return x

    with pytest.raises(sandwit.MethodSpecError) as e:
        sandwit.method(undocumented)
    assert (e.value.method, e.value.provider) == ("undocumented", "host")
    # Once: not again as the description taken from it, nor as the
    # description of the manifest the method is checked in.
    assert e.value.problems == ['method "undocumented": docstring is empty'], e.value.problems
    assert isinstance(e.value, sandwit.SandwitError)

    def documented(ctx) -> str:
        """Doc."""

    with pytest.raises(sandwit.MethodSpecError) as e:
        sandwit.method(documented, name="print")  # would replace the builtin
    assert "builtin" in str(e.value)
    with pytest.raises(sandwit.MethodSpecError) as e:
        sandwit.method(documented, provider="Not An Id")
    assert e.value.provider == "Not An Id" and len(e.value.problems) == 1, e.value.problems
    with pytest.raises(sandwit.MethodSpecError) as e:
        sandwit.HostMethod(documented, name="documented", kind="tool", docstring="Doc.",
                           description="", provider="")
    # The empty provider and the empty description given, each once.
    assert len(e.value.problems) == 2, e.value.problems


def test_a_host_method_made_from_json_schemas(host):
    seen = []
    method = sandwit.HostMethod(
        lambda ctx, n, tag=None: seen.append((n, tag)) or n * 2,
        name="double", kind="tool", docstring="Doubles n.\n\nArgs:\n    n: A count.",
        params=[{"name": "n", "schema": {"type": "integer", "minimum": 0}},
                {"name": "tag", "schema": {"type": "string"}, "required": False}])
    assert method.spec["description"] == "Doubles n."
    assert [p["required"] for p in method.spec["params"]] == [True, False]
    for bad, error in [(dict(params=[5]), TypeError), (dict(params=[{"schema": {}}]), TypeError),
                       (dict(params=[{"name": "n", "schema": {"x": float("nan")}}]), ValueError),
                       (dict(params=[{"name": "n", "schema": {"x": b"1"}}]), TypeError),
                       (dict(kind="robot"), ValueError)]:
        kwargs = dict(name="m", kind="tool", docstring="Doc.") | bad
        with pytest.raises(error):
            sandwit.HostMethod(lambda ctx: 1, **kwargs)
    with pytest.raises(TypeError, match="func must be callable"):
        sandwit.HostMethod(5, name="m", kind="tool", docstring="Doc.")
    with pytest.raises(sandwit.MethodSpecError, match="follows an optional one"):
        sandwit.HostMethod(lambda ctx, a, b: 1, name="m", kind="tool", docstring="Doc.",
                           params=[{"name": "a", "schema": {}, "required": False},
                                   {"name": "b", "schema": {}}])
    code = """
print(double(3), double(4, tag="x"))
try:
    double(-1)
except PluginArgumentError as e:
    print("refused", e.kind)
"""
    out = host.run(code, plugins=host.toolbox(methods=[method]))
    assert (out.status, out.stdout) == ("ok", "6 8\nrefused invalid_arguments\n"), out.error
    assert seen == [(3, None), (4, "x")]


# ---- in a set and in runs ---------------------------------------------------------


@pytest.fixture(scope="module")
def recorded():
    return []


@pytest.fixture(scope="module")
def methods(recorded):
    @sandwit.method(kind="behavior")
    def send_channel_message_py(ctx: sandwit.AgentCtx, text: str) -> str:
        """Send a message to the current channel.

        Args:
            text: The message.
        """
        recorded.append((ctx, text))
        return f"sent to {ctx.chat_key}: {text}"

    @sandwit.method
    def lookup(ctx, key: str, default: int | None = None) -> int | None:
        """Look a key up.

        Args:
            key: The key.
            default: What to give when it is missing.
        """
        return {"a": 1}.get(key, default)

    @sandwit.method(kind="agent")
    def ask_expert(ctx, question: str) -> str:
        """Ask a human expert; the script stops.

        Args:
            question: The question.
        """
        recorded.append((ctx, question))
        return f"The expert says: {question} is fine."

    @sandwit.method(kind="multimodal-agent")
    def draw(ctx, topic: str):
        """Draw the topic; the script stops.

        Args:
            topic: What to draw.
        """
        return [f"a drawing of {topic}",
                sandwit.ContentPart("image", mime_type="image/png", data=b"\x89PNG..."),
                {"type": "image_url", "url": "https://example.com/x.png"}]

    @sandwit.method
    def fail(ctx, what: str) -> str:
        """Fails.

        Args:
            what: What to raise.
        """
        raise ValueError(f"no such user: {what}")

    return [send_channel_message_py, lookup, ask_expert, draw, fail]


@pytest.fixture(scope="module")
def mixed(host, plugins, methods):
    return host.toolbox([plugins["calc"]], methods=methods)


def test_host_methods_are_listed_beside_plugins(mixed, methods, ctx):
    assert mixed.methods == ["calculate_sum", "get_current_time", "send_channel_message_py",
                             "lookup", "ask_expert", "draw", "fail"]
    assert len(mixed) == 7 and mixed.ids == ["calc"]
    assert repr(mixed) == ("Toolbox(['calc'], methods=['send_channel_message_py', 'lookup', "
                           "'ask_expert', 'draw', 'fail'])")
    prompt = mixed.prompt(ctx)
    assert "def calculate_sum(num1, num2):" in prompt
    assert ("def send_channel_message_py(text):  # behavior: returns a string, recorded as a "
            "system message; the code goes on (plugin `host`)") in prompt
    assert "def lookup(key, default=None):  # tool" in prompt
    assert "def ask_expert(question):  # agent: STOPS THE SCRIPT" in prompt
    assert "        default: What to give when it is missing." in prompt
    tools = {t["function"]["name"]: t["function"] for t in mixed.openai_tools(ctx)}
    assert tools["lookup"]["description"] == "Look a key up."
    assert tools["lookup"]["parameters"] == {
        "type": "object", "additionalProperties": False, "required": ["key"],
        "properties": {
            "key": {"type": "string", "description": "The key."},
            "default": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None,
                        "description": "What to give when it is missing."}}}
    # The same with no plugins at all, and as a Toolbox built directly.
    only = sandwit.Toolbox(methods=methods)
    assert only.ids == [] and "def lookup(" in only.prompt()


def test_a_set_calls_a_method_by_name_without_a_run(host, plugins, mixed, methods, ctx):
    """The tool call of an OpenAI-style loop: the model names a tool of
    `openai_tools`, the application calls it."""
    assert {t["function"]["name"] for t in mixed.openai_tools(ctx)} >= {"calculate_sum", "lookup"}
    sum_ = mixed.call("calculate_sum", {"num1": 40, "num2": 2}, ctx=ctx)
    assert (sum_.kind, sum_.value) == ("tool", 42)
    assert mixed.call("lookup", {"key": "a"}).value == 1
    said = mixed.call("send_channel_message_py", {"text": "hi"}, ctx=ctx)
    assert (said.kind, said.text) == ("behavior", "sent to chat-1: hi")
    # Checked as in a run, and failures raised as CallError.
    with pytest.raises(sandwit.CallError) as e:
        mixed.call("calculate_sum", {"num1": "x", "num2": 1})
    assert (e.value.plugin, e.value.kind) == ("calc", "invalid_arguments")
    with pytest.raises(sandwit.CallError) as e:
        mixed.call("fail", {"what": "bob"})
    assert e.value.kind == "failed" and "no such user: bob" in str(e.value)
    with pytest.raises(sandwit.CallError) as e:
        mixed.call("search_knowledge_base", {"query": "x"})
    assert (e.value.kind, str(e.value)) == ("unknown_method",
                                            "method `search_knowledge_base`: no such method")
    with pytest.raises(TypeError, match="plugin `calc`, method `calculate_sum`: parameter 'num1'"):
        mixed.call("calculate_sum", {"num1": {1}, "num2": 1})
    # Host methods alone: under the host that made the set; a set no host
    # made, with no plugin, has no limits or controls to call them under.
    only = host.toolbox(methods=methods)
    assert only.call("lookup", {"key": "b", "default": 5}).value == 5
    with pytest.raises(sandwit.SandwitError, match="no Host"):
        sandwit.Toolbox(methods=methods).call("lookup", {"key": "b"})

    async def main():
        return await mixed.call_async("calculate_sum", {"num1": 1, "num2": 2})

    assert asyncio.run(main()).value == 3


def test_a_run_calls_host_methods_with_checked_arguments(host, mixed, ctx, recorded):
    code = """
print(lookup("a"), lookup("b"), lookup("b", 7), lookup(key="b", default=8))
print(send_channel_message_py("deploy done"))
print(calculate_sum(lookup("a"), 2))
for bad in [lambda: lookup(5), lambda: lookup("a", "x")]:
    try:
        bad()
    except PluginArgumentError as e:
        print("refused:", e.method, e.kind)
try:
    lookup()
except TypeError as e:
    print("TypeError")
"""
    recorded.clear()
    out = host.run(code, ctx=ctx, plugins=mixed)
    assert out.status == "ok", out.error
    assert out.stdout == ("1 None 7 8\nsent to chat-1: deploy done\n3\n"
                          "refused: lookup invalid_arguments\nrefused: lookup invalid_arguments\n"
                          "TypeError\n")
    [(got_ctx, text)] = recorded
    assert got_ctx == ctx and text == "deploy done"
    calls = [e for e in out.events if e["type"] == "call"]
    assert [(c["plugin"], c["method"], c["ok"]) for c in calls] == [
        ("host", "lookup", True)] * 4 + [("host", "send_channel_message_py", True),
                                         ("host", "lookup", True), ("calc", "calculate_sum", True),
                                         ("host", "lookup", False), ("host", "lookup", False)]
    assert calls[4]["kind"] == "behavior" and calls[4]["fuel"] == 0
    message = next(e for e in out.events if e["type"] == "system_message")
    assert message == {"type": "system_message", "plugin": "host",
                       "method": "send_channel_message_py",
                       "text": "sent to chat-1: deploy done"}


def test_an_agent_host_method_hands_off(host, mixed, ctx, recorded):
    recorded.clear()
    out = host.run("print('asking')\nask_expert('is it safe?')\nprint('never')", ctx=ctx,
                   plugins=mixed)
    assert (out.status, out.stdout) == ("agent_handoff", "asking\n")
    h = out.handoff
    assert (h.plugin, h.method, h.result.kind) == ("host", "ask_expert", "agent")
    assert h.result.text == "The expert says: is it safe? is fine."
    assert len(recorded) == 1


def test_a_multimodal_host_method_hands_off_its_parts(host, mixed):
    out = host.run("draw('a fox')", plugins=mixed)
    assert out.status == "agent_handoff"
    parts = [p.to_dict() for p in out.handoff.result.parts]
    assert parts == [{"type": "text", "text": "a drawing of a fox"},
                     {"type": "image", "mime_type": "image/png", "data": b"\x89PNG..."},
                     {"type": "image_url", "url": "https://example.com/x.png"}]


def test_a_raising_method_is_an_error_in_the_run(host, mixed, caplog):
    code = """
try:
    fail("bob")
except PluginError as e:
    print(e.method, e.kind, e.message)
fail("alice")
"""
    with caplog.at_level(logging.DEBUG, logger="sandwit"):
        out = host.run(code, plugins=mixed)
    assert out.stdout == "fail failed raised ValueError: no such user: bob\n"
    assert (out.status, out.error.type) == ("error", "PluginError")
    assert out.error.message == "fail: raised ValueError: no such user: alice"
    # The traceback is the embedder's, on the `sandwit` logger.
    logged = [r for r in caplog.records if r.name == "sandwit"]
    assert len(logged) == 2 and logged[0].exc_info[0] is ValueError
    assert "host method fail raised" in logged[0].getMessage()
    # The host still serves.
    assert host.run("print(lookup('a'))", plugins=mixed).stdout == "1\n"


def test_a_wrong_return_type_is_an_error_for_each_kind(host):
    def returning(kind, value, name):
        def f(ctx):
            """Returns something."""
            return value
        return sandwit.method(f, kind=kind, name=name)

    cases = {
        "tool_object": ("tool", object(),
                        "returned a value that cannot be sent: the result: a object cannot be sent"),
        "tool_keys": ("tool", {1: 2}, "the result: dict keys must be str, not int"),
        "tool_big_int": ("tool", 2**70, "the result: an int must fit in 64 bits"),
        "behavior_int": ("behavior", 5, "returned int: a behavior method returns a str"),
        "agent_none": ("agent", None, "returned NoneType: an agent method returns a str"),
        "draw_int": ("multimodal-agent", 5, "returned int: a multimodal-agent method returns a list"),
        "draw_object": ("multimodal-agent", ["ok", object()],
                        "part 1: a object is not a part"),
        "draw_bad_dict": ("multimodal-agent", [{"type": "video", "url": "x"}],
                          "part 0: a part's type is text, image or image_url"),
        "draw_bad_mime": ("multimodal-agent",
                          [sandwit.ContentPart("image", mime_type="text/html", data=b"<p>")],
                          "text/html"),
    }
    methods = [returning(kind, value, name) for name, (kind, value, _) in cases.items()]
    toolbox = host.toolbox(methods=methods)
    for name, (_, _, message) in cases.items():
        out = host.run(f"{name}()", plugins=toolbox)
        assert (out.status, out.error.type, out.handoff) == ("error", "PluginError", None), name
        assert message in out.error.message, (name, out.error.message)
        assert out.error.message.startswith(f"{name}: ")
    assert host.run("print('still serving')", plugins=toolbox).stdout == "still serving\n"


def test_an_oversized_result_is_refused(cache_dir):
    @sandwit.method
    def big(ctx, n: int) -> str:
        """Returns n bytes.

        Args:
            n: How many.
        """
        return "x" * n

    host = sandwit.Host(cache_dir=cache_dir, prepared_interpreters=0,
                        call_limits=sandwit.CallLimits(max_value_bytes=1000))
    toolbox = host.toolbox(methods=[big])
    code = "print(len(big(500)))\ntry:\n    big(5000)\nexcept PluginError as e:\n    print(e.kind, e)"
    out = host.run(code, plugins=toolbox)
    assert out.status == "ok", out.error
    lines = out.stdout.splitlines()
    assert lines[0] == "500"
    assert lines[1].startswith("limit_exceeded big: value size limit exceeded: the result takes")
    assert lines[1].endswith("more than the limit of 1000 bytes")


def test_async_methods_run_on_the_runs_loop(host):
    seen = []

    @sandwit.method
    async def where(ctx, delay: float) -> str:
        """Says which loop and thread ran it.

        Args:
            delay: How long to sleep first.
        """
        await asyncio.sleep(delay)
        seen.append((asyncio.get_running_loop(), threading.current_thread().name))
        return ctx.chat_key

    toolbox = host.toolbox(methods=[where])

    async def main():
        out = await host.run_async("print(where(0.01))", ctx=sandwit.AgentCtx("async-chat"),
                                   plugins=toolbox)
        return out, asyncio.get_running_loop()

    out, main_loop = asyncio.run(main())
    assert (out.status, out.stdout) == ("ok", "async-chat\n")
    assert seen == [(main_loop, threading.main_thread().name)]
    # A synchronous run has no loop: sandwit's own runs it, in its thread.
    seen.clear()
    out = host.run("print(where(0.01))", plugins=toolbox)
    assert (out.status, out.stdout) == ("ok", "default\n")
    [(loop, thread)] = seen
    assert loop is not main_loop and thread == "sandwit-methods"


def test_a_method_past_the_runs_deadline(host):
    ended = threading.Event()
    cancelled = threading.Event()

    @sandwit.method
    async def hang(ctx) -> None:
        """Never answers."""
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    @sandwit.method
    def block(ctx) -> None:
        """Blocks its thread for a while."""
        time.sleep(1.5)
        ended.set()

    toolbox = host.toolbox(methods=[hang, block])
    short = sandwit.RunLimits(timeout_s=0.3)
    for code in ["hang()", "block()"]:
        start = time.monotonic()
        out = host.run(code, plugins=toolbox, limits=short)
        assert (out.status, out.limit.kind) == ("limit_exceeded", "time"), code
        assert time.monotonic() - start < 1.2, code
        method = code.removesuffix("()")
        assert out.limit.message == f"plugin `host`, method `{method}`: ran past its wall-clock deadline"
    # The coroutine was cancelled; the plain function ran to its end on its
    # thread (Python cannot stop a thread).
    assert cancelled.wait(5)
    assert not ended.is_set() and ended.wait(5)


def test_a_method_called_from_many_threads_at_once(host):
    lock = threading.Lock()
    active = max_active = 0

    @sandwit.method
    def square(ctx, n: int) -> int:
        """Squares n, slowly.

        Args:
            n: The number.
        """
        nonlocal active, max_active
        with lock:
            active += 1
            max_active = max(max_active, active)
        time.sleep(0.05)
        with lock:
            active -= 1
        return n * n

    toolbox = host.toolbox(methods=[square])

    def work(i):
        ctx = sandwit.AgentCtx(f"thread-{i}")
        return [host.run(f"print(square({i * 10 + j}))", ctx=ctx, plugins=toolbox).stdout
                for j in range(4)]

    start = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(8)))
    elapsed = time.monotonic() - start
    assert results == [[f"{(i * 10 + j) ** 2}\n" for j in range(4)] for i in range(8)]
    # 32 calls of 50 ms: they overlapped.
    assert max_active > 1 and elapsed < 1.5, (max_active, elapsed)


def test_async_methods_from_many_tasks_at_once(host):
    @sandwit.method
    async def slow_echo(ctx, text: str) -> str:
        """Echoes the text after 0.3 s.

        Args:
            text: The text.
        """
        await asyncio.sleep(0.3)
        return text

    toolbox = host.toolbox(methods=[slow_echo])

    async def main():
        start = time.monotonic()
        outs = await asyncio.gather(*[host.run_async(f"print(slow_echo('{i}'))", plugins=toolbox)
                                      for i in range(10)])
        return outs, time.monotonic() - start

    outs, elapsed = asyncio.run(main())
    assert [o.stdout for o in outs] == [f"{i}\n" for i in range(10)]
    assert elapsed < 2, elapsed


def test_name_clashes_are_toolbox_errors(host, plugins, methods):
    @sandwit.method
    def calculate_sum(ctx, num1: int, num2: int) -> int:
        """Another sum."""
        return 0

    with pytest.raises(sandwit.ToolboxError) as e:
        host.toolbox([plugins["calc"]], methods=[calculate_sum])
    assert (e.value.kind, e.value.method, e.value.first, e.value.second) == (
        "method", "calculate_sum", "calc", "host")
    lookup = next(m for m in methods if m.name == "lookup")
    with pytest.raises(sandwit.ToolboxError) as e:
        sandwit.Toolbox(methods=[lookup, lookup])
    assert (e.value.kind, e.value.method) == ("method", "lookup")

    @sandwit.method(provider="calc")
    def impostor(ctx) -> int:
        """Claims to be calc."""
        return 0

    with pytest.raises(sandwit.ToolboxError) as e:
        host.toolbox([plugins["calc"]], methods=[impostor])
    assert (e.value.kind, e.value.id, e.value.method) == ("provider", "calc", "impostor")
    with pytest.raises(TypeError, match="methods must be HostMethods"):
        host.toolbox(methods=[lambda ctx: 1])
    with pytest.raises(TypeError, match="methods must be a list"):
        host.toolbox(methods="lookup")
