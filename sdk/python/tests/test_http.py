"""The SDK's HTTP client (`plugin.http`, `_ctx.http`) on a fake host:
requests as they reach the host, responses as plugins read them, grants as
the host checks them; tests/all/python_plugins.rs and tests/cli run it in a
built component against a loopback server."""

import importlib.util
from pathlib import Path

import pytest

from sandwit_plugin import (
    AgentCtx,
    ConfigBase,
    HTTPError,
    HTTPStatusError,
    NekroPlugin,
    PluginError,
    RequestError,
    SandboxMethodType,
    ServiceError,
)
from sandwit_plugin._http import Url, timeout_nanos
from sandwit_plugin.testing import FakeHost, http_allowed, http_granted

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
API = "https://api.example.com"


def load_example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / name / "plugin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plugin_with(func, kind=SandboxMethodType.TOOL):
    plugin = NekroPlugin(name="T", module_name="t", description="d", version="0.1.0", author="a",
                         capabilities=["http:api.example.com"])
    plugin.mount_sandbox_method(kind, name=func.__name__)(func)
    return plugin


def http_host(*grants):
    return FakeHost(grants=("store", "config", "chat", *grants))


def test_a_get_sends_params_headers_and_timeout_and_reads_the_response():
    async def fetch(_ctx: AgentCtx, city: str) -> dict:
        r = await _ctx.http.get(f"{API}/v1/current", params={"city": city, "units": ["c", "k"]},
                                headers={"X-Api-Key": "k1"}, timeout=2.5)
        return {"status": r.status, "code": r.status_code, "json": r.json(), "text": r.text,
                "type": r.headers["Content-Type"], "ok": r.is_success, "url": r.url}

    host = http_host("http:api.example.com")
    host.add_response(f"{API}/v1/current?city=S%C3%A3o+Paulo&units=c&units=k", json={"t": 17.5})
    kind, got = host.call(plugin_with(fetch), "fetch", city="São Paulo")
    assert kind == "tool"
    assert got == {
        "status": 200, "code": 200, "json": {"t": 17.5}, "text": '{"t": 17.5}',
        "type": "application/json", "ok": True,
        "url": f"{API}/v1/current?city=S%C3%A3o+Paulo&units=c&units=k",
    }
    [request] = host.requests
    assert (request.method, request.headers, request.content, request.timeout) == (
        "GET", {"x-api-key": "k1"}, b"", 2.5)


def test_post_put_and_patch_send_json_a_form_or_bytes():
    def send(_ctx: AgentCtx) -> list:
        http = _ctx.http
        return [
            http.post(f"{API}/json", json={"a": [1, 2]}).result().status,
            http.put(f"{API}/form", data={"q": "a b", "n": 1}).result().status,
            http.patch(f"{API}/raw", content="héllo", headers={"content-type": "text/plain"}).result().status,
            http.request("delete", f"{API}/raw").result().status,
        ]

    host = http_host("http:api.example.com")
    host.add_response(f"{API}/json", "POST", status=201)
    host.add_response(f"{API}/form", "PUT", status=202)
    host.add_response(f"{API}/raw", "PATCH", status=204)
    host.add_response(f"{API}/raw", "DELETE", status=200)
    assert host.call(plugin_with(send), "send") == ("tool", [201, 202, 204, 200])
    posted, put, patched, deleted = host.requests
    assert posted.json() == {"a": [1, 2]} and posted.headers["content-type"] == "application/json"
    assert put.content == b"q=a+b&n=1"
    assert put.headers["content-type"] == "application/x-www-form-urlencoded"
    assert patched.content == "héllo".encode()
    assert patched.headers == {"content-type": "text/plain", "content-length": "6"}
    assert posted.headers["content-length"] == str(len(b"{\"a\": [1, 2]}"))
    assert deleted.method == "DELETE" and deleted.content == b"" and "content-length" not in deleted.headers


def test_a_host_not_granted_is_denied_naming_the_host_and_the_grant_to_ask_for():
    async def fetch(_ctx: AgentCtx, url: str) -> int:
        return (await _ctx.http.get(url)).status

    plugin = plugin_with(fetch)
    for grants, url in [
        ((), f"{API}/"),
        (("http:api.example.com",), "https://other.example.com/"),
        (("http:api.example.com",), "http://api.example.com:8080/"),
        (("http:127.0.0.1:9000",), "http://127.0.0.1:9001/"),
    ]:
        host = http_host(*grants)
        with pytest.raises(RequestError) as e:
            host.call(plugin, "fetch", url=url)
        authority = Url.parse(url).authority
        assert e.value.kind == "denied"
        assert f"did not grant a capability for {authority} (request one like `http:{authority}`)" in str(e.value)
        # A request that got no response is an HTTPError too, as in httpx.
        assert isinstance(e.value, HTTPError)


def test_a_host_granted_but_not_requested_is_denied_as_in_the_host():
    # The host allows requested ∩ granted: a plugin that forgets to request
    # `http:api.example.com` is denied even where the operator grants it.
    async def fetch(_ctx: AgentCtx, url: str) -> int:
        return (await _ctx.http.get(url)).status

    forgetful = NekroPlugin(name="T", module_name="t", description="d", version="0.1.0", author="a")
    forgetful.mount_sandbox_method(SandboxMethodType.TOOL, name="fetch")(fetch)
    narrow = NekroPlugin(name="T", module_name="t", description="d", version="0.1.0", author="a",
                         capabilities=["http:api.example.com:8443"])
    narrow.mount_sandbox_method(SandboxMethodType.TOOL, name="fetch")(fetch)
    for plugin, grants, url in [
        (forgetful, ("http:api.example.com",), f"{API}/"),
        (forgetful, ("http:*.example.com:*",), f"{API}/"),
        (narrow, ("http:api.example.com:*",), f"{API}/"),
        (plugin_with(fetch), ("http:*.example.com:*",), "https://www.example.com/"),
    ]:
        host = http_host(*grants)
        host.add_response(url, status=200)
        with pytest.raises(RequestError, match="did not grant a capability") as e:
            host.call(plugin, "fetch", url=url)
        assert e.value.kind == "denied", (plugin.capabilities, grants, url)
    # Both allow it: it goes out.
    host = http_host("http:*.example.com:*")
    host.add_response("https://api.example.com:8443/", status=204)
    assert host.call(narrow, "fetch", url="https://api.example.com:8443/") == ("tool", 204)
    assert http_allowed(["http:*.example.com"], ["http:api.example.com:*"], "api.example.com", 443)
    assert not http_allowed(["http:*.example.com"], ["http:api.example.com:*"], "api.example.com", 8443)


def test_a_service_granted_but_not_requested_is_denied_as_in_the_host():
    plugin = NekroPlugin(name="T", module_name="t", description="d", version="0.1.0", author="a")

    class Config(ConfigBase):
        KEY: str = "default"

    def read(_ctx: AgentCtx) -> str:
        return plugin.get_config(Config).KEY

    plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="read")(read)
    host = FakeHost(config={"KEY": "set"}, grants=("store", "config", "chat"))
    # No config class is mounted, so the plugin does not request `config`.
    with pytest.raises(ServiceError, match="`config` was not granted"):
        host.call(plugin, "read")
    plugin.mount_config()(Config)
    assert host.call(plugin, "read") == ("tool", "set")


def test_grants_match_as_the_host_matches_them():
    cases = [
        ("http:api.example.com", "api.example.com", 443, True),
        ("http:api.example.com", "api.example.com", 80, True),
        ("http:api.example.com", "api.example.com", 8443, False),
        ("http:*.example.com", "api.example.com", 443, True),
        ("http:*.example.com", "example.com", 443, False),
        ("http:*.example.com", "evilexample.com", 443, False),
        ("http:127.0.0.1:*", "127.0.0.1", 9, True),
        ("http:127.0.0.1:8080", "127.0.0.1", 8080, True),
        ("http:[::1]:8080", "[::1]", 8080, True),
        ("http:[::1]", "[::1]", 8080, False),
        ("store", "store", 80, False),
    ]
    for grant, host, port, allowed in cases:
        assert http_granted({grant}, host, port) is allowed, (grant, host, port)


def test_bad_requests_are_refused_before_they_reach_the_host():
    def send(_ctx: AgentCtx, verb: str, url: str, both: bool = False) -> int:
        extra = {"json": {}, "content": b"x"} if both else {}
        return _ctx.http.request(verb, url, **extra).result().status

    plugin = plugin_with(send)
    host = http_host("http:api.example.com")
    for verb, url, both, needle in [
        ("GET", "ftp://api.example.com/", False, "not an http:// or https:// URL"),
        ("GET", "https://user@api.example.com/", False, "no usable host"),
        ("GET", "https:///path", False, "no usable host"),
        ("GET", "https://api.example.com:99999/", False, "not a valid URL"),
        ("GET", "https://api.example.com/" + "a" * 9000, False, "longer than 8192 bytes"),
        ("BREW", f"{API}/", False, "is not one of GET"),
        ("POST", f"{API}/", True, "one of content=, data= and json="),
    ]:
        with pytest.raises(RequestError, match=needle) as e:
            host.call(plugin, "send", verb=verb, url=url, both=both)
        assert e.value.kind == "invalid"
    assert host.requests == []


def test_a_timeout_is_a_positive_finite_number_and_large_ones_are_clamped():
    def send(_ctx: AgentCtx, timeout) -> int:
        return _ctx.http.get(f"{API}/", timeout=timeout).result().status

    plugin = plugin_with(send)
    host = http_host("http:api.example.com")
    host.add_response(f"{API}/", status=204)
    for bad in [True, False, float("nan"), float("inf"), float("-inf"), 0, 0.0, -1, "5"]:
        with pytest.raises(RequestError, match="timeout must be a positive, finite number") as e:
            host.call(plugin, "send", timeout=bad)
        assert e.value.kind == "invalid", bad
    assert host.requests == []
    for good in [1e12, 10**30, 1e-12, 5]:
        assert host.call(plugin, "send", timeout=good) == ("tool", 204)
    assert [r.timeout for r in host.requests] == [1e12, 10**30, 1e-12, 5]
    # As the host's u64 nanoseconds: clamped, and never 0 for a positive one.
    assert timeout_nanos(2.5) == 2_500_000_000 and timeout_nanos(5) == 5_000_000_000
    assert timeout_nanos(1e12) == timeout_nanos(10**30) == timeout_nanos(1.8446744073709552e10) == 2**64 - 1
    assert timeout_nanos(1e-12) == 1
    assert timeout_nanos(1.8e10) == 18_000_000_000_000_000_000


def test_responses_read_as_httpx_reads_them():
    async def read(_ctx: AgentCtx, path: str) -> list:
        async with _ctx.http as client:
            r = await client.get(f"{API}{path}")
        return [r.status, r.text, r.headers.get("x-multi"), r.headers.get_list("X-Multi"), "x-multi" in r.headers,
                r.headers.get("missing", "none"), r.encoding]

    host = http_host("http:api.example.com")
    host.add_response(f"{API}/latin", content="café".encode("latin-1"),
                      headers={"content-type": "text/plain; charset=latin-1"})
    host.add_response(f"{API}/bad", content=b"\xff ok")
    plugin = plugin_with(read)
    assert host.call(plugin, "read", path="/latin")[1] == [200, "café", None, [], False, "none", "latin-1"]
    assert host.call(plugin, "read", path="/bad")[1][1] == "\ufffd ok"


def test_raise_for_status_and_failed_requests():
    def check(_ctx: AgentCtx, path: str) -> int:
        return _ctx.http.get(f"{API}{path}").result().raise_for_status().status

    host = http_host("http:api.example.com")
    host.add_response(f"{API}/ok", status=204)
    host.add_response(f"{API}/gone", status=404, text="no such thing")
    host.fail_request(f"{API}/down")
    host.fail_request(f"{API}/huge", kind="limit-exceeded", message="http: api.example.com: the response body is too large")
    plugin = plugin_with(check)
    assert host.call(plugin, "check", path="/ok") == ("tool", 204)
    with pytest.raises(HTTPStatusError, match="answered 404") as e:
        host.call(plugin, "check", path="/gone")
    assert e.value.response.text == "no such thing"
    with pytest.raises(RequestError, match="connection was refused") as e:
        host.call(plugin, "check", path="/down")
    assert e.value.kind == "unavailable"
    with pytest.raises(RequestError) as e:
        host.call(plugin, "check", path="/huge")
    assert e.value.kind == "limit-exceeded"
    with pytest.raises(RequestError, match="no response for GET https://api.example.com/other"):
        host.call(plugin, "check", path="/other")


def test_plugin_http_is_ctx_http():
    def noop(_ctx: AgentCtx) -> None:
        pass

    assert plugin_with(noop).http is AgentCtx(chat_key="c").http


def test_the_forecast_example_with_every_capability():
    forecast = load_example("forecast").plugin
    base = "http://127.0.0.1:9000"
    host = FakeHost(
        grants=("store", "config", "chat", "http:127.0.0.1:9000"),
        config={"BASE_URL": base, "API_KEY": "key-1"},
        ctx=AgentCtx(chat_key="chat-1", user_id="ada"),
    )
    assert "http:127.0.0.1:*" in forecast.capabilities
    assert host.prompt_inject(forecast) is None
    host.add_response(f"{base}/v1/current?city=Porto", json={"temperature_c": 17.5, "summary": "Clear"})
    host.add_response(f"{base}/v1/reports", "POST", status=201)
    assert host.call(forecast, "current_weather", city=" Porto ") == (
        "tool", {"city": "Porto", "temperature_c": 17.5, "summary": "Clear"})
    assert host.prompt_inject(forecast) == "The user last asked about the weather in Porto."
    assert host.call(forecast, "report_weather", city="Porto", summary="sunny") == ("tool", 201)
    got, posted = host.requests
    assert got.headers["x-api-key"] == "key-1" and got.timeout == 5.0
    assert posted.json() == {"city": "Porto", "summary": "sunny", "chat": "chat-1"}
    assert host.sent == [("text", "Reported the weather in Porto: sunny")]

    # A failed report is the plugin's own error; a refused one stays denied.
    host.fail_request(f"{base}/v1/reports", "POST")
    with pytest.raises(PluginError, match="the report was not taken"):
        host.call(forecast, "report_weather", city="Porto", summary="sunny")
    refused = FakeHost(grants=("config",), config={"BASE_URL": base})
    with pytest.raises(RequestError, match="did not grant a capability for 127.0.0.1:9000") as e:
        refused.call(forecast, "report_weather", city="Porto", summary="sunny")
    assert e.value.kind == "denied"


def test_forecast_needs_no_store_grant():
    forecast = load_example("forecast").plugin
    base = "http://127.0.0.1:9000"
    host = FakeHost(grants=("config", "http:127.0.0.1:9000"), config={"BASE_URL": base},
                    ctx=AgentCtx(chat_key="c", user_id="ada"))
    host.add_response(f"{base}/v1/current?city=Porto", json={"temperature_c": 1})
    assert host.call(forecast, "current_weather", city="Porto")[1]["temperature_c"] == 1.0
    assert host.prompt_inject(forecast) is None
