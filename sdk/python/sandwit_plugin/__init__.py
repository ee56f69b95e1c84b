"""Write sandwit plugins in Python with Nekro Agent's plugin API.

    from sandwit_plugin import AgentCtx, NekroPlugin, SandboxMethodType

    plugin = NekroPlugin(name="Dice", module_name="dice", description="Rolls dice.",
                         version="0.1.0", author="you", url="")

    @plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="Roll", description="Roll dice")
    async def roll(_ctx: AgentCtx, sides: int = 6) -> int:
        '''Roll one die.

        Args:
            sides: How many sides the die has.
        '''
        ...

`sandwit plugin build` turns the project's `plugin.py` into a component of
the world `sandwit:plugin/sandbox-method@0.2.0` that also imports
`wasi:http/outgoing-handler` (`plugin.http`). See README.md.
"""

from ._aio import Ready
from ._ctx import AgentCtx
from ._host import ServiceError
from ._http import Headers, HttpClient, HTTPError, HTTPStatusError, RequestError, Response
from ._plugin import (
    ConfigBase,
    Image,
    NekroPlugin,
    Plugin,
    PluginError,
    SandboxMethodType,
)

__all__ = [
    "AgentCtx",
    "ConfigBase",
    "Headers",
    "HTTPError",
    "HTTPStatusError",
    "HttpClient",
    "Image",
    "NekroPlugin",
    "Plugin",
    "PluginError",
    "Ready",
    "RequestError",
    "Response",
    "SandboxMethodType",
    "ServiceError",
]
