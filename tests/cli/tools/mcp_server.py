"""An MCP server on the official Python SDK, for the tool-source tests.

    .venv-tools/bin/python tests/cli/tools/mcp_server.py stdio
    .venv-tools/bin/python tests/cli/tools/mcp_server.py http

The tests turn its tools into sandbox methods (`[tools.ID] command = [...]`
for stdio, `mcp = "http://.../mcp"` for streamable HTTP) and call them.

stdio: the MCP transport is stdin/stdout; it exits when stdin closes.
http:  streamable HTTP on a free port of 127.0.0.1, served by uvicorn. It
       prints `listening on http://127.0.0.1:PORT/mcp` as its only line on
       stdout once it takes connections, and exits when stdin reaches EOF.
       With TOOLS_TOKEN set, every request needs `Authorization: Bearer
       TOOLS_TOKEN` (401 otherwise).
Both log to stderr only.

Tools:
  add(a, b) -> a + b        structured output ({"result": N}) and text
  divide(numerator, denominator) -> numerator / denominator, text: its
                            parameters out of alphabetical order
  echo(text) -> text        text
  image()                   a 1x1 PNG (image content)
  slow(ms)                  answers after ms; cancelled (notifications/
                            cancelled, or its request dropped), it writes the
                            file named by TOOLS_CANCEL_FILE
  grow()                    adds the tool `grown(x) -> 2x` and announces it:
                            notifications/tools/list_changed to a handshake-
                            era client, a tools event on subscriptions/listen
                            streams to a 2026-07-28 one
  fail()                    an isError result, text "it failed"
  my-tool.v2()              "v2" (a name that is no identifier)
"""

import base64
import os
import secrets
import sys

import anyio
from mcp.server import NotificationOptions
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp_types import CallToolResult, TextContent
from starlette.responses import PlainTextResponse

from loopback import serve

PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

server = MCPServer("sandwit-test-tools", version="1.0.0", log_level="WARNING")

# Advertise tools.listChanged in the handshake era (MCPServer leaves it
# false; at 2026-07-28 the flag follows subscriptions/listen, which is served).
lowlevel = server._lowlevel_server
plain_options = lowlevel.create_initialization_options
lowlevel.create_initialization_options = lambda *args, **kwargs: plain_options(
    NotificationOptions(tools_changed=True)
)


@server.tool(structured_output=True)
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool(structured_output=False)
def divide(numerator: float, denominator: float) -> float:
    """Divides numerator by denominator."""
    return numerator / denominator


@server.tool(structured_output=False)
def echo(text: str) -> str:
    """Returns its text."""
    return text


@server.tool()
def image() -> Image:
    """A 1x1 PNG image."""
    return Image(data=PNG_1X1, format="png")


@server.tool(structured_output=False)
async def slow(ms: int) -> str:
    """Answers after `ms` milliseconds."""
    try:
        await anyio.sleep(ms / 1000)
    except anyio.get_cancelled_exc_class():
        path = os.environ.get("TOOLS_CANCEL_FILE")
        if path:
            with open(path, "w", encoding="utf-8") as f:
                f.write("cancelled\n")
        raise
    return f"slept {ms} ms"


def grown(x: int) -> int:
    """Doubles x (added by `grow`)."""
    return 2 * x


@server.tool(structured_output=False)
async def grow(ctx: Context) -> str:
    """Adds the tool `grown` and tells the client the tool list changed."""
    if "grown" not in {tool.name for tool in await server.list_tools()}:
        server.add_tool(grown, structured_output=True)
    # Handshake era: on the connection's channel (stdio, or the HTTP GET
    # stream); dropped by the SDK on a 2026-07-28 connection, ...
    await ctx.session.send_tool_list_changed()
    # ... where subscriptions/listen streams carry it instead.
    await ctx.notify_tools_changed()
    return "added grown"


@server.tool()
def fail() -> CallToolResult:
    """Always fails (an isError result)."""
    return CallToolResult(content=[TextContent(type="text", text="it failed")], is_error=True)


@server.tool(name="my-tool.v2", structured_output=False)
def my_tool_v2() -> str:
    """A tool whose name is not an identifier."""
    return "v2"


def require_token(app, token):
    """`app` behind a bearer-token check (401 without the right token)."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            got = dict(scope["headers"]).get(b"authorization", b"")
            if not secrets.compare_digest(got, expected):
                refusal = PlainTextResponse(
                    "unauthorized", 401, headers={"WWW-Authenticate": "Bearer"}
                )
                return await refusal(scope, receive, send)
        await app(scope, receive, send)

    return guarded




def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "stdio":
        server.run("stdio")
    elif mode == "http":
        app = server.streamable_http_app()
        token = os.environ.get("TOOLS_TOKEN")
        serve(require_token(app, token) if token else app, "/mcp")
    else:
        sys.exit("usage: mcp_server.py stdio|http")


if __name__ == "__main__":
    main()
