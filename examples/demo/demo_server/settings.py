"""The origin's settings, read once from environment variables and validated.

On Lambda the program sets them (components/origin.py); locally the runner passes
the same names. Every problem is reported at once, naming the variable, so a bad
deployment fails at start-up (the adapter's readiness check never passes) instead
of answering requests wrongly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlparse

from .contract import ORIGIN_SECRET_HEADER, SCOPE_TOKEN_PATTERN, SERVED_REGION_HEADER, OriginEnv, OriginSecretValuesEnv

# Asymmetric signatures only: the JWKS holds public keys, and an HS* token "signed"
# with a public key must never verify. "none" is never accepted.
ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
_SCOPE_TOKEN = re.compile(SCOPE_TOKEN_PATTERN)
_HOST_PATTERN = re.compile(
    r"(\*\.)?(\[[0-9a-f:]+\]|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*)(:(\*|\d{1,5}))?"
)


class SettingsError(ValueError):
    """The environment does not describe a servable origin; lists every problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid MCP origin settings:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class Settings:
    issuer: str
    audience: str
    jwks_url: str
    origin_secrets: tuple[str, ...] = field(repr=False)
    server_name: str = "mcp-edge"
    mcp_path: str = "/mcp"
    served_region: str = "local"
    origin_secret_header: str = ORIGIN_SECRET_HEADER
    served_region_header: str = SERVED_REGION_HEADER
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    leeway_s: int = 30
    required_scopes: tuple[str, ...] = ()
    scopes_supported: tuple[str, ...] = ()  # advertised in the protected resource metadata
    resource_server_url: str = ""
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    allowed_origins: tuple[str, ...] = ("*",)
    jwks_cache_s: int = 300
    jwks_refresh_cooldown_s: int = 60
    jwks_timeout_s: float = 5.0
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    log_level: str = "INFO"

    @property
    def resource_url(self) -> str:
        """The protected resource (RFC 9728): configured, else the audience (a URL)."""
        return self.resource_server_url or self.audience

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        problems: list[str] = []

        def get(name: str, default: str = "") -> str:
            return env.get(name, default).strip()

        def required(name: str) -> str:
            value = get(name)
            if not value:
                problems.append(f"{name} is required")
            return value

        def https_url(name: str, value: str) -> None:
            parsed = urlparse(value)
            # Plain http only on loopback (the local run's JWKS and issuer).
            loopback = parsed.scheme == "http" and parsed.hostname in ("127.0.0.1", "localhost", "::1")
            if value and not ((parsed.scheme == "https" or loopback) and parsed.hostname):
                problems.append(f"{name} = {value!r}: must be an https:// URL (http only on loopback)")

        def integer(name: str, default: int, low: int, high: int) -> int:
            raw = get(name, str(default))
            if not re.fullmatch(r"\d+", raw) or not low <= int(raw) <= high:
                problems.append(f"{name} = {raw!r}: must be an integer between {low} and {high}")
                return default
            return int(raw)

        def listed(name: str, default: tuple[str, ...]) -> tuple[str, ...]:
            raw = env.get(name)
            if raw is None:
                return default
            return tuple(item.strip() for item in raw.split(",") if item.strip())

        issuer = required(OriginEnv.AUTH_ISSUER)
        audience = required(OriginEnv.AUTH_AUDIENCE)
        jwks_url = required(OriginEnv.AUTH_JWKS_URL)
        https_url(OriginEnv.AUTH_ISSUER, issuer)
        https_url(OriginEnv.AUTH_JWKS_URL, jwks_url)
        resource = get(OriginEnv.RESOURCE_SERVER_URL)
        https_url(OriginEnv.RESOURCE_SERVER_URL, resource)
        audience_url = urlparse(audience)
        if not resource and audience and not (audience_url.scheme in ("https", "http") and audience_url.hostname):
            problems.append(
                f"RESOURCE_SERVER_URL is required when AUTH_AUDIENCE ({audience!r}) is not a URL: it names the "
                "protected resource in the metadata and in WWW-Authenticate"
            )

        secrets = tuple(s for s in (get(OriginSecretValuesEnv.ORIGIN_SECRET), get(OriginSecretValuesEnv.ORIGIN_SECRET_PREVIOUS)) if s)
        if not get(OriginSecretValuesEnv.ORIGIN_SECRET):
            problems.append("ORIGIN_SECRET is required: requests without it are refused (the origin lock)")
        for s in secrets:
            if len(s) < 16:
                problems.append(f"an origin secret of {len(s)} characters is too short (at least 16)")

        algorithms = listed(OriginEnv.AUTH_ALGORITHMS, cls.algorithms)
        if not algorithms:
            problems.append("AUTH_ALGORITHMS is empty")
        for alg in algorithms:
            if alg not in ASYMMETRIC_ALGORITHMS:
                problems.append(
                    f"AUTH_ALGORITHMS contains {alg!r}: allowed are {', '.join(ASYMMETRIC_ALGORITHMS)} "
                    "(never none, never HS*)"
                )

        mcp_path = get(OriginEnv.MCP_PATH, cls.mcp_path)
        if not re.fullmatch(r"/[A-Za-z0-9._~/-]*[A-Za-z0-9._~-]", mcp_path):
            problems.append(f"MCP_PATH = {mcp_path!r}: must be an absolute path like /mcp, no trailing slash")

        hosts = tuple(h.lower() for h in listed(OriginEnv.ALLOWED_HOSTS, LOOPBACK_HOSTS))
        if not hosts:
            problems.append("ALLOWED_HOSTS is empty: no request could ever be served")
        for host in hosts:
            if not _HOST_PATTERN.fullmatch(host):
                problems.append(
                    f"ALLOWED_HOSTS contains {host!r}: use host, host:port, host:* or *.domain[:*] entries"
                )

        # The scopes the stack advertises (mcp-edge:authScopes); unset: none beyond the required ones.
        scopes_supported = tuple(dict.fromkeys(listed(OriginEnv.AUTH_SCOPES_SUPPORTED, ())))
        for scope in scopes_supported:
            if not _SCOPE_TOKEN.fullmatch(scope):
                problems.append(f"AUTH_SCOPES_SUPPORTED contains {scope!r}: a scope is printable ASCII without "
                                "spaces, quotes or backslashes (RFC 6749 section 3.3)")

        log_level = get("LOG_LEVEL", cls.log_level).upper()
        if log_level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            problems.append(f"LOG_LEVEL = {log_level!r}: one of DEBUG, INFO, WARNING, ERROR")

        settings = cls(
            issuer=issuer,
            audience=audience,
            jwks_url=jwks_url,
            origin_secrets=secrets,
            server_name=get(OriginEnv.SERVER_NAME, cls.server_name) or cls.server_name,
            mcp_path=mcp_path,
            served_region=get(OriginEnv.SERVED_REGION) or get("AWS_REGION") or cls.served_region,
            algorithms=algorithms,
            leeway_s=integer(OriginEnv.AUTH_LEEWAY_SECONDS, cls.leeway_s, 0, 300),
            required_scopes=listed("AUTH_REQUIRED_SCOPES", ()),
            scopes_supported=scopes_supported,
            resource_server_url=resource,
            allowed_hosts=hosts,
            allowed_origins=listed("ALLOWED_ORIGINS", cls.allowed_origins),
            jwks_cache_s=integer("JWKS_CACHE_SECONDS", cls.jwks_cache_s, 1, 86400),
            jwks_refresh_cooldown_s=integer("JWKS_REFRESH_COOLDOWN_SECONDS", cls.jwks_refresh_cooldown_s, 0, 86400),
            jwks_timeout_s=float(integer("JWKS_TIMEOUT_SECONDS", int(cls.jwks_timeout_s), 1, 60)),
            max_body_bytes=integer("MAX_REQUEST_BODY_BYTES", cls.max_body_bytes, 1024, 64 * 1024 * 1024),
            log_level=log_level,
        )
        if problems:
            raise SettingsError(problems)
        return settings
