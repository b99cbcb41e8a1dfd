"""The regional MCP origin: the official MCP SDK behind a streaming Lambda Function URL.

``app.create_app(settings)`` builds the ASGI app; ``app.app`` is the one ``run.sh``
starts under uvicorn (on Lambda, via the Lambda Web Adapter) from environment
variables. ``tools`` is the one module to edit to ship your own tools.
"""

# serverInfo.version in both protocol eras (initialize and server/discover).
__version__ = "1.0.0"
