"""`nekro_agent.api.schemas`: the agent context."""

from sandwit_plugin import AgentCtx

__all__ = ["AgentCtx"]
