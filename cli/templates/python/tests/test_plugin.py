"""Tests of the plugin on a fake host: `.venv/bin/python -m pytest`."""

from sandwit_plugin.testing import FakeHost

from plugin import plugin


def test_greets_by_name():
    assert FakeHost().call(plugin, "greet", name="Ada") == ("tool", "Hello, Ada!")
