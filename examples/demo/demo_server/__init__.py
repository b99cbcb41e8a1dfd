"""The demo MCP server: the official MCP SDK, stateless, in both protocol eras.

``app.create_app(settings)`` builds the ASGI app; ``app.app`` is the one the start
command serves under uvicorn (on Lambda, started by the Lambda Web Adapter through
``run.sh``) from environment variables. ``tools`` is the one module to edit to change
its tools.
"""

# serverInfo.version in both protocol eras (initialize and server/discover).
__version__ = "1.0.0"
