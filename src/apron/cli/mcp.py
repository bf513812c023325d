"""`apron mcp`: Apron's tools for agents over the Model Context Protocol (apron/mcp.py)."""

from __future__ import annotations

import click

from apron.cli.options import GroupedCommand


@click.command("mcp", cls=GroupedCommand)
def mcp_command() -> None:
    """Serve Apron's tools (plan, fit, diagnose, records, engine list) to agents over MCP on stdio."""
    from apron.mcp import serve

    serve()
