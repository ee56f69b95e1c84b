"""`nekro_agent.api.plugin`: the plugin object, the method types, config
classes and the store."""

from __future__ import annotations

from typing import Any, Literal, Optional

from sandwit_plugin import ConfigBase, NekroPlugin, SandboxMethodType
from sandwit_plugin._plugin import PluginStore


class ExtraField:
    """A config field's UI metadata, passed as
    `json_schema_extra=ExtraField(...).model_dump()`. sandwit reads
    `is_secret` (the value is redacted from everything the host logs);
    the rest describes Nekro's web UI and is kept as given."""

    def __init__(
        self,
        *,
        is_hidden: bool = False,
        is_secret: bool = False,
        placeholder: str = "",
        is_textarea: bool = False,
        ref_model_groups: bool = False,
        model_type: Literal["chat", "embedding", "draw"] = "chat",
        required: bool = False,
        overridable: bool = False,
        sub_item_name: str = "项目",
        i18n_category: Optional[dict[str, str]] = None,
        i18n_title: Optional[dict[str, str]] = None,
        i18n_description: Optional[dict[str, str]] = None,
        **others: Any,
    ) -> None:
        self._fields = {
            "is_hidden": is_hidden,
            "is_secret": is_secret,
            "placeholder": placeholder,
            "is_textarea": is_textarea,
            "ref_model_groups": ref_model_groups,
            "model_type": model_type,
            "required": required,
            "overridable": overridable,
            "sub_item_name": sub_item_name,
            "i18n_category": i18n_category,
            "i18n_title": i18n_title,
            "i18n_description": i18n_description,
            **others,
        }

    def model_dump(self) -> dict[str, Any]:
        return dict(self._fields)


__all__ = ["ConfigBase", "ExtraField", "NekroPlugin", "PluginStore", "SandboxMethodType"]
