"""A dice roller, after Nekro Agent's built-in dice plugin: a roll against a
difficulty as a behavior message, and dice shown to the AI as an image."""

import random

from sandwit_plugin import AgentCtx, ConfigBase, Image, NekroPlugin, SandboxMethodType

plugin = NekroPlugin(
    name="Dice",
    module_name="dice",
    description="Rolls dice for games and decisions.",
    version="0.1.0",
    author="sandwit",
    url="https://example.org/sandwit/dice",
)


@plugin.mount_config()
class DiceConfig(ConfigBase):
    """How dice are rolled."""

    MAX_DICE: int = 10
    DEFAULT_SIDES: int = 20


@plugin.mount_sandbox_method(SandboxMethodType.BEHAVIOR, name="掷骰子", description="Roll against a difficulty")
async def roll_dice(_ctx: AgentCtx, event_name: str, difficulty: int = 10) -> str:
    """Roll one die for an event against a difficulty and announce the result in the chat.

    Args:
        event_name: What the roll decides, e.g. "open the door".
        difficulty: The lowest roll that succeeds.

    Returns:
        str: The roll and whether it succeeded.

    Example:
        >>> roll_dice("open the door", 12)
    """
    config = plugin.get_config(DiceConfig)
    sides = config.DEFAULT_SIDES
    roll = random.randint(1, sides)
    verdict = "success" if roll >= difficulty else "failure"
    message = f"🎲 {event_name}: rolled {roll} (d{sides}) against {difficulty}: {verdict}"
    await _ctx.send_text(message)
    return message


@plugin.mount_sandbox_method(SandboxMethodType.MULTIMODAL_AGENT, name="看骰子", description="Show dice to the AI")
def show_dice(_ctx: AgentCtx, count: int = 1, sides: int = 6) -> list:
    """Roll dice and show them to you as an image, with their total.

    Args:
        count: How many dice to roll.
        sides: How many sides each die has.

    Example:
        >>> show_dice(2, 6)
    """
    config = plugin.get_config(DiceConfig)
    if not 1 <= count <= config.MAX_DICE or not 2 <= sides <= 1000:
        raise ValueError(f"roll 1 to {config.MAX_DICE} dice of 2 to 1000 sides")
    rolls = [random.randint(1, sides) for _ in range(count)]
    return [f"Rolled {count}d{sides}: {rolls}, total {sum(rolls)}.", Image(_svg(rolls), "image/svg+xml")]


def _svg(rolls: list) -> bytes:
    boxes = "".join(
        f'<rect x="{10 + i * 70}" y="10" width="60" height="60" rx="8" fill="white" stroke="black"/>'
        f'<text x="{40 + i * 70}" y="50" font-size="24" text-anchor="middle">{r}</text>'
        for i, r in enumerate(rolls)
    )
    width = 20 + 70 * len(rolls)
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="80">{boxes}</svg>'.encode()
