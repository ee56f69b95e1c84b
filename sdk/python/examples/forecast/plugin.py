"""A weather tool, after the weather plugins Nekro Agent authors write with
httpx: the current weather from an HTTP API whose address and key are the
operator's configuration (config, http), the user's last city remembered
(store) and injected into the chat's prompt, and a report posted back to the
API as JSON and announced in the chat (chat).

The API: `GET {BASE_URL}/v1/current?city=<city>` with the header
`x-api-key`, answering `{"temperature_c": 11.5, "summary": "Cloudy"}`, and
`POST {BASE_URL}/v1/reports` with a JSON body."""

from sandwit_plugin import (
    AgentCtx,
    ConfigBase,
    HTTPError,
    NekroPlugin,
    PluginError,
    SandboxMethodType,
    ServiceError,
)

plugin = NekroPlugin(
    name="Forecast",
    module_name="forecast",
    description="Tells the current weather in a city from a weather HTTP API.",
    version="0.1.0",
    author="sandwit",
    url="https://example.org/sandwit/forecast",
    # The API's host is the operator's choice: any port on loopback (local
    # services and tests) or one public API; the operator grants the one it
    # configures.
    capabilities=["http:127.0.0.1:*", "http:api.weather.example"],
)


@plugin.mount_config()
class ForecastConfig(ConfigBase):
    """Where the weather API is."""

    BASE_URL: str = "https://api.weather.example"
    API_KEY: str = ""
    TIMEOUT_SECONDS: float = 5.0


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="查天气", description="The current weather in a city")
async def current_weather(_ctx: AgentCtx, city: str) -> dict:
    """The current weather in a city.

    Args:
        city: The city's name, e.g. "Lisbon".

    Returns:
        dict: {"city": str, "temperature_c": float, "summary": str}

    Example:
        >>> current_weather("Lisbon")
        {'city': 'Lisbon', 'temperature_c': 21.0, 'summary': 'Sunny'}
    """
    city = city.strip()
    if not 1 <= len(city) <= 100:
        raise PluginError("the city must be 1 to 100 characters", "invalid-arguments")
    config = plugin.get_config(ForecastConfig)
    response = await _ctx.http.get(
        f"{config.BASE_URL.rstrip('/')}/v1/current",
        params={"city": city},
        headers={"x-api-key": config.API_KEY, "accept": "application/json"},
        timeout=config.TIMEOUT_SECONDS,
    )
    if response.status != 200:
        raise PluginError(f"the weather API answered {response.status}: {response.text[:200]}")
    try:
        body = response.json()
        temperature = float(body["temperature_c"])
    except (ValueError, KeyError, TypeError) as e:
        raise PluginError(f"the weather API sent no usable temperature: {e}") from None
    if _ctx.user_id:
        try:
            await plugin.store.set(chat_key=_ctx.chat_key, user_key=_ctx.user_id, store_key="last_city", value=city)
        except ServiceError:
            pass  # no store granted: the city is not remembered
    return {"city": city, "temperature_c": temperature, "summary": str(body.get("summary", "unknown"))}


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="报天气", description="Report the weather seen in a city")
def report_weather(_ctx: AgentCtx, city: str, summary: str) -> int:
    """Report the weather you were told about in a city back to the weather service.

    Args:
        city: The city's name.
        summary: What the weather is like, in a few words.

    Returns:
        int: The HTTP status the service answered.
    """
    config = plugin.get_config(ForecastConfig)
    try:
        response = plugin.http.post(
            f"{config.BASE_URL.rstrip('/')}/v1/reports",
            json={"city": city, "summary": summary, "chat": _ctx.chat_key},
            headers={"x-api-key": config.API_KEY},
            timeout=config.TIMEOUT_SECONDS,
        ).result()
        response.raise_for_status()
    except HTTPError as e:
        if getattr(e, "kind", None) == "denied":
            raise  # the operator did not grant the API's host: the call is denied
        raise PluginError(f"the report was not taken: {e}") from None
    _ctx.send_text(f"Reported the weather in {city}: {summary}").result()
    return response.status


@plugin.mount_prompt_inject_method(name="last_city", description="The city the user last asked about")
async def last_city(_ctx: AgentCtx) -> str:
    if not _ctx.user_id:
        return ""
    try:
        city = await plugin.store.get(chat_key=_ctx.chat_key, user_key=_ctx.user_id, store_key="last_city")
    except ServiceError:
        return ""  # no store granted: nothing remembered, and the listing still works
    return f"The user last asked about the weather in {city}." if city else ""
