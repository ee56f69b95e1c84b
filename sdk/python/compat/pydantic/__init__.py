"""The part of pydantic Nekro Agent plugins use in their config classes,
`Field(default=..., title=..., description=..., json_schema_extra=...)`,
and a `BaseModel` that keeps its fields: pydantic itself (its Rust core)
does not build for a WebAssembly plugin. No validation happens here: the
host checks config values against the schema the SDK derives from the
class's type hints. A project that ships its own `pydantic` module uses
that one (the project's modules come first)."""

from __future__ import annotations

from typing import Any, Callable, Optional, get_type_hints

_MISSING: Any = ...


class FieldInfo:
    """What `Field(...)` returns: a default and its description."""

    def __init__(
        self,
        default: Any = _MISSING,
        *,
        default_factory: Optional[Callable[[], Any]] = None,
        title: Optional[str] = None,
        description: Optional[str] = None,
        json_schema_extra: Optional[dict[str, Any]] = None,
        **_others: Any,
    ) -> None:
        self.default = None if default is _MISSING else default
        self.default_factory = default_factory
        self.title = title
        self.description = description
        self.json_schema_extra = dict(json_schema_extra or {})


def Field(default: Any = _MISSING, **kwargs: Any) -> Any:  # noqa: N802 (pydantic's name)
    return FieldInfo(default, **kwargs)


class BaseModel:
    """Fields from the class's type hints, set from keyword arguments or
    their defaults; `model_dump()` gives them as a dict."""

    def __init__(self, **values: Any) -> None:
        for name in get_type_hints(type(self)):
            if name.startswith("_"):
                continue
            if name in values:
                value = values[name]
            else:
                declared = getattr(type(self), name, None)
                if isinstance(declared, FieldInfo):
                    value = declared.default_factory() if declared.default_factory else declared.default
                else:
                    value = declared
            object.__setattr__(self, name, value)

    def model_dump(self) -> dict[str, Any]:
        return {n: getattr(self, n) for n in get_type_hints(type(self)) if not n.startswith("_")}


__all__ = ["BaseModel", "Field", "FieldInfo"]
