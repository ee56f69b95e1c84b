"""The glue between the SDK and the component's generated bindings (the
private `_sandwit_wit` module componentize-py writes): the host backend and
the export classes. Imported only in a build."""

from __future__ import annotations

from typing import Any, Optional

from _sandwit_wit import exports
from _sandwit_wit.imports import chat, config, log, outgoing_handler, store, streams
from _sandwit_wit.imports import sandwit_plugin_types as t
from _sandwit_wit.imports import wasi_http_types as h
from componentize_py_types import Err

from . import _host
from ._ctx import AgentCtx
from ._errors import report
from ._host import ServiceError
from ._http import RequestError, Url, timeout_nanos
from ._plugin import NekroPlugin, PluginError
from ._values import decode, encode

_SCOPES = {
    "chat": store.Scope.CHAT,
    "user": store.Scope.USER,
    "chat-user": store.Scope.CHAT_USER,
    "global": store.Scope.GLOBAL,
}
_LEVELS = {name: getattr(log.Level, name.upper()) for name in ("trace", "debug", "info", "warn", "error")}
_SERVICE_ERRORS = {
    t.ServiceError_Denied: "denied",
    t.ServiceError_Invalid: "invalid",
    t.ServiceError_LimitExceeded: "limit-exceeded",
    t.ServiceError_Unavailable: "unavailable",
}


def _service(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except Err as e:
        raise ServiceError(_SERVICE_ERRORS.get(type(e.value), "unavailable"), str(e.value.value)) from None


def _to_wit(value: Any) -> t.Value:
    nodes = []
    for kind, payload in encode(value):
        if kind == "null":
            nodes.append(t.Node_Null())
        elif kind == "bool":
            nodes.append(t.Node_Boolean(payload))
        elif kind == "int":
            nodes.append(t.Node_Integer(payload))
        elif kind == "float":
            nodes.append(t.Node_Float(payload))
        elif kind == "text":
            nodes.append(t.Node_Text(payload))
        elif kind == "bytes":
            nodes.append(t.Node_Bytes(payload))
        elif kind == "array":
            nodes.append(t.Node_Array(payload))
        else:
            nodes.append(t.Node_Object(payload))
    return t.Value(nodes)


_KINDS = {
    t.Node_Null: "null",
    t.Node_Boolean: "bool",
    t.Node_Integer: "int",
    t.Node_Float: "float",
    t.Node_Text: "text",
    t.Node_Bytes: "bytes",
    t.Node_Array: "array",
    t.Node_Object: "object",
}


def _from_wit(value: t.Value) -> Any:
    return decode([(_KINDS[type(n)], getattr(n, "value", None)) for n in value.nodes])


class _Host:
    """The host backend on the component's imports."""

    def store_get(self, scope: str, key: str) -> Optional[str | bytes]:
        entry = _service(store.get, _SCOPES[scope], key)
        return None if entry is None else entry.value

    def store_set(self, scope: str, key: str, value: str | bytes) -> None:
        entry = store.Entry_Text(value) if isinstance(value, str) else store.Entry_Bytes(value)
        _service(store.set, _SCOPES[scope], key, entry)

    def store_delete(self, scope: str, key: str) -> bool:
        return _service(store.delete, _SCOPES[scope], key)

    def store_keys(self, scope: str) -> list[str]:
        return _service(store.list_keys, _SCOPES[scope])

    def config_get(self, key: str) -> Any:
        value = _service(config.get, key)
        return None if value is None else _from_wit(value)

    def send_text(self, text: str) -> None:
        _service(chat.send_text, text)

    def send_image(self, mime_type: str, data: bytes) -> None:
        _service(chat.send_image, t.Media(mime_type, data))

    def push_system(self, message: str, trigger_agent: bool) -> None:
        _service(chat.push_system, message, trigger_agent)

    def log(self, level: str, message: str) -> None:
        log.log(_LEVELS[level], message)

    def http_request(
        self, method: str, url: Url, headers: list[tuple[str, bytes]], body: bytes, timeout: Optional[float]
    ) -> tuple[int, list[tuple[str, bytes]], bytes]:
        return _http_request(method, url, headers, body, timeout)


# -- outbound HTTP over wasi:http/outgoing-handler ---------------------------

#: The most bytes written to the request body per host call (what
#: `blocking-write-and-flush` accepts at most).
_WRITE_CHUNK = 4096
#: The most bytes read from the response body per host call.
_READ_CHUNK = 64 << 10

_METHODS = {
    "GET": h.Method_Get,
    "HEAD": h.Method_Head,
    "POST": h.Method_Post,
    "PUT": h.Method_Put,
    "DELETE": h.Method_Delete,
    "PATCH": h.Method_Patch,
    "OPTIONS": h.Method_Options,
}


def _describe(code: Any) -> str:
    if isinstance(code, h.ErrorCode_ConnectionTimeout):
        return "connecting timed out"
    if isinstance(code, (h.ErrorCode_ConnectionReadTimeout, h.ErrorCode_HttpResponseTimeout)):
        return "the response timed out"
    if isinstance(code, h.ErrorCode_ConnectionRefused):
        return "the connection was refused"
    if isinstance(code, h.ErrorCode_HttpResponseBodySize):
        return f"the response body is larger than the host's limit of {code.value} bytes"
    if isinstance(code, h.ErrorCode_DnsError):
        return f"the name did not resolve ({code.value.rcode or 'no answer'})"
    name = type(code).__name__.removeprefix("ErrorCode_")
    detail = getattr(code, "value", None)
    return name if detail is None else f"{name}: {detail}"


def _error(url: Url, code: Any) -> RequestError:
    """An error code as the SDK's error; a refusal is `denied`."""
    if isinstance(code, h.ErrorCode_HttpRequestDenied):
        return RequestError(
            "denied",
            f"http: the host did not grant a capability for {url.authority} "
            f"(request one like `http:{url.authority}`)",
        )
    if isinstance(code, h.ErrorCode_DestinationIpProhibited):
        return RequestError(
            "denied",
            f"http: {url.authority} resolves to an internal address (loopback, private or "
            "link-local), which the host reaches only when that address itself is granted",
        )
    if isinstance(code, h.ErrorCode_HttpResponseBodySize):
        return RequestError("limit-exceeded", f"http: {url.authority}: {_describe(code)}")
    if isinstance(code, (h.ErrorCode_HttpRequestUriInvalid, h.ErrorCode_HttpRequestMethodInvalid)):
        return RequestError("invalid", f"http: {url}: {_describe(code)}")
    return RequestError("unavailable", f"http: {url.authority} failed: {_describe(code)}")


def _refused(what: str) -> RequestError:
    return RequestError("invalid", f"http: the host refused the request's {what}")


def _http_request(
    method: str, url: Url, headers: list[tuple[str, bytes]], body: bytes, timeout: Optional[float]
) -> tuple[int, list[tuple[str, bytes]], bytes]:
    """Sends one request and reads the whole response, blocking on the
    host's pollables (a plugin has no event loop: the call waits, under the
    host's timeouts and the call's deadline)."""
    try:
        fields = h.Fields.from_list(headers)
    except Err as e:
        names = ", ".join(n for n, _ in headers)
        raise RequestError("invalid", f"http: the host refused a header ({type(e.value).__name__}) of {names}") from None
    request = h.OutgoingRequest(fields)
    try:
        request.set_method(_METHODS[method]())
    except Err:
        raise _refused("method") from None
    try:
        request.set_scheme(h.Scheme_Https() if url.scheme == "https" else h.Scheme_Http())
    except Err:
        raise _refused("scheme") from None
    try:
        request.set_authority(url.authority)
    except Err:
        raise _refused("host") from None
    try:
        request.set_path_with_query(url.path)
    except Err:
        raise _refused("path") from None
    options = None
    if timeout is not None:
        options = h.RequestOptions()
        nanos = timeout_nanos(timeout)
        for set_timeout in (
            options.set_connect_timeout,
            options.set_first_byte_timeout,
            options.set_between_bytes_timeout,
        ):
            try:
                set_timeout(nanos)
            except Err:
                pass  # the host's own timeout applies
    outgoing = request.body()
    try:
        future = outgoing_handler.handle(request, options)
    except Err as e:
        raise _error(url, e.value) from None
    with future:
        written: Optional[RequestError] = None
        try:
            with outgoing.write() as out:
                for at in range(0, len(body), _WRITE_CHUNK):
                    out.blocking_write_and_flush(body[at : at + _WRITE_CHUNK])
        except Err as e:
            written = RequestError("unavailable", f"http: writing the request body to {url.authority} failed: {e.value}")
            # Dropped unfinished (its stream, a child, was dropped above),
            # the host ends the request as incomplete: left open, a server
            # waiting for the declared content-length would hold the
            # response, and this call, until the timeout.
            outgoing.__exit__(None, None, None)
        else:
            try:
                h.OutgoingBody.finish(outgoing, None)
            except Err as e:
                # `finish` took the body: it is gone either way.
                written = RequestError(
                    "unavailable", f"http: finishing the request body to {url.authority} failed: {e.value}"
                )
        with future.subscribe() as ready:
            ready.block()
        outcome = future.get()
    if outcome is None or isinstance(outcome, Err):
        raise RequestError("unavailable", f"http: {url.authority} gave no response")
    if isinstance(outcome.value, Err):
        raise _error(url, outcome.value.value)
    if written is not None:
        raise written
    with outcome.value.value as response:
        status = response.status()
        with response.headers() as got:
            received = got.entries()
        content = _read_body(url, response.consume())
    return status, received, content


def _read_body(url: Url, incoming: Any) -> bytes:
    chunks = []
    with incoming:
        with incoming.stream() as stream:
            while True:
                try:
                    chunks.append(stream.blocking_read(_READ_CHUNK))
                except Err as e:
                    if isinstance(e.value, streams.StreamError_Closed):
                        break
                    code = h.http_error_code(e.value.value)
                    if code is None:
                        # wasmtime 48 hands a body's error over as text (its
                        # first line; the rest may be a host backtrace), the
                        # host's body cap included.
                        detail = "".join(e.value.value.to_debug_string().splitlines()[0:1])
                        kind = "limit-exceeded" if "body size exceeds limit" in detail else "unavailable"
                        raise RequestError(
                            kind, f"http: reading the response from {url.authority} failed: {detail}"
                        ) from None
                    if isinstance(code, h.ErrorCode_HttpResponseBodySize):
                        raise _error(url, code) from None
                    raise RequestError(
                        "unavailable", f"http: reading the response from {url.authority} failed: {_describe(code)}"
                    ) from None
    return b"".join(chunks)


def _ctx(ctx: t.AgentCtx) -> AgentCtx:
    return AgentCtx(
        chat_key=ctx.chat_key,
        user_id=ctx.user_id,
        channel_id=ctx.channel_id,
        channel_name=ctx.channel_name,
        channel_type=ctx.channel_type,
        adapter_key=ctx.adapter_key,
    )


_ERRORS = {
    "invalid-arguments": t.CallError_InvalidArguments,
    "unknown-method": t.CallError_UnknownMethod,
    "denied": t.CallError_Denied,
    "failed": t.CallError_Failed,
}


def _call_error(e: BaseException) -> Err:
    if isinstance(e, PluginError):
        return Err(_ERRORS.get(e.kind, t.CallError_Failed)(str(e)))
    if isinstance(e, ServiceError) and e.kind == "denied":
        return Err(t.CallError_Denied(e.message))
    if isinstance(e, TypeError) and "argument" in str(e):
        return Err(t.CallError_InvalidArguments(str(e)))
    return Err(t.CallError_Failed(report(e)))


_METHOD_KINDS = {
    "tool": t.MethodKind.TOOL,
    "agent": t.MethodKind.AGENT,
    "behavior": t.MethodKind.BEHAVIOR,
    "multimodal_agent": t.MethodKind.MULTIMODAL_AGENT,
}


def _method_result(kind: str, result: Any) -> t.MethodResult:
    if kind == "tool":
        return t.MethodResult_Tool(_to_wit(result))
    if kind == "agent":
        return t.MethodResult_Agent(result)
    if kind == "behavior":
        return t.MethodResult_Behavior(result)
    parts = []
    for part, payload in result:
        if part == "text":
            parts.append(t.ContentPart_Text(payload))
        elif part == "image":
            parts.append(t.ContentPart_Image(t.Media(payload[0], payload[1])))
        else:
            parts.append(t.ContentPart_ImageUrl(payload))
    return t.MethodResult_MultimodalAgent(parts)


def _reported(what: str, call: Any, *args: Any) -> Any:
    """`call(*args)`, for an export that answers no error (describe, the
    hooks): an exception is logged at error level, which the host names as
    the call's failure, then ends the call."""
    try:
        return call(*args)
    except BaseException as e:
        _host.backend.log("error", f"{what} raised {report(e)}")
        raise


def export_classes(plugin: NekroPlugin) -> tuple[type, type]:
    """The `Plugin` and `Lifecycle` export classes for `plugin`."""
    _host.backend = _Host()

    class Plugin(exports.Plugin):
        def describe(self) -> t.PluginManifest:
            m = _reported("describing the plugin", plugin.manifest)
            return t.PluginManifest(
                id=m["id"],
                name=m["name"],
                version=m["version"],
                author=m["author"],
                description=m["description"],
                methods=[
                    t.MethodSpec(
                        name=s["name"],
                        kind=_METHOD_KINDS[s["kind"]],
                        description=s["description"],
                        docstring=s["docstring"],
                        params=[t.Param(n, schema, r) for n, schema, r in s["params"]],
                        returns=s["returns"],
                    )
                    for s in m["methods"]
                ],
                config_schema=m["config_schema"],
                capabilities=m["capabilities"],
            )

        def invoke(self, ctx: t.AgentCtx, method: str, args: t.Value) -> t.MethodResult:
            try:
                kind, result = plugin.invoke(_ctx(ctx), method, _from_wit(args))
                return _method_result(kind, result)
            except Err:
                raise
            except Exception as e:
                raise _call_error(e) from None

    class Lifecycle(exports.Lifecycle):
        def prompt_inject(self, ctx: t.AgentCtx) -> Optional[str]:
            return _reported("the prompt-inject hook", plugin.prompt_inject, _ctx(ctx))

        def available_methods(self, ctx: t.AgentCtx) -> list[str]:
            return _reported("the collect-methods hook", plugin.available_methods, _ctx(ctx))

    return Plugin, Lifecycle
