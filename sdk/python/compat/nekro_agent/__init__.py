"""Nekro Agent's plugin API import paths (`nekro_agent.api.plugin`,
`.schemas`, `.message`, `.core`, `.i18n`), served by `sandwit_plugin`, so a
plugin written for Nekro builds with `sandwit plugin build` unchanged. What
differs and what is not supported: sdk/python/README.md, "Nekro Agent
compatibility"."""
