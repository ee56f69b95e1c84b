"""An HTTP client for plugins, shaped like httpx's: `await
plugin.http.get(url, headers=..., timeout=...)` (or `_ctx.http`), or
`.result()` from a plain function, gives a `Response` with `status`,
`headers`, `content`, `text` and `json()`.

Requests go through the host's `wasi:http/outgoing-handler`: only to the
hosts the operator granted the plugin (`http:<host>[:<port>]`), with a
timeout that never passes the call's deadline and a response body capped by
the host. A request the host refuses raises `RequestError` with `kind ==
"denied"`, which fails the method as denied unless the plugin catches it.
"""

from __future__ import annotations

import json as _json
import math
from typing import Any, Iterator, Mapping, Optional, Union
from urllib.parse import urlencode

from . import _host
from ._aio import Ready

# The URL a request goes to and the errors of one that gets no response are
# the host's (`_host`, whose backend takes and raises them); they are the
# client's too.
from ._host import HTTPError as HTTPError
from ._host import RequestError as RequestError
from ._host import Url as Url

#: The longest timeout the host's request options carry: a u64 of
#: nanoseconds (about 584 years). A longer timeout is sent as this; the host
#: bounds it by its own timeout and the call's deadline anyway.
MAX_TIMEOUT_NANOS = 2**64 - 1

#: The methods a request may use.
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")

HeaderTypes = Union[Mapping[str, str], list[tuple[str, str]], None]


class HTTPStatusError(HTTPError):
    """Raised by `Response.raise_for_status()` for a 4xx or 5xx status."""

    def __init__(self, message: str, response: "Response") -> None:
        super().__init__(message)
        self.response = response


class Headers:
    """Response headers: names case-insensitive, values text (repeated
    headers joined with `, ` by `[]` and `get`, apart by `get_list`)."""

    def __init__(self, raw: list[tuple[str, bytes]]) -> None:
        #: (lowercase name, value) in the order received.
        self.raw = [(name.lower(), value.decode("latin-1")) for name, value in raw]

    def get_list(self, name: str) -> list[str]:
        """Every value of `name`."""
        name = name.lower()
        return [v for k, v in self.raw if k == name]

    def get(self, name: str, default: Optional[str] = None) -> Optional[str]:
        """The values of `name` joined with `, `, or `default`."""
        values = self.get_list(name)
        return ", ".join(values) if values else default

    def __getitem__(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and bool(self.get_list(name))

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(k for k, _ in self.raw))

    def __len__(self) -> int:
        return len(dict.fromkeys(k for k, _ in self.raw))

    def keys(self) -> list[str]:
        return list(self)

    def items(self) -> list[tuple[str, str]]:
        return [(k, self[k]) for k in self]

    def __repr__(self) -> str:
        return f"Headers({self.items()!r})"


class Response:
    """An HTTP response with its whole body."""

    def __init__(self, method: str, url: str, status: int, headers: list[tuple[str, bytes]], content: bytes) -> None:
        #: The request's method and URL.
        self.method = method
        self.url = url
        #: The status code (also `status_code`, as httpx names it).
        self.status = status
        self.headers = Headers(headers)
        #: The body's bytes.
        self.content = content

    @property
    def status_code(self) -> int:
        return self.status

    @property
    def is_success(self) -> bool:
        return 200 <= self.status < 300

    @property
    def encoding(self) -> str:
        """The charset of `content-type`, or utf-8."""
        for part in (self.headers.get("content-type") or "").split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                return value.strip('"')
        return "utf-8"

    @property
    def text(self) -> str:
        """The body decoded (undecodable bytes replaced)."""
        try:
            return self.content.decode(self.encoding, errors="replace")
        except LookupError:
            return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return _json.loads(self.content)

    def raise_for_status(self) -> "Response":
        """This response if its status is below 400, else `HTTPStatusError`."""
        if self.status >= 400:
            raise HTTPStatusError(f"{self.method} {self.url} answered {self.status}", self)
        return self

    def __repr__(self) -> str:
        return f"<Response [{self.status}]>"


def _headers(headers: HeaderTypes) -> list[tuple[str, bytes]]:
    items = headers.items() if isinstance(headers, Mapping) else (headers or [])
    out = []
    for name, value in items:
        if not isinstance(name, str) or not isinstance(value, (str, bytes)):
            raise RequestError("invalid", f"http: the header {name!r} must be a str with a str value")
        out.append((name.lower(), value.encode() if isinstance(value, str) else value))
    return out


def _body(
    headers: list[tuple[str, bytes]], content: Any, data: Any, json: Any
) -> tuple[list[tuple[str, bytes]], bytes]:
    given = [x is not None for x in (content, data, json)]
    if sum(given) > 1:
        raise RequestError("invalid", "http: give one of content=, data= and json=")
    names = {n for n, _ in headers}

    def typed(mime: str) -> list[tuple[str, bytes]]:
        return headers if "content-type" in names else headers + [("content-type", mime.encode())]

    if json is not None:
        return typed("application/json"), _json.dumps(json).encode()
    if data is not None:
        return typed("application/x-www-form-urlencoded"), urlencode(data, doseq=True).encode()
    if content is None:
        return headers, b""
    if isinstance(content, str):
        return headers, content.encode()
    if isinstance(content, (bytes, bytearray)):
        return headers, bytes(content)
    raise RequestError("invalid", f"http: content= must be str or bytes, not {type(content).__name__}")


def _check_timeout(timeout: Any) -> None:
    """Refuses a `timeout` that is not None or a positive, finite number of
    seconds: a bool (`True` is not 1 s), NaN and infinity are `invalid`."""
    if timeout is None:
        return
    ok = not isinstance(timeout, bool) and (
        (isinstance(timeout, int) and timeout > 0)
        or (isinstance(timeout, float) and math.isfinite(timeout) and timeout > 0)
    )
    if not ok:
        raise RequestError(
            "invalid", f"http: timeout must be a positive, finite number of seconds or None, not {timeout!r}"
        )


def timeout_nanos(timeout: Union[int, float]) -> int:
    """A checked `timeout` in seconds as the host's nanoseconds: at least 1
    (a positive timeout never becomes 0) and at most `MAX_TIMEOUT_NANOS`."""
    if timeout >= MAX_TIMEOUT_NANOS / 1_000_000_000:
        return MAX_TIMEOUT_NANOS
    return min(MAX_TIMEOUT_NANOS, max(1, int(float(timeout) * 1_000_000_000)))


class HttpClient:
    """Outbound HTTP on the `http:<host>` capability, with httpx's method
    names. Every call returns a `Ready[Response]`: `await` it in an async
    method, or call `.result()` in a plain one."""

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Optional[Mapping[str, Any]] = None,
        headers: HeaderTypes = None,
        content: Union[str, bytes, None] = None,
        data: Optional[Mapping[str, Any]] = None,
        json: Any = None,
        timeout: Optional[float] = None,
    ) -> Ready[Response]:
        """Sends a request and reads the whole response. `timeout` (seconds)
        bounds connecting, the first byte and the time between bytes; the
        host bounds them too, by its policy and the call's deadline."""

        def send() -> Response:
            verb = str(method).upper()
            if verb not in METHODS:
                raise RequestError("invalid", f"http: the method {method!r} is not one of {', '.join(METHODS)}")
            target = Url.parse(url, params)
            sent, body = _body(_headers(headers), content, data, json)
            # A known length, as httpx sends it: without one the body goes
            # chunked, which some servers do not read.
            if (body or verb in ("POST", "PUT", "PATCH")) and all(n != "content-length" for n, _ in sent):
                sent.append(("content-length", str(len(body)).encode()))
            _check_timeout(timeout)
            status, got, received = _host.backend.http_request(verb, target, sent, body, timeout)
            return Response(verb, str(target), status, got, received)

        return Ready.of(send)

    def get(self, url: str, *, params: Optional[Mapping[str, Any]] = None, headers: HeaderTypes = None,
            timeout: Optional[float] = None) -> Ready[Response]:
        """A GET of `url`."""
        return self.request("GET", url, params=params, headers=headers, timeout=timeout)

    def head(self, url: str, *, params: Optional[Mapping[str, Any]] = None, headers: HeaderTypes = None,
             timeout: Optional[float] = None) -> Ready[Response]:
        """A HEAD of `url`."""
        return self.request("HEAD", url, params=params, headers=headers, timeout=timeout)

    def delete(self, url: str, *, params: Optional[Mapping[str, Any]] = None, headers: HeaderTypes = None,
               timeout: Optional[float] = None) -> Ready[Response]:
        """A DELETE of `url`."""
        return self.request("DELETE", url, params=params, headers=headers, timeout=timeout)

    def post(self, url: str, **kwargs: Any) -> Ready[Response]:
        """A POST to `url`, with `content=`, `data=` (a form) or `json=`."""
        return self.request("POST", url, **kwargs)

    def put(self, url: str, **kwargs: Any) -> Ready[Response]:
        """A PUT to `url`, with `content=`, `data=` (a form) or `json=`."""
        return self.request("PUT", url, **kwargs)

    def patch(self, url: str, **kwargs: Any) -> Ready[Response]:
        """A PATCH to `url`, with `content=`, `data=` (a form) or `json=`."""
        return self.request("PATCH", url, **kwargs)

    # `async with plugin.http as client:` as with httpx.AsyncClient (there is
    # nothing to open or close).
    async def __aenter__(self) -> "HttpClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        return None

    def __enter__(self) -> "HttpClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


#: The client `plugin.http` and `_ctx.http` are.
http = HttpClient()
