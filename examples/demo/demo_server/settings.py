"""The demo server's settings, read once from environment variables and validated.

Every one has a default, so the server starts with no configuration at all (the
platform deploys it unchanged). Every problem is reported at once, naming the variable,
so a bad deployment fails at start-up (the adapter's readiness check never passes)
instead of answering requests wrongly.

Nothing here is about tokens, secrets or Host names: the edge verifies the bearer
token, checks per-tool scopes and the viewer's Host, and signs the request for the
Function URL, which Lambda refuses unless the signature is the edge's or a probe's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
# Every response names the region that served it (the edge, the probes and the tests read it).
SERVED_REGION_HEADER = "x-mcp-edge-served-region"
# The verified identity, in headers the edge sets on every request it forwards (and
# replaces whatever a viewer sent under these names).
EDGE_SUBJECT_HEADER = "x-mcp-edge-subject"
EDGE_CLIENT_ID_HEADER = "x-mcp-edge-client-id"
EDGE_SCOPES_HEADER = "x-mcp-edge-scopes"  # space-separated

# CORS, for browser MCP clients: POST for MCP; the stateless server serves no GET stream
# and no session DELETE, and preflight itself needs no listing.
CORS_ALLOW_METHODS = ("GET", "POST")
CORS_ALLOW_HEADERS = (
    "authorization", "content-type", "mcp-protocol-version", "mcp-session-id", "mcp-method", "mcp-name",
    "last-event-id",
)
CORS_MAX_AGE_S = 86400


class Env:
    """The variables the demo reads, besides the Web Adapter's own (``PORT``/``AWS_LWA_PORT``)."""

    SERVER_NAME = "MCP_SERVER_NAME"
    MCP_PATH = "MCP_PATH"
    # The region named in answers; unset: Lambda's own AWS_REGION, else "local".
    SERVED_REGION = "SERVED_REGION"
    ALLOWED_ORIGINS = "ALLOWED_ORIGINS"
    MAX_REQUEST_BODY_BYTES = "MAX_REQUEST_BODY_BYTES"
    LOG_LEVEL = "LOG_LEVEL"


class SettingsError(ValueError):
    """The environment does not describe a servable demo server; lists every problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid MCP server settings:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class Settings:
    server_name: str = "mcp-edge"
    mcp_path: str = "/mcp"
    served_region: str = "local"
    served_region_header: str = SERVED_REGION_HEADER
    allowed_origins: tuple[str, ...] = ("*",)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    log_level: str = "INFO"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        problems: list[str] = []

        def get(name: str, default: str = "") -> str:
            return env.get(name, default).strip()

        def integer(name: str, default: int, low: int, high: int) -> int:
            raw = get(name, str(default))
            if not re.fullmatch(r"\d+", raw) or not low <= int(raw) <= high:
                problems.append(f"{name} = {raw!r}: must be an integer between {low} and {high}")
                return default
            return int(raw)

        mcp_path = get(Env.MCP_PATH, cls.mcp_path)
        if not re.fullmatch(r"/[A-Za-z0-9._~/-]*[A-Za-z0-9._~-]", mcp_path):
            problems.append(f"{Env.MCP_PATH} = {mcp_path!r}: must be an absolute path like /mcp, no trailing slash")

        log_level = get(Env.LOG_LEVEL, cls.log_level).upper()
        if log_level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            problems.append(f"{Env.LOG_LEVEL} = {log_level!r}: one of DEBUG, INFO, WARNING, ERROR")

        origins = env.get(Env.ALLOWED_ORIGINS)
        settings = cls(
            server_name=get(Env.SERVER_NAME) or cls.server_name,
            mcp_path=mcp_path,
            served_region=get(Env.SERVED_REGION) or get("AWS_REGION") or cls.served_region,
            allowed_origins=(cls.allowed_origins if origins is None
                             else tuple(o.strip() for o in origins.split(",") if o.strip())),
            max_body_bytes=integer(Env.MAX_REQUEST_BODY_BYTES, cls.max_body_bytes, 1024, 64 * 1024 * 1024),
            log_level=log_level,
        )
        if problems:
            raise SettingsError(problems)
        return settings
