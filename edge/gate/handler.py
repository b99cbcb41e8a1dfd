"""The Lambda@Edge origin-request handler: route, verify, authorize, sign.

For each request, after the geo-router (``geo_router``, rendered beside this package)
has pointed it at a region's origin:

1. Path, method and query string (``paths``): ``GET``/``HEAD`` of the protected resource
   metadata (``/.well-known/oauth-protected-resource`` and the same with the MCP path
   appended) is answered here, without a token (RFC 9728), and so is a CORS preflight of
   it; only the configured MCP path, byte for byte, goes on (and the server's readiness
   path, for the probes' client alone), rewritten to the server's own path (the route's
   ``origin_path``) before it is signed: any other path 404; a query string 400; on the MCP
   path ``POST`` and a real CORS preflight from an allowed origin go on (``GET`` too where
   the server streams on it, ``get_stream``), any other ``OPTIONS`` 403/405, ``GET``,
   ``DELETE`` and the rest 405 with ``Allow``.
2. Viewer-sent copies of the headers the edge owns are removed: the side header that
   carries the bearer token to the origin, the identity headers, the refusal mark, every
   ``x-mcp-edge-*`` and every ``x-amz-*``, in any case and with ``_`` for ``-`` (which
   CGI-style servers read as the same name).
   The region-pin header is set aside: it is put back (and honoured by the router)
   only for a verified token issued to the probes' client (``probe_client_id``).
3. A CORS preflight goes on without a token (and without any ``Authorization``).
4. The bearer token is verified (``tokens``): none -> 401 with the ``resource_metadata``
   challenge; invalid -> 401 ``error="invalid_token"``; key set unreachable -> 503 with
   ``Retry-After``.
5. The body (include-body) must be whole (else 413), declared as UTF-8 JSON when there is
   one (``Content-Type: application/json``, no charset but utf-8, no content coding; else
   415 with a JSON-RPC error naming what is accepted) and, for a POST, strict JSON-RPC
   whose ``Mcp-Method``/``Mcp-Name`` headers, when sent, agree with it (else 400 with a
   JSON-RPC error); a batch must be of a revision that has batches (2025-03-26, or no
   ``MCP-Protocol-Version``; else 400); the token must hold the base scopes and every
   scoped call's, a batch's included (else 403 ``insufficient_scope`` naming every
   scope the request needs).
6. The token moves to the side header (the origin's Web Adapter restores it, configured
   with ``AWS_LWA_AUTHORIZATION_SOURCE``), the verified identity goes into the identity
   headers, and the request is signed with SigV4 for the chosen region (``signing``).
   Without credentials to sign with, or anything else the signer refuses: 502.

Every answer the gate makes itself, but the metadata and the preflight of it, carries the
refusal mark ``x-mcp-edge-refusal: <reason>`` (``REFUSAL_HEADER``); the distribution's
response headers policy removes that header from origin responses, so only the edge's own
answers carry it.

Around all of it (``telemetry``): the W3C trace context toward the origin (set after the
decision: it is not a signed header), and one embedded-metric-format record of the request
and its decision, which reads the body only through what the gate parsed and authorized
(``telemetry.Observation.authorized``): the body is parsed once, strictly. Verified tokens
are remembered until their ``exp`` (``tokens.VerifiedTokenCache``).
"""

from __future__ import annotations

import hashlib
import json
import math

import geo_router

from . import mcp_request, paths, rate_counting, signing, telemetry, tokens
from .constants import GATE_CONFIG

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

C = GATE_CONFIG
SIDE_HEADER: str = C.get("authorization_header", "x-mcp-edge-authorization")
SUBJECT_HEADER: str = C.get("subject_header", "x-mcp-edge-subject")
CLIENT_ID_HEADER: str = C.get("client_id_header", "x-mcp-edge-client-id")
SCOPES_HEADER: str = C.get("scopes_header", "x-mcp-edge-scopes")
OWNED_HEADERS = (SIDE_HEADER, SUBJECT_HEADER, CLIENT_ID_HEADER, SCOPES_HEADER)
RESOURCE_METADATA_URL: str = C.get("resource_metadata_url", "")
METADATA_PATHS: frozenset[str] = frozenset(C.get("metadata_paths", ()))
# Path -> what is served there (the MCP path; the readiness path, for the probes only).
ROUTES = paths.RouteTable(C.get("routes", {}), METADATA_PATHS, C.get("allowed_origins", ()))
REFUSAL_HEADER: str = C.get("refusal_header", "x-mcp-edge-refusal")
BASE_SCOPES: tuple[str, ...] = tuple(C.get("base_scopes", ()))
SCOPED_METHODS: dict[str, dict[str, list[str]]] = C.get("scoped_methods", {})
MAX_BODY_BYTES: int = C.get("max_body_bytes", mcp_request.MAX_BODY_BYTES)
METADATA_DOCUMENT = json.dumps(C.get("resource_metadata", {}), separators=(",", ":"))
METADATA_MAX_AGE_S: int = C.get("metadata_max_age_s", 300)
SERVER_ID: str = telemetry.server_id(C)
METRIC_TOOLS: frozenset[str] = frozenset(C.get("metric_tools", ()))
# Only the probes pin a region (to watch each one through the edge); anyone else's pin is dropped.
PROBE_CLIENT_ID: str = C.get("probe_client_id", "")
PROBE_TOKEN_HEADER: str = C.get("probe_token_header", "x-mcp-edge-probe-token")
PROBE_CHECK_HEADER: str = C.get("probe_check_header", "x-mcp-edge-probe-check")
PIN_HEADER: str = geo_router.PIN_HEADER

KEY_SET = tokens.KeySet(
    C.get("jwks", {}), C.get("jwks_url", ""),
    cooldown_s=C.get("jwks_refresh_cooldown_s", 60), max_backoff_s=C.get("jwks_max_backoff_s", 60),
    fetch_timeout_s=C.get("jwks_fetch_timeout_s", 3),
)
# Verified tokens are remembered until their exp (tokens.VerifiedTokenCache: bounds, rotation).
VERIFIER = tokens.VerifiedTokenCache(tokens.TokenVerifier(
    KEY_SET, issuer=C.get("issuer", ""), audiences=C.get("audiences", ()),
    algorithms=C.get("algorithms", ()), leeway_s=C.get("leeway_s", 30),
))
_REASONS = {200: "OK", 204: "No Content", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden",
            404: "Not Found", 405: "Method Not Allowed", 413: "Content Too Large", 415: "Unsupported Media Type",
            429: "Too Many Requests", 502: "Bad Gateway", 503: "Service Unavailable"}
# The refusal mark's reason when the caller names none.
_REFUSALS = {400: "bad-request", 401: "invalid-token", 403: "forbidden", 404: "not-found", 405: "method-not-allowed",
             413: "too-large", 415: "unsupported-media-type", 429: "rate-limited", 502: "bad-gateway",
             503: "unavailable"}
# Browsers may read an edge answer (and its challenge) from another origin.
_CORS = {"access-control-allow-origin": "*", "access-control-expose-headers": "WWW-Authenticate"}


def response(status: int, body: str, headers: dict[str, str] | None = None,
             content_type: str = "application/json", refusal: str | None = None) -> dict[str, Any]:
    """A response generated at the edge, in Lambda@Edge's shape; from 400 up, with the
    refusal mark (``refusal``, else the status's reason token)."""
    all_headers = {"content-type": content_type, "cache-control": "no-store", **_CORS, **(headers or {})}
    if status >= 400:
        all_headers[REFUSAL_HEADER] = refusal or _REFUSALS.get(status, "refused")
    return {
        "status": str(status),
        "statusDescription": _REASONS.get(status, ""),
        "headers": {name: [{"key": name, "value": value}] for name, value in all_headers.items()},
        "bodyEncoding": "text",
        "body": body,
    }


def jsonrpc_error(status: int, code: int, message: str, request_id: Any = None,
                  headers: dict[str, str] | None = None, refusal: str | None = None) -> dict[str, Any]:
    document = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return response(status, json.dumps(document, separators=(",", ":")), headers, refusal=refusal)


def refused(exc: paths.RefusedError) -> dict[str, Any]:
    """A path, method or query string the gate does not forward: a JSON-RPC error."""
    return jsonrpc_error(exc.status, -32600, str(exc), None, {"allow": exc.allow} if exc.allow else None,
                         refusal=exc.reason)


def unauthorized(reason: str | None) -> dict[str, Any]:
    """401: no token (``reason`` None) or an invalid one."""
    error = None if reason is None else "invalid_token"
    body = {"error": error or "invalid_request", "error_description": reason or "a bearer token is required"}
    return response(401, json.dumps(body), {"www-authenticate": mcp_request.challenge(RESOURCE_METADATA_URL, error)},
                    refusal="no-token" if reason is None else "invalid-token")


def insufficient_scope(needed: frozenset[str]) -> dict[str, Any]:
    body = {"error": "insufficient_scope", "error_description": "the token lacks scopes this request needs",
            "scope": " ".join(sorted(needed))}
    value = mcp_request.challenge(RESOURCE_METADATA_URL, "insufficient_scope", needed)
    return response(403, json.dumps(body), {"www-authenticate": value}, refusal="insufficient-scope")


def key_set_unavailable(retry_after_s: float) -> dict[str, Any]:
    body = {"error": "temporarily_unavailable", "error_description": "the issuer's signing keys are unavailable"}
    return response(503, json.dumps(body), {"retry-after": str(max(1, math.ceil(retry_after_s)))})


def metadata_response() -> dict[str, Any]:
    return response(200, METADATA_DOCUMENT, {"cache-control": f"public, max-age={METADATA_MAX_AGE_S}"})


# Names only the edge may send an origin, read as CGI-style servers read them (lower case,
# "_" as "-": HTTP_X_MCP_EDGE_SUBJECT is both x-mcp-edge-subject and x_mcp_edge_subject).
_EDGE_NAMES = frozenset(n.lower().replace("_", "-") for n in (*OWNED_HEADERS, PIN_HEADER, REFUSAL_HEADER) if n)
_EDGE_PREFIXES = ("x-mcp-edge-", "x-amz-")
# Kept, exactly so spelled: the region pin (set aside, back only for the probes), and the
# avoid list, which the viewer function always deletes and then sets from the KeyValueStore
# (a viewer's copy never reaches this far), and which the router reads to fail over.
_KEPT = frozenset(n for n in (PIN_HEADER, geo_router.AVOID_HEADER) if n)


def edge_owned(name: str) -> bool:
    """Whether a header of this name could be read as one the edge sets (its identity and
    side headers, the region pin, the refusal mark, anything ``x-mcp-edge-*``, and the
    SigV4 ``x-amz-*``), in any case and with ``_`` for ``-``."""
    canonical = name.lower().replace("_", "-")
    return canonical in _EDGE_NAMES or canonical.startswith(_EDGE_PREFIXES)


def metadata_preflight() -> dict[str, Any]:
    """A browser's preflight of the metadata (its fetch may carry MCP-Protocol-Version): the
    document is public, any origin may read it, with any request headers."""
    return response(204, "", {"access-control-allow-methods": "GET, HEAD", "access-control-allow-headers": "*",
                              "access-control-max-age": "86400"})


def strip_owned_headers(headers: dict[str, Any]) -> None:
    """Remove what only the edge may set: a viewer cannot pass an identity, a signature or
    anything a server could read as the edge's, in any spelling. The region pin itself
    (exactly ``PIN_HEADER``) stays for the gate to set aside: it returns only for the probes;
    so does the viewer function's avoid list (exactly ``geo_router.AVOID_HEADER``)."""
    for name in [n for n in headers if n not in _KEPT and edge_owned(n)]:
        del headers[name]


def set_header(headers: dict[str, Any], name: str, value: str) -> None:
    headers[name] = [{"key": name, "value": value}]


def forward(request: dict[str, Any], region: str, body: bytes) -> dict[str, Any]:
    # The public path becomes the server's own before signing: SigV4 signs the URI.
    request["uri"] = ROUTES.origin_path(request["uri"])
    try:
        signing.sign(request, region, body)
    except signing.NoCredentialsError as exc:
        print(f"edge-gate: cannot sign the origin request: {exc}")
        return response(502, json.dumps({"error": "the edge cannot sign origin requests"}), refusal="cannot-sign")
    except Exception as exc:  # awscrt's own errors on input it cannot sign: a 502 of ours, never a crash's 5xx
        print(f"edge-gate: the signer refused the origin request: {type(exc).__name__}: {exc}")
        return response(502, json.dumps({"error": "the edge cannot sign this request for the origin"}),
                        refusal="cannot-sign")
    return request


def gate(request: dict[str, Any], observation: telemetry.Observation | None = None) -> dict[str, Any]:
    """The request, routed and signed, or the response that refuses it; what it parsed and
    authorized goes on ``observation`` (the telemetry's only source for the body)."""
    method = str(request.get("method", "GET")).upper()
    headers: dict[str, Any] = request["headers"]
    try:
        kind = paths.route(method, request.get("uri"), request.get("querystring"), headers, ROUTES)
    except paths.RefusedError as exc:
        return refused(exc)
    if kind == paths.METADATA:
        return metadata_response()
    if kind == paths.METADATA_PREFLIGHT:
        return metadata_preflight()
    strip_owned_headers(headers)
    pin = headers.pop(PIN_HEADER, None) if PIN_HEADER else None
    if kind == paths.PREFLIGHT:
        headers.pop("authorization", None)
        return forward(request, geo_router.route(request), b"")
    try:
        token = mcp_request.bearer_token(headers)
    except mcp_request.BearerError as exc:
        return unauthorized(str(exc))
    if token is None:
        return unauthorized(None)
    try:
        claims = VERIFIER.verify(token)
    except tokens.TokenRejectedError as exc:
        return unauthorized(str(exc))
    except tokens.KeySetUnavailableError as exc:
        return key_set_unavailable(exc.retry_after_s)
    client_id = tokens.client_id_of(claims)
    if kind == paths.READINESS and not (PROBE_CLIENT_ID and client_id == PROBE_CLIENT_ID):
        return refused(paths.not_found(ROUTES))  # the probes' alone: to anyone else, no such path
    try:
        body = mcp_request.request_body(request.get("body"), MAX_BODY_BYTES)
    except mcp_request.BodyRefusedError as exc:
        return jsonrpc_error(exc.status, exc.code, str(exc))
    try:  # before any parse: the origin must decode the bytes as the gate reads them
        mcp_request.check_media_type(headers, body)
    except mcp_request.MediaTypeRefusedError as exc:
        return jsonrpc_error(415, mcp_request.INVALID_REQUEST, str(exc), headers=exc.headers,
                             refusal="unsupported-media-type")
    try:
        calls, batch = mcp_request.jsonrpc_calls(body) if method == "POST" else ([], False)
        mcp_request.check_batch(headers, batch)
        mcp_request.check_mcp_headers(headers, calls, batch)
        rate_counting.check(headers, body, calls, batch)  # what WAF's per-tool limits cannot count
    except mcp_request.RequestRefusedError as exc:
        return jsonrpc_error(400, exc.code, str(exc), exc.request_id)
    granted = mcp_request.granted_scopes(claims)
    needed = mcp_request.scopes_needed(calls, BASE_SCOPES, SCOPED_METHODS)
    if observation is not None:
        observation.authorized(calls, batch, client_id)
    if not needed <= granted:
        return insufficient_scope(needed)
    if pin is not None and PROBE_CLIENT_ID and client_id == PROBE_CLIENT_ID:
        headers[PIN_HEADER] = pin
    region = geo_router.route(request)
    # The token in one spelling (the one WAF's per-token key folds to), whatever the viewer sent.
    del headers["authorization"]
    set_header(headers, SIDE_HEADER, f"Bearer {token}")
    set_header(headers, SUBJECT_HEADER, mcp_request.header_safe(str(claims.get("sub", ""))))
    set_header(headers, CLIENT_ID_HEADER, mcp_request.header_safe(client_id))
    set_header(headers, SCOPES_HEADER, mcp_request.header_safe(" ".join(sorted(granted))))
    return forward(request, region, body)


def probe_check(observation: telemetry.Observation, result: dict[str, Any], entries: Any) -> None:
    """Count a 401 as the probes' (their forged-token check) when the request carried, in
    ``PROBE_TOKEN_HEADER``, one token that verifies as the probes' client's, and prove the
    refusal the edge's to the probe (``PROBE_CHECK_HEADER``). It changes nothing else: the
    answer is already decided, and the token never travels on."""
    values = mcp_request.header_values({PROBE_TOKEN_HEADER: entries}, PROBE_TOKEN_HEADER)
    if not PROBE_CLIENT_ID or result.get("status") != "401" or len(values) != 1:
        return
    probe_token = values[0].strip(" \t")
    try:
        claims = VERIFIER.verify(probe_token)
    except (tokens.TokenRejectedError, tokens.KeySetUnavailableError):
        return
    if tokens.client_id_of(claims) == PROBE_CLIENT_ID:
        observation.probe_check = True
        # The proof that this refusal is the edge's: no origin ever sees the probes' token.
        set_header(result["headers"], PROBE_CHECK_HEADER, probe_proof(probe_token))


def probe_proof(token: str) -> str:
    """``PROBE_CHECK_HEADER``'s value for the probes' token (``functions/probe/promise.py``
    ``probe_check_proof`` is the probe's copy of this rule)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    request: dict[str, Any] = event["Records"][0]["cf"]["request"]
    observation = telemetry.begin(request)
    probe_token = request["headers"].pop(PROBE_TOKEN_HEADER, None)  # read here, never forwarded
    result = gate(request, observation)
    if probe_token is not None:
        probe_check(observation, result, probe_token)
    # The body was parsed once, by the gate; the trace context and the record read that parse.
    telemetry.continue_trace(observation, request)
    telemetry.emit(observation, result, SERVER_ID, str(request.get("method", "GET")), METRIC_TOOLS, PROBE_CLIENT_ID)
    return result
