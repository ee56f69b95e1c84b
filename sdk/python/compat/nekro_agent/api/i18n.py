"""`nekro_agent.api.i18n`: texts in several languages."""

from __future__ import annotations

import enum
from typing import Optional

I18nDict = dict[str, str]


class SupportedLang(str, enum.Enum):
    ZH_CN = "zh-CN"
    EN_US = "en-US"


def i18n_text(*, zh_CN: str, en_US: str) -> I18nDict:
    return {"zh-CN": zh_CN, "en-US": en_US}


def get_text(i18n_dict: Optional[I18nDict], default: str, lang: str = "en-US") -> str:
    return (i18n_dict or {}).get(str(getattr(lang, "value", lang)), default)


__all__ = ["I18nDict", "SupportedLang", "get_text", "i18n_text"]
