"""The origin benchmark's baseline app, alone in its module so that starting it imports
only what it uses (the official MCP SDK and the server's tools), not the benchmark's
own tooling: its cold start is the SDK's.

    uvicorn --factory bench.bare_sdk:bare_sdk_app
"""

from __future__ import annotations

from typing import Any


def bare_sdk_app() -> Any:
    """The official SDK's stateless app, serving the demo's tools, and nothing else."""
    from mcp.server.mcpserver import MCPServer

    from examples.demo.demo_server.tools import register_tools

    server = MCPServer(name="bench-baseline", log_level="WARNING")
    register_tools(server, served_region="local")
    return server.streamable_http_app(stateless_http=True)
