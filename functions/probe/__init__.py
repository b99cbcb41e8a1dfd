"""The MCP probe Lambda: one MCP exchange with one target, over plain httpx.

It must stay light (it runs every minute in every region): httpx and rfc8785 only,
never the MCP SDK. Relative imports only, so the package works as
``functions.probe`` in tests and as ``probe`` at the root of the Lambda zip.
"""
