"""The Nekro Agent compatibility layer (sdk/python/compat): a plugin written
as Nekro's documentation shows (tests/nekro_style/plugin.py), unchanged, on
the SDK's fake host. One test per row of the README's compatibility table
that can be shown without a build; tests/cli/plugin_projects.rs builds the
same plugin with `sandwit plugin build` and calls it in a component."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

COMPAT = Path(__file__).resolve().parent.parent / "compat"
sys.path.insert(0, str(COMPAT))

from sandwit_plugin import AgentCtx, PluginError  # noqa: E402
from sandwit_plugin.testing import FakeHost  # noqa: E402


@pytest.fixture
def nekro():
    spec = importlib.util.spec_from_file_location("nekro_style_plugin", Path(__file__).parent / "nekro_style" / "plugin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_manifest_of_a_nekro_plugin(nekro):
    manifest = nekro.plugin.manifest()
    assert manifest["id"] == "nekro_notes" and nekro.plugin.key == "tests.nekro_notes"
    kinds = {m["name"]: m["kind"] for m in manifest["methods"]}
    assert kinds == {"set_note": "tool", "read_note": "behavior", "summarise": "agent", "show": "multimodal_agent"}
    schema = json.loads(manifest["config_schema"])
    note = schema["properties"]["MAX_NOTE_LENGTH"]
    assert note == {"type": "integer", "default": 72, "title": "单条笔记最大显示长度"}
    assert schema["properties"]["ALLOW_GROUPS"]["description"] == "如果为空，则允许所有群组"
    assert schema["properties"]["API_TOKEN"]["format"] == "password"
    assert "config" in manifest["capabilities"]


def test_config_read_at_module_level_gives_the_operators_values_in_a_call(nekro):
    assert nekro.config.MAX_NOTE_LENGTH == 72
    host = FakeHost(config={"MAX_NOTE_LENGTH": 4})
    assert host.call(nekro.plugin, "set_note", chat_key="chat-1", text="abcdefgh") == ("tool", 4)


def test_store_message_logger_and_init(nekro):
    host = FakeHost()
    host.call(nekro.plugin, "set_note", chat_key="chat-1", text="buy milk")
    assert nekro.STARTED == [True], "init runs once per instance, before its first call"
    assert host.call(nekro.plugin, "read_note", chat_key="chat-1") == ("behavior", "buy milk")
    assert host.sent == [("text", "note: buy milk")]
    assert ("info", "notes ready") in host.logs and ("info", "kept a note of 8 characters") in host.logs
    assert host.call(nekro.plugin, "summarise") == ("agent", "The chat's note: buy milk")
    kind, parts = host.call(nekro.plugin, "show")
    assert kind == "multimodal_agent" and parts[1] == ("image-url", "https://example.org/a.png")
    assert host.prompt_inject(nekro.plugin) == "The chat's note: buy milk"
    assert nekro.STARTED == [True]


def test_a_message_to_another_chat_is_refused(nekro):
    host = FakeHost()
    with pytest.raises(PluginError) as e:
        host.call(nekro.plugin, "read_note", chat_key="another-chat")
    assert e.value.kind == "denied" and "not the current chat" in str(e.value)


def test_collect_methods_chooses_by_context(nekro):
    host = FakeHost(config={"ALLOW_GROUPS": ["group_1"]}, ctx=AgentCtx(chat_key="c", channel_id="group_2"))
    assert host.available_methods(nekro.plugin) == ["read_note"]
    host = FakeHost(config={"ALLOW_GROUPS": ["group_1"]}, ctx=AgentCtx(chat_key="c", channel_id="group_1"))
    assert host.available_methods(nekro.plugin) == ["set_note", "read_note", "summarise", "show"]


def test_what_is_not_supported_fails_at_import_naming_it():
    from nekro_agent.api.plugin import NekroPlugin

    plugin = NekroPlugin(name="x", module_name="x", description="d", version="0", author="a", url="")
    for mount in ("mount_command", "mount_router", "mount_webhook_method", "mount_on_user_message"):
        with pytest.raises(NotImplementedError, match=f"NekroPlugin.{mount}"):
            getattr(plugin, mount)
    from nekro_agent.api import core

    with pytest.raises(PluginError, match="plugin.get_config"):
        core.config.SOME_SETTING
