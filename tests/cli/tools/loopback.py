"""What the tool-source tests' HTTP servers share: serving an ASGI app on
a free loopback port, announcing it, and stopping at stdin's EOF (so a
server never outlives the test that holds the pipe)."""

import asyncio
import os
import socket
import sys
import threading

import uvicorn


class Server(uvicorn.Server):
    """Prints the listening line once the socket takes connections."""

    def __init__(self, config, base):
        super().__init__(config)
        self.base = base

    async def startup(self, sockets=None):
        await super().startup(sockets)
        if self.started:
            print(f"listening on {self.base}", flush=True)


def serve(app, suffix=""):
    """Serves `app` on a loopback port (TOOLS_PORT, else a free one) until
    stdin reaches EOF."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", int(os.environ.get("TOOLS_PORT", "0"))))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=1)
    server = Server(config, f"http://127.0.0.1:{port}{suffix}")

    def stop_at_eof():
        while sys.stdin.buffer.read1(65536):
            pass
        server.should_exit = True

    threading.Thread(target=stop_at_eof, daemon=True).start()
    asyncio.run(server.serve(sockets=[sock]))
