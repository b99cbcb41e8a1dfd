"""The MCP probe Lambda: one MCP exchange with one target, over plain httpx.

It must stay light (it runs every minute in every region): httpx and rfc8785 at import,
never the MCP SDK; botocore's signer (from the runtime) and cryptography (the forged token
of the promise check) load on first use. Relative imports only, so the package works as
``functions.probe`` in tests and as ``probe`` at the root of the Lambda zip.
"""
