"""Rendering the Lambda@Edge origin-request function that routes *and* guards: files,
requirements and handler of its package.

``edge_gate_package(origins, default_region, gate=GateSettings(...), **router_options)``
returns an ``EdgeGatePackage``:

- ``files``: archive name -> text: ``geo_router.py`` (``edge.router.render_router``,
  unchanged: routing, pin/avoid headers, the origin edited in place) and the
  ``edge_gate/`` package (``edge/gate/*.py`` as they are, with ``edge_gate/constants.py``
  rendered from ``gate_config``);
- ``requirements``: ``edge/gate_requirements.txt`` (PyJWT, cryptography, cffi, pycparser,
  awscrt), to be installed as manylinux x86_64 wheels for CPython 3.13;
- ``handler``: ``edge_gate.handler.handler``; ``runtime``: ``python3.13``.

``gate_config`` is the rendered constants' schema (``GATE_CONFIG`` in
``edge_gate/constants.py``), checked here so that a bad value fails the deploy with the
field's name rather than a request at the edge:

- ``issuer`` (str), ``audiences`` (non-empty list), ``algorithms`` (asymmetric only),
  ``leeway_s`` (0-300);
- ``jwks_url`` (https, or http on loopback for the local run) and ``jwks`` (the JWKS
  document embedded at deploy time; ``{"keys": []}`` when none is in hand: the first
  token downloads it), ``jwks_refresh_cooldown_s``, ``jwks_max_backoff_s``,
  ``jwks_fetch_timeout_s`` (the hard bound of one download, below the function's timeout);
- ``base_scopes`` (every request needs them) and ``scoped_methods``
  (``{"tools/call": {tool: [scopes]}, "resources/read": {uri: [...]}, "prompts/get":
  {prompt: [...]}}``, from ``tool_scopes``/``resource_scopes``/``prompt_scopes``);
- ``resource_metadata_url`` (what the challenges name), ``metadata_paths`` (where the
  edge serves the document), ``resource_metadata`` (the RFC 9728 document: ``resource``,
  ``authorization_servers``, ``scopes_supported``, ``bearer_methods_supported``),
  ``metadata_max_age_s``;
- ``authorization_header`` (the side header that carries the viewer's token to the
  origin: the origin's ``AWS_LWA_AUTHORIZATION_SOURCE``), ``subject_header``,
  ``client_id_header``, ``scopes_header`` (the verified identity), ``max_body_bytes``;
- ``server_id``: the ``ServerId`` dimension of the edge's metrics (``edge_gate/telemetry.py``);
- ``probe_client_id``: the OAuth client of the probes, the only one whose verified token
  may pin a region (the router's pin header) or reach the readiness path; empty: nobody;
- ``routes``: public path -> what the gate forwards there (``edge_gate/paths.py``),
  compared byte for byte with the request's URI: the MCP path (``{"kind": "mcp",
  "get_stream": bool, "origin_path": str}``; ``get_stream``: the server streams on GET, so
  GET is forwarded too; ``origin_path``: the server's own MCP path, which the gate rewrites
  the public path into before signing, so ``mcpPath`` and the server's ``path`` are
  independent) and the server's readiness path when it is neither MCP path (``{"kind":
  "readiness", "origin_path": <the same path>}``, the probes' client only). One MCP path
  today; several servers (`mcp-edge:servers`) add a row each. Any other path: 404;
- ``allowed_origins``: the browser origins whose CORS preflight of the MCP path goes on
  without a token (the viewer function refuses any other ``Origin`` first);
- ``refusal_header``: the header that marks the gate's own answers
  (``functions.contract.REFUSAL_HEADER``);
- ``rate_limited_tools`` (the tools with a WAF limit of their own) and
  ``waf_body_inspection_bytes`` (the web ACL's body inspection size): what
  ``edge_gate/rate_counting.py`` refuses because WAF cannot count it;
- ``probe_token_header``: a refused request that carries a token of the probes' client,
  verified, in this header is the ``probe`` value of the metrics' ``Client`` dimension (the
  probes' forged-token check: ``functions/contract.py`` ``PROBE_TOKEN_HEADER``), whose 401
  then carries ``probe_check_header``, the proof that the refusal is the edge's.
"""

from __future__ import annotations

import pprint
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from edge.firewall_rules import BODY_INSPECTION_KB, TOOL_NAME
from edge.gate.constants import ASYMMETRIC_ALGORITHMS
from edge.gate.mcp_request import MAX_BODY_BYTES, NAMED_METHODS
from edge.router import ROUTER_MODULE, ROUTER_RUNTIME, OriginTarget, render_router
from functions.contract import EDGE_AUTHORIZATION_HEADER, PROBE_CHECK_HEADER, PROBE_TOKEN_HEADER, REFUSAL_HEADER

GATE_SOURCE = Path(__file__).with_name("gate")
GATE_PACKAGE = "edge_gate"
GATE_HANDLER = f"{GATE_PACKAGE}.handler.handler"
GATE_RUNTIME = ROUTER_RUNTIME
EDGE_GATE_REQUIREMENTS = Path(__file__).with_name("gate_requirements.txt")
GATE_MODULES = ("__init__", "constants", "handler", "mcp_request", "paths", "rate_counting", "signing",
                "telemetry", "tokens")
WELL_KNOWN = "/.well-known/oauth-protected-resource"
DEFAULT_AUTHORIZATION_HEADER = EDGE_AUTHORIZATION_HEADER  # the probes send the same side header
DEFAULT_SUBJECT_HEADER = "x-mcp-edge-subject"
DEFAULT_CLIENT_ID_HEADER = "x-mcp-edge-client-id"
DEFAULT_SCOPES_HEADER = "x-mcp-edge-scopes"
_CONFIG_LINE = re.compile(r"^GATE_CONFIG: dict\[str, Any\] = \{\}.*$", re.MULTILINE)
_HEADER_NAME = re.compile(r"x-[a-z0-9-]+")
_SCOPE = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]+")  # RFC 6749 scope-token
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class GateSettings:
    """What the stack tells the edge about its tokens and its server."""

    issuer: str
    audiences: tuple[str, ...]
    jwks_url: str
    resource: str  # the public MCP URL (RFC 9728 ``resource``)
    authorization_servers: tuple[str, ...]
    jwks: Mapping[str, Any] = field(default_factory=lambda: {"keys": []})
    mcp_path: str = "/mcp"  # the public path viewers call
    origin_path: str = ""  # the server's own MCP path, which mcp_path maps onto; empty: mcp_path itself
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    leeway_s: int = 30
    base_scopes: tuple[str, ...] = ()
    tool_scopes: Mapping[str, Iterable[str]] = field(default_factory=dict)
    resource_scopes: Mapping[str, Iterable[str]] = field(default_factory=dict)
    prompt_scopes: Mapping[str, Iterable[str]] = field(default_factory=dict)
    scopes_supported: tuple[str, ...] | None = None  # default: every scope named above
    jwks_refresh_cooldown_s: int = 60
    jwks_max_backoff_s: int = 60
    jwks_fetch_timeout_s: float = 2.0
    metadata_max_age_s: int = 300
    authorization_header: str = DEFAULT_AUTHORIZATION_HEADER
    subject_header: str = DEFAULT_SUBJECT_HEADER
    client_id_header: str = DEFAULT_CLIENT_ID_HEADER
    scopes_header: str = DEFAULT_SCOPES_HEADER
    server_id: str = ""  # the ServerId of the edge's metrics (default: the function's name)
    probe_client_id: str = ""  # whose tokens may pin a region (the probes'); empty: nobody's
    metric_tools: tuple[str, ...] = ()  # tools the metrics name one by one; others count as "other"
    readiness_path: str = ""  # the server's readiness path, for the probes; empty or an MCP path: none of its own
    get_stream: bool = False  # the server streams on GET: the gate forwards GET on the MCP path
    allowed_origins: tuple[str, ...] = ()  # browser origins whose preflight of the MCP path goes on
    rate_limited_tools: tuple[str, ...] = ()  # tools with a WAF rate limit of their own (none: no web ACL)
    waf_body_inspection_kb: int = 16  # the web ACL's body inspection size (its association config)


class EdgeGatePackage(NamedTuple):
    files: dict[str, str]
    requirements: Path
    handler: str
    runtime: str


def _url_problem(name: str, url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname in _LOOPBACK:
        return None  # the local run
    return f"{name} = {url!r}: must be an https URL (http only on loopback)"


def _scope_problems(name: str, scopes: Iterable[str]) -> list[str]:
    return [f"{name}: {scope!r} is not an OAuth scope token" for scope in scopes
            if not isinstance(scope, str) or not _SCOPE.fullmatch(scope)]


def _key_set_problems(document: Mapping[str, Any]) -> list[str]:
    """The embedded key set's shape (the keys themselves are loaded by PyJWT at the edge,
    which skips what it cannot use; the program does not import it)."""
    keys = document.get("keys")
    if not isinstance(keys, list):
        return ["jwks: must be a JWKS document, an object with a keys array"]
    return [f"jwks: key {i} needs a kid and a kty" for i, key in enumerate(keys)
            if not (isinstance(key, dict) and isinstance(key.get("kid"), str) and isinstance(key.get("kty"), str))]


def resource_metadata_url(resource: str) -> str:
    """RFC 9728 section 3.1: the well-known segment between the host and the resource's path."""
    parts = urlsplit(resource)
    path = parts.path if parts.path != "/" else ""
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{path}"


def gate_config(gate: GateSettings) -> dict[str, Any]:
    """The constants the gate embeds; ``ValueError`` naming every field that is wrong."""
    problems: list[str] = []
    if not gate.issuer:
        problems.append("issuer is empty")
    if not gate.audiences or not all(isinstance(a, str) and a for a in gate.audiences):
        problems.append(f"audiences = {list(gate.audiences)!r}: needs at least one non-empty audience")
    bad_algs = [a for a in gate.algorithms if a not in ASYMMETRIC_ALGORITHMS]
    if not gate.algorithms or bad_algs:
        problems.append(f"algorithms = {list(gate.algorithms)!r}: each must be one of "
                        f"{', '.join(ASYMMETRIC_ALGORITHMS)} (asymmetric only)")
    if not 0 <= gate.leeway_s <= 300:
        problems.append(f"leeway_s = {gate.leeway_s}: must be 0-300")
    for name, url in (("jwks_url", gate.jwks_url), ("resource", gate.resource)):
        if (problem := _url_problem(name, url)) is not None:
            problems.append(problem)
    for server in gate.authorization_servers or ("",):
        if (problem := _url_problem("authorization_servers", server)) is not None:
            problems.append(problem)
    for name, path in (("mcp_path", gate.mcp_path), ("origin_path", gate.origin_path or "/"),
                       ("readiness_path", gate.readiness_path or "/")):
        if not path.startswith("/") or (path + "/").startswith("/.well-known/"):
            problems.append(f"{name} = {path!r}: must be an absolute path outside /.well-known/")
    problems += _key_set_problems(gate.jwks)
    if not 1 <= gate.jwks_refresh_cooldown_s <= 3600:
        problems.append(f"jwks_refresh_cooldown_s = {gate.jwks_refresh_cooldown_s}: must be 1-3600")
    if not 1 <= gate.jwks_max_backoff_s <= 3600:
        problems.append(f"jwks_max_backoff_s = {gate.jwks_max_backoff_s}: must be 1-3600")
    if not 0.1 <= gate.jwks_fetch_timeout_s <= 3:
        problems.append(f"jwks_fetch_timeout_s = {gate.jwks_fetch_timeout_s}: must be 0.1-3 (the function's "
                        "timeout must cover a download)")
    scoped = {"tools/call": gate.tool_scopes, "resources/read": gate.resource_scopes,
              "prompts/get": gate.prompt_scopes}
    assert set(scoped) == set(NAMED_METHODS)
    problems += _scope_problems("base_scopes", gate.base_scopes)
    for method, targets in scoped.items():
        for target, scopes in targets.items():
            problems += _scope_problems(f"{method} {target!r}", list(scopes))
    headers = (gate.authorization_header, gate.subject_header, gate.client_id_header, gate.scopes_header)
    for header in headers:
        if not _HEADER_NAME.fullmatch(header) or header.startswith("x-amz-"):
            problems.append(f"header name {header!r}: must be lower-case x-..., not x-amz-...")
    if len(set(headers)) != len(headers):
        problems.append(f"header names {list(headers)!r} must differ")
    problems += [f"rate_limited_tools: {tool!r} is not a tool name WAF can match" for tool in gate.rate_limited_tools
                 if not isinstance(tool, str) or not TOOL_NAME.fullmatch(tool)]
    if gate.waf_body_inspection_kb not in BODY_INSPECTION_KB:
        problems.append(f"waf_body_inspection_kb = {gate.waf_body_inspection_kb!r}: must be one of "
                        f"{', '.join(map(str, BODY_INSPECTION_KB))}")
    if problems:
        raise ValueError("edge gate settings: " + "; ".join(problems))
    all_scopes = sorted({*gate.base_scopes, *(s for t in scoped.values() for v in t.values() for s in v)})
    supported = list(gate.scopes_supported) if gate.scopes_supported is not None else all_scopes
    metadata: dict[str, Any] = {
        "resource": gate.resource,
        "authorization_servers": list(gate.authorization_servers),
        "scopes_supported": supported,
        "bearer_methods_supported": ["header"],
    }
    resource_path = urlsplit(gate.resource).path.rstrip("/")
    routes: dict[str, dict[str, Any]] = {
        gate.mcp_path: {"kind": "mcp", "get_stream": gate.get_stream, "origin_path": gate.origin_path or gate.mcp_path}}
    # A readiness path that is the MCP path (public or the server's own) adds nothing: the
    # server's own path is never a public one.
    if gate.readiness_path and gate.readiness_path not in (gate.mcp_path, gate.origin_path):
        routes[gate.readiness_path] = {"kind": "readiness", "origin_path": gate.readiness_path}
    return {
        "issuer": gate.issuer,
        "audiences": list(gate.audiences),
        "algorithms": list(gate.algorithms),
        "leeway_s": gate.leeway_s,
        "jwks_url": gate.jwks_url,
        "jwks": dict(gate.jwks),
        "jwks_refresh_cooldown_s": gate.jwks_refresh_cooldown_s,
        "jwks_max_backoff_s": gate.jwks_max_backoff_s,
        "jwks_fetch_timeout_s": gate.jwks_fetch_timeout_s,
        "base_scopes": sorted(gate.base_scopes),
        "scoped_methods": {method: {target: sorted(scopes) for target, scopes in sorted(targets.items())}
                           for method, targets in scoped.items() if targets},
        "resource_metadata_url": resource_metadata_url(gate.resource),
        "metadata_paths": sorted({WELL_KNOWN, WELL_KNOWN + gate.mcp_path, WELL_KNOWN + resource_path}),
        "resource_metadata": metadata,
        "metadata_max_age_s": gate.metadata_max_age_s,
        "authorization_header": gate.authorization_header,
        "subject_header": gate.subject_header,
        "client_id_header": gate.client_id_header,
        "scopes_header": gate.scopes_header,
        "max_body_bytes": MAX_BODY_BYTES,
        "server_id": gate.server_id,
        "probe_client_id": gate.probe_client_id,
        "probe_token_header": PROBE_TOKEN_HEADER,
        "probe_check_header": PROBE_CHECK_HEADER,
        "metric_tools": sorted(set(gate.metric_tools)),
        "routes": routes,
        "allowed_origins": sorted(set(gate.allowed_origins)),
        "refusal_header": REFUSAL_HEADER,
        "rate_limited_tools": sorted(set(gate.rate_limited_tools)),
        "waf_body_inspection_bytes": gate.waf_body_inspection_kb * 1024,
    }


def render_gate_constants(gate: GateSettings) -> str:
    """Source of ``edge_gate/constants.py`` with this stack's values."""
    template = (GATE_SOURCE / "constants.py").read_text(encoding="utf-8")
    if len(_CONFIG_LINE.findall(template)) != 1:
        raise AssertionError(f"{GATE_SOURCE / 'constants.py'} must have exactly one GATE_CONFIG line to render")
    literal = pprint.pformat(gate_config(gate), width=120, sort_dicts=False)
    rendered = "GATE_CONFIG: dict[str, Any] = (  # rendered by edge/gate_package.py\n" + literal + "\n)"
    return _CONFIG_LINE.sub(lambda _: rendered, template)


def edge_gate_package(origins: Mapping[str, OriginTarget], default_region: str, *, gate: GateSettings,
                      **router_options: Any) -> EdgeGatePackage:
    """The origin-request function's files (router and gate), requirements and handler."""
    files = {f"{ROUTER_MODULE}.py": render_router(origins, default_region, **router_options)}
    for module in GATE_MODULES:
        if module == "constants":
            text = render_gate_constants(gate)
        else:
            text = (GATE_SOURCE / f"{module}.py").read_text(encoding="utf-8")
        files[f"{GATE_PACKAGE}/{module}.py"] = text
    return EdgeGatePackage(files, EDGE_GATE_REQUIREMENTS, GATE_HANDLER, GATE_RUNTIME)
