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
- ``origins``: the browser origins (``scheme://host[:port]``, or ``null``) whose requests
  to the MCP path may pass, besides the request's own origin (``scheme`` and its
  ``Host``: a page of this edge, since CloudFront answers only the distribution's
  names); a request with any other ``Origin`` (one header, trimmed, compared exactly)
  gets 403 with a JSON-RPC error, as the MCP transport spec requires of a server. Requests without ``Origin`` are not a browser's and pass; ``null`` (sent
  by sandboxed frames and ``file:`` pages) passes only when listed.
- ``regions``: the deployed origin regions; ``key``, ``v``: the KeyValueStore key
  holding the region-health document and its version; ``header``: the request
  header that tells the router which regions to avoid (``edge/protocol.py``).

Regional failover: the function reads the health document (``{"v": 1, "avoid":
[region, ...], "at": "<UTC ISO ms Z>"}``) from the KeyValueStore associated with it
(``import cf from 'cloudfront'``, ``cf.kvs()``, so the handler is ``async``), always
removes the avoid header from the viewer's request, and sets it on every request that
goes on to the origin to the deployed regions the document lists, comma-separated.
It sets none when the document is missing, unreadable or malformed (another version,
wrong types, an entry that is not a region code) or lists every deployed region:
fail static, the router then routes as if every region were healthy.

The public host: the function is associated with the distribution, so the
distribution's domain name cannot be rendered into the function (a dependency
cycle). With a custom domain the host is rendered in; without one, the function
reads the viewer's ``Host`` header, which CloudFront only accepts for the
distribution's own names.

The template is shipped without its whole-line comments and indentation (see
``minify``): CloudFront bills nothing for bytes, but the code must stay small (the
prod stack's is under 5 KB, against the 10 KB limit).

Contract of the function (CloudFront Functions, ``cloudfront-js-2.0``):
``async handler(event)`` with ``event.request`` = ``{method, uri, headers:
{lower-case-name: {value, multiValue?}}}``; returns the request unchanged (pass)
or ``{statusCode: 401 | 403, statusDescription, headers, body: {encoding: "text", data}}``
(a promise of either).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from edge.protocol import AVOID_REGIONS_HEADER
from edge.regions import AWS_REGIONS
from functions.contract import REFUSAL_HEADER, REGION_HEALTH_KEY, REGION_HEALTH_VERSION, SCOPE_TOKEN_PATTERN

VIEWER_FUNCTION_TEMPLATE = Path(__file__).with_name("viewer_request.js")
CONFIG_PLACEHOLDER = "__CONFIG__"
RUNTIME = "cloudfront-js-2.0"
# CloudFront Functions' maximum code size.
MAX_CODE_BYTES = 10 * 1024
PROTECTED_RESOURCE_METADATA = "/.well-known/oauth-protected-resource"
# The template's first line; runners without CloudFront's module replace exactly it.
CLOUDFRONT_IMPORT = "import cf from 'cloudfront';"
# A browser origin as browsers serialize it (RFC 6454 section 6.2): lower-case scheme and
# host, the port only when it is not the scheme's default; or the opaque origin "null".
_HOST = r"([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*|\[[0-9a-f:.]+\])"
ORIGIN_PATTERN = re.compile(rf"(?P<scheme>https?)://{_HOST}(:(?P<port>[1-9][0-9]{{0,4}}))?|null")
ORIGIN_RULE = "a browser origin scheme://host[:port] (http or https, lower-case, no path or trailing slash, no " \
              "default port) or null"
_DEFAULT_PORTS = {"https": "443", "http": "80"}


def origin_problem(origin: object) -> str | None:
    """Why ``origin`` is not an origin browsers send, or None."""
    match = ORIGIN_PATTERN.fullmatch(origin) if isinstance(origin, str) else None
    if match is None:
        return f"{origin!r} is not {ORIGIN_RULE}"
    port = match.group("port")
    if port is not None and (int(port) > 65535 or _DEFAULT_PORTS[match.group("scheme")] == port):
        return f"{origin!r}: port {port} is the scheme's default (browsers never send it) or not a TCP port"
    return None


@dataclass(frozen=True)
class ViewerFunctionSettings:
    mcp_path: str
    issuer: str
    audience: str
    algorithms: tuple[str, ...]
    leeway_s: int
    # Deployed origin regions: the avoid list is filtered to them.
    regions: tuple[str, ...] = ()
    # Public host for WWW-Authenticate; None: the viewer's Host header.
    public_host: str | None = None
    public_scheme: str = "https"
    # Scopes the 401 challenge names (RFC 6750 scope): the MCP authorization spec's SHOULD,
    # which clients prefer over the metadata's scopes_supported. None configured: none named.
    scopes: tuple[str, ...] = ()
    # Browser origins allowed on the MCP path (see ``origins`` above); none: browsers are refused.
    allowed_origins: tuple[str, ...] = ()

    @property
    def resource_metadata_path(self) -> str:
        return PROTECTED_RESOURCE_METADATA + self.mcp_path


SCOPE_TOKEN = re.compile(SCOPE_TOKEN_PATTERN)


class ViewerFunctionTooLargeError(ValueError):
    pass


def minify(source: str) -> str:
    """The template without whole-line ``//`` comments, indentation and line breaks
    that carry nothing.

    Only whole-line comments go: a ``//`` after code may be inside a string
    (``'://'``), so the template keeps its comments on lines of their own (a test
    checks it). A line break is kept unless the line before ends a statement or opens
    or continues a block, object or list (``;``, ``{``, ``}``, ``,``) or the next line
    closes one, so automatic semicolon insertion never sees a difference. The first
    line (the ``cloudfront`` import) and each function stay lines of their own.
    """
    lines = [line.strip() for line in source.splitlines()]
    lines = [line for line in lines if line and not line.startswith("//")]
    out = lines[:1]
    for line in lines[1:]:
        previous = out[-1]
        declaration = line.startswith(("function ", "async function "))
        if len(out) > 1 and not declaration and (previous[-1] in ";{}," or line.startswith("}")):
            out[-1] = previous + line
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def render_viewer_function(settings: ViewerFunctionSettings) -> str:
    """The CloudFront Function's source, constants rendered in."""
    if not settings.algorithms:
        raise ValueError("the viewer function needs at least one accepted JWT algorithm")
    if any(alg.lower() == "none" for alg in settings.algorithms):
        raise ValueError("'none' is never an accepted JWT algorithm")
    if settings.public_scheme not in ("https", "http"):
        raise ValueError(f"public scheme must be https or http, not {settings.public_scheme!r}")
    if not settings.regions:
        raise ValueError("the viewer function needs the deployed regions (ViewerFunctionSettings.regions)")
    bad_scopes = [s for s in settings.scopes if not SCOPE_TOKEN.fullmatch(s)]
    if bad_scopes:
        raise ValueError(f"scopes {bad_scopes!r} are not RFC 6749 scope tokens (printable ASCII, no space, quote or backslash)")
    bad_origins = [problem for o in settings.allowed_origins if (problem := origin_problem(o)) is not None]
    if bad_origins:
        raise ValueError("allowed origins: " + "; ".join(bad_origins))
    unknown = [r for r in settings.regions if r not in AWS_REGIONS]
    if unknown:
        raise ValueError(f"regions unknown to this project: {', '.join(unknown)}")
    constants = {
        "path": settings.mcp_path,
        "metadata": settings.resource_metadata_path,
        "iss": settings.issuer,
        "aud": settings.audience,
        "algs": list(settings.algorithms),
        "leeway": settings.leeway_s,
        "host": settings.public_host.lower() if settings.public_host else None,
        "scheme": settings.public_scheme,
        "origins": sorted(set(settings.allowed_origins)),
        "regions": sorted(set(settings.regions)),
        "key": REGION_HEALTH_KEY,
        "v": REGION_HEALTH_VERSION,
        "header": AVOID_REGIONS_HEADER,
    }
    if settings.scopes:
        # The challenge's scope parameter as it is sent (tokens never need escaping).
        constants["scope"] = 'scope="' + " ".join(dict.fromkeys(settings.scopes)) + '"'
    template = minify(VIEWER_FUNCTION_TEMPLATE.read_text(encoding="utf-8"))
    if template.count(CONFIG_PLACEHOLDER) != 1:
        raise AssertionError(f"{VIEWER_FUNCTION_TEMPLATE} must contain {CONFIG_PLACEHOLDER} exactly once")
    if f"'{REFUSAL_HEADER}'" not in template:  # its refusals carry the edge's mark, spelled as the contract says
        raise AssertionError(f"{VIEWER_FUNCTION_TEMPLATE} must mark its refusals with {REFUSAL_HEADER}")
    if not template.startswith(CLOUDFRONT_IMPORT + "\n"):
        raise AssertionError(f"{VIEWER_FUNCTION_TEMPLATE} must start with {CLOUDFRONT_IMPORT}")
    # ensure_ascii also escapes U+2028/U+2029, which ES5 string literals reject.
    code = template.replace(CONFIG_PLACEHOLDER, json.dumps(constants, ensure_ascii=True, separators=(",", ":")))
    size = len(code.encode("utf-8"))
    if size > MAX_CODE_BYTES:
        raise ViewerFunctionTooLargeError(
            f"the viewer function is {size} bytes, over CloudFront Functions' {MAX_CODE_BYTES}-byte limit "
            "(shorten the issuer, the audience, the scopes, the host or the allowed origins)"
        )
    return code
