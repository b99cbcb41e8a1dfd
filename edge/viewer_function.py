"""The viewer-request CloudFront Function: its settings and its rendered code.

``render_viewer_function(settings)`` returns the exact JavaScript the program uploads
(``aws.cloudfront.Function(code=...)``) and the local edge runs in a JS engine.
The code is ``viewer_request.js`` with one JSON object of constants in place of
``__CONFIG__``:

- ``path``: the MCP path (``/mcp``); only it and paths below it are checked.
- ``metadata``: the RFC 9728 resource metadata path for it
  (``/.well-known/oauth-protected-resource/mcp``), always passed through.
- ``iss``, ``aud``, ``algs``, ``leeway``: the token rules (issuer, audience,
  accepted ``alg`` values, clock skew in seconds on ``exp``/``nbf``).
- ``host``/``scheme``: where the public URL in ``WWW-Authenticate`` points.

The public host: the function is associated with the distribution, so the
distribution's domain name cannot be rendered into the function (a dependency
cycle). With a custom domain the host is rendered in; without one, the function
reads the viewer's ``Host`` header, which CloudFront only accepts for the
distribution's own names.

Contract of the function (CloudFront Functions, ``cloudfront-js-2.0``):
``handler(event)`` with ``event.request`` = ``{method, uri, headers:
{lower-case-name: {value, multiValue?}}}``; returns the request unchanged (pass)
or ``{statusCode: 401, statusDescription, headers, body: {encoding: "text", data}}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from mcpedge.config import StackConfig

VIEWER_FUNCTION_TEMPLATE = Path(__file__).with_name("viewer_request.js")
CONFIG_PLACEHOLDER = "__CONFIG__"
RUNTIME = "cloudfront-js-2.0"
# CloudFront Functions' maximum code size.
MAX_CODE_BYTES = 10 * 1024
PROTECTED_RESOURCE_METADATA = "/.well-known/oauth-protected-resource"


@dataclass(frozen=True)
class ViewerFunctionSettings:
    mcp_path: str
    issuer: str
    audience: str
    algorithms: tuple[str, ...]
    leeway_s: int
    # Public host for WWW-Authenticate; None: the viewer's Host header.
    public_host: str | None = None
    public_scheme: str = "https"

    @property
    def resource_metadata_path(self) -> str:
        return PROTECTED_RESOURCE_METADATA + self.mcp_path

    @classmethod
    def from_config(cls, config: StackConfig) -> ViewerFunctionSettings:
        return cls(
            mcp_path=config.mcp_path,
            issuer=config.auth.issuer,
            audience=config.auth.audience,
            algorithms=tuple(config.auth.algorithms),
            leeway_s=config.auth.leeway_s,
            public_host=config.edge.custom_domain,
        )


class ViewerFunctionTooLargeError(ValueError):
    pass


def render_viewer_function(settings: ViewerFunctionSettings) -> str:
    """The CloudFront Function's source, constants rendered in."""
    if not settings.algorithms:
        raise ValueError("the viewer function needs at least one accepted JWT algorithm")
    if any(alg.lower() == "none" for alg in settings.algorithms):
        raise ValueError("'none' is never an accepted JWT algorithm")
    if settings.public_scheme not in ("https", "http"):
        raise ValueError(f"public scheme must be https or http, not {settings.public_scheme!r}")
    constants = {
        "path": settings.mcp_path,
        "metadata": settings.resource_metadata_path,
        "iss": settings.issuer,
        "aud": settings.audience,
        "algs": list(settings.algorithms),
        "leeway": settings.leeway_s,
        "host": settings.public_host.lower() if settings.public_host else None,
        "scheme": settings.public_scheme,
    }
    template = VIEWER_FUNCTION_TEMPLATE.read_text(encoding="utf-8")
    if template.count(CONFIG_PLACEHOLDER) != 1:
        raise AssertionError(f"{VIEWER_FUNCTION_TEMPLATE} must contain {CONFIG_PLACEHOLDER} exactly once")
    # ensure_ascii also escapes U+2028/U+2029, which ES5 string literals reject.
    code = template.replace(CONFIG_PLACEHOLDER, json.dumps(constants, ensure_ascii=True, separators=(",", ":")))
    size = len(code.encode("utf-8"))
    if size > MAX_CODE_BYTES:
        raise ViewerFunctionTooLargeError(
            f"the viewer function is {size} bytes, over CloudFront Functions' {MAX_CODE_BYTES}-byte limit "
            "(shorten authIssuer/authAudience/authAlgorithms)"
        )
    return code
