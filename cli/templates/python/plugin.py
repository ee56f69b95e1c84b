"""`{{id}}`: a sandwit plugin, written with Nekro Agent's plugin API.

Build it with `sandwit plugin build`; test it with
`.venv/bin/python -m pytest` (the build makes .venv).
"""

from sandwit_plugin import AgentCtx, NekroPlugin, SandboxMethodType

plugin = NekroPlugin(
    name="{{id}}",
    module_name="{{id}}",
    description="Greets people.",
    version="0.1.0",
    author="you",
    url="",
)


@plugin.mount_sandbox_method(SandboxMethodType.TOOL, name="Greet", description="Greet someone")
async def greet(_ctx: AgentCtx, name: str) -> str:
    """Greet someone by name.

    The docstring is what the AI reads; the AI calls the method by the
    function's name.

    Args:
        name: Who to greet.

    Returns:
        str: The greeting.

    Example:
        >>> greet("Ada")
        'Hello, Ada!'
    """
    return f"Hello, {name}!"
