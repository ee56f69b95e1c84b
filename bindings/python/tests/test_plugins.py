"""The package's values, hosts, plugin loading and direct calls, and the
errors of each."""

import asyncio
import pathlib
import time

import pytest

import sandwit
from conftest import GUESTS, pin, wasm


# ---- the module and its values ---------------------------------------------------


def test_the_package_exports_its_api_and_carries_the_interpreter():
    for name in sandwit.__all__:
        assert hasattr(sandwit, name), name
    assert sandwit.__version__
    assert sandwit.EMBEDDED_PYTHON_SHA256 is not None and len(sandwit.EMBEDDED_PYTHON_SHA256) == 64
    assert issubclass(sandwit.LoadError, sandwit.SandwitError)
    assert issubclass(sandwit.CallError, sandwit.SandwitError)
    assert issubclass(sandwit.SandwitError, Exception)
    init = pathlib.Path(sandwit.__file__).parent
    assert (init / "py.typed").exists() and (init / "_sandwit.pyi").exists()


def test_agent_ctx_keeps_its_fields_and_compares_by_value():
    ctx = sandwit.AgentCtx("group_1", user_id="42", channel_id="c", channel_name="n",
                           channel_type="group", adapter_key="qq")
    assert (ctx.chat_key, ctx.user_id, ctx.channel_id, ctx.channel_name, ctx.channel_type,
            ctx.adapter_key) == ("group_1", "42", "c", "n", "group", "qq")
    assert sandwit.AgentCtx("a", "u") == sandwit.AgentCtx("a", user_id="u")
    assert sandwit.AgentCtx("a") != sandwit.AgentCtx("b")
    assert sandwit.AgentCtx("a").user_id is None
    assert repr(sandwit.AgentCtx("a", "u")) == "AgentCtx('a', user_id='u')"
    with pytest.raises(TypeError):
        sandwit.AgentCtx(1)
    with pytest.raises(TypeError):
        sandwit.AgentCtx()


def test_run_limits_have_the_librarys_defaults_and_check_their_values():
    d = sandwit.RunLimits()
    assert (d.timeout_s, d.memory_mib, d.fuel, d.max_calls) == (10.0, 256.0, None, 1000)
    assert (d.max_output_bytes, d.max_events, d.max_event_bytes) == (1 << 20, 10_000, 64 << 20)
    limits = sandwit.RunLimits(timeout_s=2.5, memory_mib=64, fuel=10**6, max_calls=3,
                               max_output_bytes=100, max_events=5, max_event_bytes=1000)
    assert (limits.timeout_s, limits.memory_mib, limits.fuel, limits.max_calls) == (2.5, 64.0, 10**6, 3)
    assert (limits.max_output_bytes, limits.max_events, limits.max_event_bytes) == (100, 5, 1000)
    assert sandwit.RunLimits(timeout_s=2) == sandwit.RunLimits(timeout_s=2.0)
    assert "timeout_s=2.5" in repr(limits)
    for bad in [dict(timeout_s=0), dict(timeout_s=-1), dict(timeout_s=float("nan")),
                dict(timeout_s=float("inf")), dict(memory_mib=0)]:
        with pytest.raises(ValueError):
            sandwit.RunLimits(**bad)
    with pytest.raises(OverflowError):
        sandwit.RunLimits(fuel=-1)
    with pytest.raises(TypeError):
        sandwit.RunLimits(timeout_s="10")
    with pytest.raises(TypeError):
        sandwit.RunLimits(10)
    with pytest.raises(TypeError):
        sandwit.RunLimits(timeouts=1)


def test_call_limits_have_the_librarys_defaults():
    d = sandwit.CallLimits()
    assert (d.timeout_s, d.memory_mib, d.fuel) == (10.0, 64.0, None)
    assert (d.table_elements, d.max_core_instances, d.max_value_depth) == (20_000, 64, 64)
    assert (d.max_value_bytes, d.max_value_nodes, d.max_event_bytes) == (16 << 20, 10**6, 16 << 20)
    limits = sandwit.CallLimits(timeout_s=1, memory_mib=32, fuel=5, table_elements=7,
                                max_core_instances=8, max_value_bytes=9, max_value_nodes=10,
                                max_value_depth=11, max_event_bytes=12)
    assert (limits.timeout_s, limits.memory_mib, limits.fuel, limits.table_elements) == (1.0, 32.0, 5, 7)
    assert (limits.max_core_instances, limits.max_value_bytes, limits.max_value_nodes,
            limits.max_value_depth, limits.max_event_bytes) == (8, 9, 10, 11, 12)
    with pytest.raises(ValueError):
        sandwit.CallLimits(timeout_s=0)


def test_helpers():
    assert sandwit.strip_code_fence("```python\nprint(1)\n```") == "print(1)\n"
    assert sandwit.strip_code_fence("print(1)") == "print(1)"
    assert sandwit.component_hash(b"") == (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")


# ---- hosts ---------------------------------------------------------------------------


def test_a_host_takes_its_settings(cache_dir, tmp_path):
    host = sandwit.Host(cache_dir=cache_dir, limits=sandwit.RunLimits(timeout_s=3),
                        call_limits=sandwit.CallLimits(fuel=123_456_789),
                        store=tmp_path / "store.db", prepared_interpreters=0, max_instances=8)
    assert pathlib.Path(host.cache_dir) == cache_dir
    assert host.limits == sandwit.RunLimits(timeout_s=3)
    assert host.call_limits.fuel == 123_456_789
    assert "Host(cache_dir=" in repr(host)
    calc = host.load_plugin(wasm("calc"))
    assert calc.call("calculate_sum", {"num1": 1, "num2": 2}).value == 3


def test_plugin_instances_are_made_ahead_unless_turned_off(cache_dir):
    hosts = [sandwit.Host(cache_dir=cache_dir, prepared_plugin_instances=count) for count in (None, 0)]
    calcs = [host.load_plugin(wasm("calc")) for host in hosts]
    for host, calc in zip(hosts, calcs):
        assert calc.prepared_instances == 0
        # A run names the plugins whose instances the host makes ahead.
        out = host.run("print(calculate_sum(1, 2))", plugins=host.toolbox([calc]))
        assert out.stdout == "3\n"
    # The default host's thread makes one (on an idle core: it may wait for
    # the other tests); the other's, as busy, makes none.
    deadline = time.monotonic() + 300
    while calcs[0].prepared_instances == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [calc.prepared_instances for calc in calcs] == [1, 0]


def test_a_host_refuses_bad_settings(tmp_path, cache_dir):
    with pytest.raises(TypeError):
        sandwit.Host(cache_dir=42)
    with pytest.raises(TypeError):
        sandwit.Host(limits=sandwit.CallLimits())
    with pytest.raises(TypeError):
        sandwit.Host(cache_dir)  # keyword-only
    with pytest.raises(sandwit.PolicyError) as e:
        sandwit.Host(cache_dir=cache_dir, policy=tmp_path / "missing.toml")
    assert e.value.path == str(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[plugins.calc]\ngrant = [\"telepathy\"]\n")
    with pytest.raises(sandwit.PolicyError) as e:
        sandwit.Host(cache_dir=cache_dir, policy=bad)
    assert "telepathy" in str(e.value) and e.value.path == str(bad)
    with pytest.raises(sandwit.SandwitError, match="max_instances"):
        sandwit.Host(cache_dir=cache_dir, max_instances=0)


def test_a_missing_interpreter_file_is_reported_when_the_host_is_made(cache_dir, tmp_path,
                                                                     monkeypatch):
    missing = tmp_path / "none.wasm"
    with pytest.raises(FileNotFoundError) as e:
        sandwit.Host(cache_dir=cache_dir, python=missing, prepared_interpreters=0)
    assert e.value.filename == str(missing)
    assert "Python interpreter" in str(e.value) and "python=" in str(e.value)
    assert "plugin" not in str(e.value)
    with pytest.raises(FileNotFoundError, match="Python interpreter"):
        sandwit.warmup(cache_dir=cache_dir, python=missing)
    with pytest.raises(IsADirectoryError, match="Python interpreter"):
        sandwit.Host(cache_dir=cache_dir, python=tmp_path)
    monkeypatch.setenv("SANDWIT_PYTHON", str(missing))
    with pytest.raises(FileNotFoundError, match=r"\$SANDWIT_PYTHON") as e:
        sandwit.Host(cache_dir=cache_dir, prepared_interpreters=0)
    assert e.value.filename == str(missing)


def test_an_interpreter_file_gone_before_its_first_run_is_named(cache_dir, tmp_path):
    python = tmp_path / "sandbox.wasm"
    python.write_bytes(b"")
    host = sandwit.Host(cache_dir=cache_dir, python=python, prepared_interpreters=0)
    python.unlink()
    with pytest.raises(FileNotFoundError, match="Python interpreter") as e:
        host.run("print(1)")
    assert e.value.filename == str(python)
    # The host still loads and calls plugins.
    assert host.load_plugin(wasm("calc")).call("calculate_sum", {"num1": 2, "num2": 2}).value == 4


def test_the_store_must_be_a_file_in_a_directory_that_exists(cache_dir, tmp_path):
    store = tmp_path / "missing" / "store.db"
    with pytest.raises(FileNotFoundError, match="does not exist") as e:
        sandwit.Host(cache_dir=cache_dir, store=store)
    assert e.value.filename == str(store.parent) and str(store) in str(e.value)
    assert not store.parent.exists()  # not made
    with pytest.raises(IsADirectoryError, match="SQLite file") as e:
        sandwit.Host(cache_dir=cache_dir, store=tmp_path)
    assert e.value.filename == str(tmp_path)
    # A missing file in a directory that exists is made.
    sandwit.Host(cache_dir=cache_dir, store=tmp_path / "store.db", prepared_interpreters=0)
    assert (tmp_path / "store.db").is_file()


# ---- loading -------------------------------------------------------------------------


def test_a_plugin_loads_from_a_path_or_bytes(host):
    for source in [wasm("calc"), str(wasm("calc")), wasm("calc").read_bytes(),
                   bytearray(wasm("calc").read_bytes()), memoryview(wasm("calc").read_bytes())]:
        calc = host.load_plugin(source)
        assert calc.id == "calc"
    assert calc.sha256 == sandwit.component_hash(wasm("calc").read_bytes())
    assert repr(calc) == "Plugin(id='calc', version='0.1.0')"
    manifest = calc.manifest
    assert manifest["id"] == "calc" and manifest["name"] == "Calculator"
    method = manifest["methods"][0]
    assert method["name"] == "calculate_sum" and method["kind"] == "tool"
    assert method["params"][0] == {"name": "num1", "required": True, "schema": {"type": "integer"}}
    assert "Args:" in method["docstring"]
    assert calc.grants == []
    assert "sandwit:plugin/types@0.1.0" in calc.imports


def test_grants_are_what_the_policy_gives(plugins):
    assert plugins["notes"].grants == ["store"]
    assert plugins["messenger"].grants == ["chat"]


def test_load_errors_list_every_problem(host, tmp_path):
    with pytest.raises(sandwit.LoadError) as e:
        host.load_plugin(b"not a component", name="junk.wasm")
    assert e.value.kind == "rejected" and e.value.plugin == "junk.wasm"
    assert e.value.problems and all(isinstance(p, str) for p in e.value.problems)
    assert "junk.wasm" in str(e.value)

    with pytest.raises(sandwit.LoadError) as e:
        host.load_plugin(wasm("bad_manifest"))
    assert e.value.kind == "rejected" and len(e.value.problems) > 1, e.value.problems

    with pytest.raises(sandwit.LoadError) as e:
        host.load_plugin(tmp_path / "missing.wasm")
    assert e.value.kind == "io" and e.value.problems

    with pytest.raises(sandwit.LoadError) as e:
        host.load_plugin(wasm("other-world"))
    assert e.value.kind == "rejected"

    # The policy pins `notes` to the real one: the impostor claiming its id is refused.
    with pytest.raises(sandwit.LoadError) as e:
        host.load_plugin(wasm("impostor"))
    assert e.value.kind == "unpinned" and e.value.plugin == "notes"
    assert e.value.digest == sandwit.component_hash(wasm("impostor").read_bytes())

    with pytest.raises(TypeError):
        host.load_plugin(42)
    # The host still serves.
    assert host.load_plugin(wasm("calc")).call("calculate_sum", {"num1": 1, "num2": 1}).value == 2


def test_a_config_error_hides_secret_values(cache_dir, tmp_path):
    policy = tmp_path / "policy.toml"
    policy.write_text('[plugins.services]\ngrant = ["config"]\n' + pin("services")
                      + 'config = { token = 42424242, colour = "green" }\n')
    host = sandwit.Host(cache_dir=cache_dir, policy=policy, prepared_interpreters=0)
    with pytest.raises(sandwit.LoadError) as e:
        host.load_plugin(wasm("services"))
    assert e.value.kind == "config" and e.value.plugin == "services"
    assert "42424242" not in str(e.value) and "42424242" not in repr(e.value.problems)


# ---- toolboxes -----------------------------------------------------------------------


def test_a_toolbox_lists_its_methods(host, plugins, toolbox):
    assert toolbox.ids == list(plugins)
    assert "calculate_sum" in toolbox.methods and "search_knowledge_base" in toolbox.methods
    assert len(toolbox) == len(toolbox.methods)
    assert repr(host.toolbox([plugins["calc"]])) == "Toolbox(['calc'])"
    assert len(sandwit.Toolbox([])) == 0


def test_a_plugins_lifecycle_hooks_apply_to_runs_calls_and_listings(host):
    # The `lifecycle` fixture injects a prompt naming the chat and offers
    # `whoami` only to a chat with a user: a run, a direct call and the
    # listing of a chat with none see no `whoami`, with the toolbox as given.
    plugins = host.toolbox([host.load_plugin(wasm("lifecycle"))])
    lobby = sandwit.AgentCtx("lobby")
    out = host.run("print(chat_name())\nwhoami()", ctx=lobby, plugins=plugins)
    assert out.stdout == "lobby\n"
    assert out.error is not None and out.error.type == "NameError", out
    with pytest.raises(sandwit.CallError) as e:
        plugins.call("whoami", ctx=lobby)
    assert e.value.kind == "unknown_method"
    listing = plugins.prompt(lobby)
    assert "[plugin `lifecycle`]\nThis is the chat `lobby`." in listing, listing
    assert "def chat_name(" in listing and "def whoami(" not in listing, listing
    names = [tool["function"]["name"] for tool in plugins.openai_tools(lobby)]
    assert names == ["chat_name"]
    ada = sandwit.AgentCtx("lobby", user_id="ada")
    assert host.run("print(whoami())", ctx=ada, plugins=plugins).stdout == "ada\n"
    assert "def whoami(" in plugins.prompt(ada)


def test_a_toolbox_refuses_clashes(cache_dir, plugins):
    bare = sandwit.Host(cache_dir=cache_dir, prepared_interpreters=0)
    impostor = bare.load_plugin(wasm("impostor"))  # id `notes`, a `calculate_sum`
    with pytest.raises(sandwit.ToolboxError) as e:
        bare.toolbox([plugins["calc"], impostor])
    assert (e.value.kind, e.value.method, e.value.first, e.value.second) == (
        "method", "calculate_sum", "calc", "notes")
    with pytest.raises(sandwit.ToolboxError) as e:
        bare.toolbox([plugins["notes"], impostor])
    assert (e.value.kind, e.value.id) == ("id", "notes")
    assert e.value.first == plugins["notes"].sha256
    with pytest.raises(TypeError):
        bare.toolbox([plugins["calc"], "calc.wasm"])
    with pytest.raises(TypeError):
        bare.toolbox("calc")
    with pytest.raises(TypeError):
        bare.toolbox(3)


# ---- direct calls ----------------------------------------------------------------------


def test_calls_return_typed_results(plugins, ctx):
    r = plugins["calc"].call("calculate_sum", {"num1": 40, "num2": 2}, ctx=ctx)
    assert (r.kind, r.value, r.text, r.parts) == ("tool", 42, None, None)
    assert r.to_dict() == {"kind": "tool", "value": 42}
    assert repr(r) == "MethodResult(kind='tool', value=42)"
    now = plugins["calc"].call("get_current_time").value
    assert isinstance(now["iso"], str) and isinstance(now["unix"], int)

    agent = plugins["knowledge"].call("search_knowledge_base", {"query": "sandwit"}, ctx=ctx)
    assert agent.kind == "agent" and isinstance(agent.text, str) and agent.value is None

    behavior = plugins["messenger"].call("send_channel_message", {"text": "hi"}, ctx=ctx)
    assert behavior.kind == "behavior" and behavior.text == "Message sent to channel #general: hi"

    image = plugins["imagegen"].call("generate_image_and_comment", {"topic": "cats"}, ctx=ctx)
    assert image.kind == "multimodal-agent"
    types = [p.type for p in image.parts]
    assert "text" in types and "image" in types
    png = next(p for p in image.parts if p.type == "image")
    assert png.mime_type == "image/png" and png.data.startswith(b"\x89PNG")
    assert image.to_dict()["parts"][types.index("image")]["data"] == png.data
    assert "bytes>" in repr(png)


def test_values_cross_both_ways(plugins):
    echo = plugins["echo"]
    value = {"none": None, "t": True, "f": False, "i": -(2**63), "x": 1.5, "s": "héllo",
             "b": b"\x00\xff", "list": [1, [2, [3]]], "d": {"k": "v"}}
    assert echo.call("echo", {"value": value}).value == value
    # Tuples, bytearrays, memoryviews and subclasses go in as their base types.
    import enum

    class Colour(enum.IntEnum):
        RED = 1

    sent = {"value": ((1, 2), bytearray(b"ab"), memoryview(b"cd"), Colour.RED, True)}
    assert echo.call("echo", sent).value == [[1, 2], b"ab", b"cd", 1, True]
    assert echo.call("nop").value is None
    assert echo.call("nop", None).value is None


def test_bad_arguments_are_python_exceptions_naming_the_place(plugins):
    echo = plugins["echo"]
    # Each names the plugin, the method and the parameter.
    with pytest.raises(TypeError, match=r"^plugin `echo`, method `echo`: parameter 'value'\[1\]"
                                        r"\['k'\]: a set cannot be sent"):
        echo.call("echo", {"value": [0, {"k": {1}}]})
    with pytest.raises(OverflowError, match="^plugin `echo`, method `echo`: parameter 'value'"):
        echo.call("echo", {"value": 2**64})
    with pytest.raises(TypeError, match="^plugin `echo`, method `echo`: parameter 'value': a "
                                        "object cannot be sent"):
        asyncio.run(echo.call_async("echo", {"value": object()}))
    with pytest.raises(ValueError, match="surrogate"):
        echo.call("echo", {"value": "\udc80"})
    deep = []
    for _ in range(70):
        deep = [deep]
    with pytest.raises(ValueError, match="nested deeper than 64"):
        echo.call("echo", {"value": deep})
    with pytest.raises(TypeError, match="keys must be str"):
        echo.call("echo", {"value": {1: 2}})
    with pytest.raises(TypeError, match="args must be a dict"):
        echo.call("echo", [1])
    with pytest.raises(TypeError, match="parameter names must be str"):
        echo.call("echo", {1: 2})
    with pytest.raises(TypeError):
        echo.call(42)
    with pytest.raises(TypeError):
        echo.call("echo", {}, ctx="chat-1")


def test_call_errors_carry_the_plugin_method_kind_and_message(plugins):
    calc, hostile = plugins["calc"], plugins["hostile"]
    with pytest.raises(sandwit.CallError) as e:
        calc.call("no_such_method")
    assert (e.value.plugin, e.value.method, e.value.kind, e.value.message) == (
        "calc", "no_such_method", "unknown_method", None)
    assert str(e.value) == "plugin `calc`, method `no_such_method`: no such method"

    with pytest.raises(sandwit.CallError) as e:
        calc.call("calculate_sum", {"num1": "one", "num2": 2})
    assert e.value.kind == "invalid_arguments" and "num1" in e.value.message

    with pytest.raises(sandwit.CallError) as e:
        calc.call("calculate_sum", {"num1": 1})
    assert e.value.kind == "invalid_arguments"

    with pytest.raises(sandwit.CallError) as e:
        calc.call("calculate_sum", {"num1": 2**62, "num2": 2**62})
    assert e.value.kind == "failed" and "overflows" in e.value.message

    with pytest.raises(sandwit.CallError) as e:
        hostile.call("trap")
    assert e.value.kind == "trapped" and e.value.plugin == "hostile"

    with pytest.raises(sandwit.CallError) as e:
        hostile.call("wrong_kind")
    assert e.value.kind == "bad_result"

    with pytest.raises(sandwit.CallError) as e:
        hostile.call("grow_memory")
    assert (e.value.kind, e.value.limit) == ("limit_exceeded", "memory")

    # A plugin that fails leaves the host serving.
    assert calc.call("calculate_sum", {"num1": 1, "num2": 2}).value == 3


def test_a_capability_not_granted_is_denied(cache_dir):
    bare = sandwit.Host(cache_dir=cache_dir, prepared_interpreters=0)
    messenger = bare.load_plugin(wasm("messenger"))
    assert messenger.grants == []
    with pytest.raises(sandwit.CallError) as e:
        messenger.call("send_channel_message", {"text": "hi"})
    assert e.value.kind == "denied" and "chat" in e.value.message


def test_a_call_past_its_fuel_or_time_ends_with_the_limit(cache_dir):
    host = sandwit.Host(cache_dir=cache_dir, prepared_interpreters=0,
                        call_limits=sandwit.CallLimits(fuel=50_000_000, timeout_s=1))
    hostile = host.load_plugin(wasm("hostile"))
    with pytest.raises(sandwit.CallError) as e:
        hostile.call("spin")
    assert (e.value.kind, e.value.limit) == ("limit_exceeded", "fuel")
    with pytest.raises(sandwit.CallError) as e:
        hostile.call("sleep")
    assert (e.value.kind, e.value.limit) == ("limit_exceeded", "time")
    assert host.load_plugin(wasm("calc")).call("calculate_sum", {"num1": 1, "num2": 2}).value == 3


def test_the_store_follows_the_context(plugins):
    notes = plugins["notes"]
    alice, bob = sandwit.AgentCtx("chat-a", user_id="alice"), sandwit.AgentCtx("chat-b", "bob")
    notes.call("remember", {"note": "alice's note"}, ctx=alice)
    assert notes.call("recall", ctx=alice).value == ["alice's note"]
    assert notes.call("recall", ctx=bob).value == []
    notes.call("forget_all", ctx=alice)


def test_prompt_is_the_clis_listing(toolbox, plugins, cache_dir):
    prompt = toolbox.prompt()
    assert prompt.startswith("Your Python code can call these functions.")
    assert "\ndef calculate_sum(num1, num2):  # tool: returns a value and the code goes on " \
           "(plugin `calc`)\n" in prompt
    assert "def search_knowledge_base(query, max_results=None):  # agent: STOPS THE SCRIPT" in prompt
    assert toolbox.prompt(sandwit.AgentCtx("x")) == prompt
    cli = GUESTS.parents[2] / "debug" / "sandwit"
    if not cli.exists():
        pytest.skip("no target/debug/sandwit to compare with")
    import subprocess

    args = [str(cli), "--cache-dir", str(cache_dir), "prompt"]
    for name in toolbox.ids:
        args += ["--plugin", str(wasm(name))]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    assert out.stdout.rstrip("\n") == prompt.rstrip("\n")


def test_openai_tools_describe_the_same_methods(toolbox):
    tools = toolbox.openai_tools()
    assert [t["function"]["name"] for t in tools] == toolbox.methods
    calc = tools[0]
    assert calc["type"] == "function"
    f = calc["function"]
    assert f["description"].startswith("Add two integers and return their sum.")
    assert "Args:" not in f["description"] and "Returns:" in f["description"]
    assert f["parameters"] == {
        "type": "object",
        "properties": {
            "num1": {"type": "integer", "description": "The first integer."},
            "num2": {"type": "integer", "description": "The second integer."},
        },
        "required": ["num1", "num2"],
        "additionalProperties": False,
    }
    search = next(t["function"] for t in tools if t["function"]["name"] == "search_knowledge_base")
    assert search["parameters"]["required"] == ["query"]
    assert set(search["parameters"]["properties"]) == {"query", "max_results"}
    import json

    json.dumps(tools)  # plain JSON
