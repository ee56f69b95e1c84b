"""`nekro_agent.api.core`: the logger. Nekro's own configuration
(`core.config`) and its vector store are Nekro's, not a plugin's: reading
them fails, naming what to use instead."""

from __future__ import annotations

from typing import Any

from sandwit_plugin import PluginError
from sandwit_plugin._plugin import _Logger

#: Lines to the host's log and the call's events.
logger = _Logger()


class _NotHere:
    def __init__(self, what: str, instead: str) -> None:
        self._what, self._instead = what, instead

    def __getattr__(self, name: str) -> Any:
        raise PluginError(f"{self._what} is Nekro Agent's own, not a sandwit plugin's: {self._instead}")


config = _NotHere("nekro_agent.api.core.config", "a plugin's settings are its config class (plugin.get_config())")


def get_qdrant_client() -> Any:
    raise PluginError("nekro_agent.api.core.get_qdrant_client: sandwit offers no vector store; use plugin.store")


def get_qdrant_config() -> Any:
    raise PluginError("nekro_agent.api.core.get_qdrant_config: sandwit offers no vector store; use plugin.store")


__all__ = ["config", "get_qdrant_client", "get_qdrant_config", "logger"]
