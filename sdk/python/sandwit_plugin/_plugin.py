"""`NekroPlugin`: a plugin's manifest, methods, hooks, store and config."""

from __future__ import annotations

import enum
import inspect
import json
import re
import typing
from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import _host
from ._aio import Ready, run
from ._ctx import AgentCtx
from ._http import http
from ._schema import is_optional, parse_docstring, schema_of


class SandboxMethodType(str, enum.Enum):
    """What the agent framework does with a method's result."""

    #: Any value, handed back to the calling code, which goes on.
    TOOL = "tool"
    #: A string for the AI: the script stops and a new round starts.
    AGENT = "agent"
    #: A string handed back to the code and recorded as a system message.
    BEHAVIOR = "behavior"
    #: Text and images for the AI: the script stops and a new round starts.
    MULTIMODAL_AGENT = "multimodal_agent"


class PluginError(Exception):
    """A method's failure, for the AI: `kind` is `failed` (the default),
    `invalid-arguments` or `denied`."""

    def __init__(self, message: str, kind: str = "failed") -> None:
        super().__init__(message)
        self.kind = kind


_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLUGIN_ID = re.compile(r"^[a-z][a-z0-9_-]*$")


@dataclass
class Method:
    """One mounted sandbox method."""

    kind: SandboxMethodType
    name: str
    description: str
    func: Callable[..., Any]
    docstring: str
    #: (name, JSON Schema, required) per parameter after the context.
    params: list[tuple[str, dict[str, Any], bool]]
    returns: Optional[dict[str, Any]]


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func)
    except Exception:
        return dict(getattr(func, "__annotations__", {}))


def _method(kind: SandboxMethodType, name: str, description: str, func: Callable[..., Any]) -> Method:
    if not _IDENTIFIER.match(func.__name__) or func.__name__.startswith("sandwit_"):
        raise ValueError(f"method `{func.__name__}`: not a Python identifier the AI may call")
    doc = inspect.cleandoc(func.__doc__ or "")
    summary, arg_docs = parse_docstring(doc)
    hints = _hints(func)
    parameters = list(inspect.signature(func).parameters.values())
    if not parameters or parameters[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    ):
        raise ValueError(f"method `{func.__name__}`: the first parameter must be the context (`_ctx: AgentCtx`)")
    params = []
    for p in parameters[1:]:
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ValueError(f"method `{func.__name__}`: *args and **kwargs cannot be described to the AI")
        hint = hints.get(p.name, inspect.Parameter.empty)
        schema = schema_of(hint)
        if p.name in arg_docs:
            schema["description"] = arg_docs[p.name]
        required = p.default is inspect.Parameter.empty and not is_optional(hint)
        if p.default is not inspect.Parameter.empty and p.default is not None:
            try:
                json.dumps(p.default)
                schema["default"] = p.default
            except TypeError:
                pass
        params.append((p.name, schema, required))
    returns = None
    if kind is SandboxMethodType.TOOL and "return" in hints:
        returns = schema_of(hints["return"]) or None
    return Method(
        kind=kind,
        name=func.__name__,
        description=description or summary or name,
        func=func,
        docstring=doc or description or name,
        params=params,
        returns=returns,
    )


def call(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Calls `func`, running it to the end if it is a coroutine function."""
    result = func(*args, **kwargs)
    if inspect.iscoroutine(result):
        return run(result)
    return result


class PluginStore:
    """Nekro's `plugin.store`: text values by key, scoped by the host.

    `chat_key` and `user_key` choose the scope: the current chat, the current
    user, both, or (neither) the whole plugin. They must be the current call's
    chat key and user id: a plugin reaches only its own data for the chat and
    user it is called for. Needs the `store` capability.
    """

    def __init__(self) -> None:
        self._ctx: Optional[AgentCtx] = None

    def _scope(self, chat_key: str, user_key: str) -> str:
        ctx = self._ctx
        if chat_key and (ctx is None or chat_key != ctx.chat_key):
            raise PluginError("store: chat_key is not the current chat's; a plugin reaches only the chat it is called for", "denied")
        if user_key and (ctx is None or user_key != ctx.user_id):
            raise PluginError("store: user_key is not the current user's; a plugin reaches only the user it is called for", "denied")
        if chat_key and user_key:
            return "chat-user"
        if chat_key:
            return "chat"
        if user_key:
            return "user"
        return "global"

    def get(self, chat_key: str = "", user_key: str = "", store_key: str = "") -> Ready[Optional[str]]:
        """The text under `store_key`, or None."""

        def get() -> Optional[str]:
            value = _host.backend.store_get(self._scope(chat_key, user_key), store_key)
            if isinstance(value, bytes):
                return value.decode("utf-8", "replace")
            return value

        return Ready.of(get)

    def set(self, chat_key: str = "", user_key: str = "", store_key: str = "", value: str = "") -> Ready[int]:
        """Stores `value` (text) under `store_key`; returns 0 as Nekro does."""

        def set_() -> int:
            _host.backend.store_set(self._scope(chat_key, user_key), store_key, str(value))
            return 0

        return Ready.of(set_)

    def delete(self, chat_key: str = "", user_key: str = "", store_key: str = "") -> Ready[bool]:
        """Removes `store_key`; returns whether it was there."""
        return Ready.of(lambda: _host.backend.store_delete(self._scope(chat_key, user_key), store_key))

    def keys(self, chat_key: str = "", user_key: str = "") -> Ready[list[str]]:
        """The keys of the scope, sorted."""
        return Ready.of(lambda: _host.backend.store_keys(self._scope(chat_key, user_key)))


class ConfigBase:
    """A plugin's configuration: subclass it with typed fields and defaults,
    mount it with `@plugin.mount_config()`, read it with
    `plugin.get_config()`. The operator sets the values in the policy; a
    field whose name contains `key`, `token`, `secret` or `password` is a
    secret (`format: password`), redacted from everything the host logs.
    """


_SECRET = re.compile(r"key|token|secret|password", re.I)


def _is_field(value: Any) -> bool:
    """Whether `value` is a pydantic-style `Field(...)`."""
    return hasattr(value, "json_schema_extra") and hasattr(value, "default")


def field_default(value: Any) -> Any:
    """A config field's default: the value itself, or a pydantic-style
    `Field(default=...)`'s (`default_factory` called)."""
    if _is_field(value):
        factory = getattr(value, "default_factory", None)
        return factory() if factory is not None else value.default
    return value


def config_schema(cls: type) -> dict[str, Any]:
    """The JSON Schema of a config class: one property per typed field, with
    a `Field`'s title and description; a secret (`ExtraField(is_secret=True)`
    or a name like a key, token, secret or password) is `format: password`."""
    properties = {}
    for name, hint in _hints(cls).items():
        if name.startswith("_"):
            continue
        schema = schema_of(hint)
        declared = getattr(cls, name, None)
        default = field_default(declared)
        if default is not None:
            schema["default"] = default
        extra = {}
        if _is_field(declared):
            extra = declared.json_schema_extra or {}
            for key in ("title", "description"):
                if getattr(declared, key, None):
                    schema[key] = str(getattr(declared, key))
        if _SECRET.search(name) or extra.get("is_secret"):
            schema["format"] = "password"
        properties[name] = schema
    return {"type": "object", "properties": properties, "additionalProperties": False}


class _Config:
    """A config class's values, read when an attribute is: the operator's
    value during a call, else (none set) the default
    (so `config =
    plugin.get_config(Cls)` works at module level, as in Nekro, where the
    module is imported while the component is built)."""

    def __init__(self, cls: type) -> None:
        object.__setattr__(self, "_cls", cls)
        object.__setattr__(self, "_names", set(config_schema(cls)["properties"]))

    def __getattr__(self, name: str) -> Any:
        cls = object.__getattribute__(self, "_cls")
        if name not in object.__getattribute__(self, "_names"):
            return getattr(cls, name)
        default = field_default(getattr(cls, name, None))
        if isinstance(_host.backend, _host.Unbound):
            return default
        try:
            value = _host.backend.config_get(name)
        except _host.ServiceError as e:
            if e.kind != "unavailable":
                raise
            # The operator set no configuration: the class's defaults are
            # the plugin's. (Not granted is an error the author or operator
            # should see.)
            value = None
        return default if value is None else value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"the config is the operator's: `{name}` is set in the host's policy")

    def __repr__(self) -> str:
        return f"<{object.__getattribute__(self, '_cls').__name__} config>"


class _Logger:
    """`plugin.logger`: lines to the host's log and the call's events, with
    loguru's method names as Nekro's logger has them."""

    def _log(self, level: str, message: Any, *args: Any) -> None:
        text = str(message)
        if args:
            try:
                text = text.format(*args)
            except (IndexError, KeyError, ValueError):
                text = " ".join([text, *map(str, args)])
        _host.backend.log(level, text)

    def trace(self, message: Any, *args: Any) -> None:
        self._log("trace", message, *args)

    def debug(self, message: Any, *args: Any) -> None:
        self._log("debug", message, *args)

    def info(self, message: Any, *args: Any) -> None:
        self._log("info", message, *args)

    def success(self, message: Any, *args: Any) -> None:
        self._log("info", message, *args)

    def warning(self, message: Any, *args: Any) -> None:
        self._log("warn", message, *args)

    def error(self, message: Any, *args: Any) -> None:
        self._log("error", message, *args)

    def exception(self, message: Any, *args: Any) -> None:
        self._log("error", message, *args)

    def critical(self, message: Any, *args: Any) -> None:
        self._log("error", message, *args)


#: Nekro's hooks and mounts with no counterpart here: mounting one fails the
#: build (the module is imported then), naming it and why.
_UNSUPPORTED = {
    "mount_command": "chat commands are the agent framework's, not a sandboxed plugin's",
    "mount_command_group": "chat commands are the agent framework's, not a sandboxed plugin's",
    "mount_router": "a plugin serves no HTTP routes (its instance lives for one call or run)",
    "mount_webhook_method": "a plugin receives no webhooks (its instance lives for one call or run)",
    "mount_async_task": "a plugin runs no background tasks (its instance lives for one call or run)",
    "mount_on_user_message": "message hooks are the agent framework's; a plugin sees calls only",
    "mount_on_system_message": "message hooks are the agent framework's; a plugin sees calls only",
    "mount_on_channel_reset": "channel hooks are the agent framework's; a plugin sees calls only",
}


class NekroPlugin:
    """A sandwit plugin with Nekro Agent's plugin API.

    `module_name` is the plugin's id; `name`, `description`, `version`,
    `author` and `url` describe it. Mount methods with
    `@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name=..., description=...)`.
    """

    def __init__(
        self,
        name: str,
        module_name: str,
        description: str,
        version: str,
        author: str,
        url: str = "",
        capabilities: Optional[list[str]] = None,
        support_adapter: Optional[list[str]] = None,
        is_builtin: bool = False,
        is_package: bool = False,
        i18n_name: Optional[dict[str, str]] = None,
        i18n_description: Optional[dict[str, str]] = None,
        allow_sleep: Optional[bool] = None,
        sleep_brief: str = "",
        webui_path: Optional[str] = None,
    ) -> None:
        # Nekro's arguments after `url` describe the plugin to Nekro's own
        # UI and scheduler; they are kept as given and change nothing here.
        if not _PLUGIN_ID.match(module_name):
            raise ValueError(
                f"module_name {module_name!r}: lowercase letters, digits, `-` and `_`, starting with a letter"
            )
        self.name = name
        self.module_name = module_name
        self.description = description
        self.version = version
        self.author = author
        self.url = url
        self.methods: list[Method] = []
        self.store = PluginStore()
        #: Outbound HTTP, httpx-style (capability `http:<host>[:<port>]`).
        self.http = http
        self._capabilities = list(capabilities or [])
        self._config_cls: Optional[type] = None
        self._prompt_inject: Optional[Callable[..., Any]] = None
        self._collect_methods: Optional[Callable[..., Any]] = None
        self._init: Optional[Callable[..., Any]] = None
        self._initialised = False
        self.support_adapter = list(support_adapter or [])
        self.i18n_name = i18n_name
        self.i18n_description = i18n_description
        self.sleep_brief = sleep_brief
        #: Log lines to the host's log and the call's events.
        self.logger = _Logger()

    def __getattr__(self, name: str) -> Any:
        if name in _UNSUPPORTED:
            raise NotImplementedError(f"sandwit does not support NekroPlugin.{name}: {_UNSUPPORTED[name]}")
        raise AttributeError(f"'NekroPlugin' object has no attribute '{name}'")

    @property
    def key(self) -> str:
        """Nekro's plugin key, `author.module_name`."""
        return f"{self.author}.{self.module_name}"

    # -- mounting -----------------------------------------------------------

    def mount_sandbox_method(
        self, method_type: SandboxMethodType, name: str, description: str = ""
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Mounts a function as a method the AI calls by the function's name;
        `name` is its display name. The function takes the context first."""

        def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
            method = _method(SandboxMethodType(method_type), name, description, func)
            if any(m.name == method.name for m in self.methods):
                raise ValueError(f"method `{method.name}` is mounted twice")
            self.methods.append(method)
            return func

        return decorator

    def mount_prompt_inject_method(
        self, name: str, description: str = ""
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Mounts `func(_ctx) -> str`: text added to the method listing an LLM
        is given for the chat (empty adds nothing)."""

        def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
            self._prompt_inject = func
            return func

        return decorator

    def mount_collect_methods(self) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Mounts `func(_ctx) -> list` of the methods (functions or names)
        the chat sees, as Nekro calls it; without it, all. (The SDK's
        earlier `func(plugin, _ctx)` is still called so.)"""

        def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
            self._collect_methods = func
            return func

        return decorator

    def mount_init_method(self) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Mounts `func()`, run once per plugin instance before its first
        call (an instance lives for one call, or the calls of one Python
        run), with no chat: store calls scoped to a chat or user fail."""

        def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
            self._init = func
            return func

        return decorator

    def mount_cleanup_method(self) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Accepts Nekro's cleanup hook, which never runs here: an instance
        is discarded whole when its call or run ends, and nothing it made
        outlives it (keep what must last in the store)."""

        def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
            return func

        return decorator

    def ensure_initialised(self) -> None:
        """Runs the init hook if this instance has not yet."""
        if self._init is not None and not self._initialised:
            self._initialised = True
            call(self._init)

    def mount_config(self) -> Callable[[type], type]:
        """Mounts the config class (a `ConfigBase` with typed fields and
        defaults); the plugin then asks for the `config` capability."""

        def decorator(cls: type) -> type:
            self._config_cls = cls
            return cls

        return decorator

    def get_config(self, cls: Optional[type] = None) -> Any:
        """An instance of the config class with the operator's values over
        its defaults."""
        cls = cls or self._config_cls
        if cls is None:
            raise RuntimeError("no config class is mounted (@plugin.mount_config())")
        return _Config(cls)

    # -- what the host asks -------------------------------------------------

    @property
    def capabilities(self) -> list[str]:
        """The capabilities the plugin asks for: `store` and `chat` always
        (the host grants a subset), `config` with a config class, and any
        given (e.g. `http:api.example.com`)."""
        caps = ["store", "chat"]
        if self._config_cls is not None:
            caps.append("config")
        return caps + [c for c in self._capabilities if c not in caps]

    def manifest(self) -> dict[str, Any]:
        """The manifest, with schemas as JSON text."""
        return {
            "id": self.module_name,
            "name": self.name,
            "version": self.version,
            "author": self.author,
            "description": self.description,
            "methods": [
                {
                    "name": m.name,
                    "kind": m.kind.value,
                    "description": m.description,
                    "docstring": m.docstring,
                    "params": [(n, json.dumps(s), r) for n, s, r in m.params],
                    "returns": json.dumps(m.returns) if m.returns else None,
                }
                for m in self.methods
            ],
            "config_schema": json.dumps(config_schema(self._config_cls)) if self._config_cls else None,
            "capabilities": self.capabilities,
        }

    def invoke(self, ctx: AgentCtx, method: str, args: dict[str, Any]) -> tuple[str, Any]:
        """Calls `method` with `args` in `ctx`: (kind, result) with a tool's
        value, an agent's or behavior's string, or a multimodal agent's list
        of ("text", str) / ("image", (mime, bytes)) / ("image-url", str)."""
        found = next((m for m in self.methods if m.name == method), None)
        if found is None:
            raise PluginError(method, "unknown-method")
        self.ensure_initialised()
        self.store._ctx = ctx
        try:
            result = call(found.func, ctx, **args)
        finally:
            self.store._ctx = None
        return found.kind.value, _result(found, result)

    def prompt_inject(self, ctx: AgentCtx) -> Optional[str]:
        """The mounted prompt-inject method's text, if any."""
        if self._prompt_inject is None:
            return None
        self.ensure_initialised()
        self.store._ctx = ctx
        try:
            text = call(self._prompt_inject, ctx)
        finally:
            self.store._ctx = None
        return str(text) if text else None

    def available_methods(self, ctx: AgentCtx) -> list[str]:
        """The names of the methods the chat sees."""
        if self._collect_methods is None:
            return [m.name for m in self.methods]
        self.ensure_initialised()
        self.store._ctx = ctx
        try:
            takes_plugin = len(inspect.signature(self._collect_methods).parameters) >= 2
            args = (self, ctx) if takes_plugin else (ctx,)
            chosen = call(self._collect_methods, *args)
        finally:
            self.store._ctx = None
        names = [c if isinstance(c, str) else getattr(c, "__name__", "") for c in chosen]
        return [m.name for m in self.methods if m.name in names]


#: sandwit's name for the same class.
Plugin = NekroPlugin


class Image:
    """An image for a multimodal result: its bytes and MIME type."""

    def __init__(self, data: bytes, mime_type: str = "image/png") -> None:
        self.data = bytes(data)
        self.mime_type = mime_type


def _result(method: Method, result: Any) -> Any:
    kind = method.kind
    if kind is SandboxMethodType.TOOL:
        return result
    if kind in (SandboxMethodType.AGENT, SandboxMethodType.BEHAVIOR):
        if not isinstance(result, str):
            raise PluginError(f"method `{method.name}` is an {kind.value} method and returned a {type(result).__name__}, not a str")
        return result
    return _parts(method, result)


def _parts(method: Method, result: Any) -> list[tuple[str, Any]]:
    """A multimodal result as parts: a str, an Image, or a list of them and of
    OpenAI-style content dicts (`{"type": "text", "text": ...}`,
    `{"type": "image_url", "image_url": {"url": ...}}`) as Nekro returns."""
    items = result if isinstance(result, list) else [result]
    parts: list[tuple[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            parts.append(("text", item))
        elif isinstance(item, Image):
            parts.append(("image", (item.mime_type, item.data)))
        elif isinstance(item, dict) and item.get("type") == "text":
            parts.append(("text", str(item.get("text", ""))))
        elif isinstance(item, dict) and item.get("type") == "image_url":
            url = item.get("image_url")
            parts.append(("image-url", str(url.get("url") if isinstance(url, dict) else url)))
        else:
            raise PluginError(f"method `{method.name}` returned a {type(item).__name__} part, not text or an image")
    return parts
