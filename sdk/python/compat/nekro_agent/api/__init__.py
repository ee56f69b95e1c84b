"""`from nekro_agent.api import core, i18n, message, plugin, schemas`."""

from . import core, i18n, message, plugin, schemas

__all__ = ["core", "i18n", "message", "plugin", "schemas"]
