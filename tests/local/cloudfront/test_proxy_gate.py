"""The local edge running the gate package (include-body, verify, scopes, SigV4) in front of
local Function URLs: what reaches an origin is signed, verified and carries the identity;
what the gate refuses never reaches one: another path, another method, an OPTIONS that is
not a real preflight, a query string. The edge's own answers carry the refusal mark; the
origin's, which try to carry it too, lose it (the response headers policy's removal)."""

from __future__ import annotations

import dataclasses
import gzip
import http.client
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from edge.gate_package import GATE_HANDLER, edge_gate_package
from edge.router import OriginTarget
from edge.viewer_function import render_viewer_function
from functions.contract import REFUSAL_HEADER
from local.aws.function_url import FunctionUrl, credentials_from
from local.cloudfront.events import OriginConfig
from local.cloudfront.proxy import EdgeProxy, EdgeSettings
from local.supervisor import free_ports
from stack_config.loading import load_from_stack_file
from tests.edge.gate_harness import (
    ALLOWED_ORIGIN,
    AUDIENCE,
    CREDENTIALS,
    ISSUER,
    PROBE_CLIENT_ID,
    READINESS_PATH,
    Issuer,
    settings,
)
from tests.local.conftest import serve

REGIONS = ("us-east-1", "eu-west-1")
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
SEARCH = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search", "arguments": {}}}


@pytest.fixture(scope="module")
def gated() -> Iterator[tuple[str, Issuer, list[dict[str, str]], dict[str, int]]]:
    issuer = Issuer.generate()
    reached: list[dict[str, str]] = []

    # A hostile origin: every answer of it tries to pass for the edge's refusal.
    forged_mark = {REFUSAL_HEADER: "not-found"}

    async def mcp(request: Request) -> Response:
        reached.append(dict(request.headers))
        return JSONResponse({"ok": True, "body": json.loads(await request.body())}, headers=forged_mark)

    async def anything(request: Request) -> Response:
        reached.append({**request.headers, ":method": request.method, ":path": request.url.path})
        return JSONResponse({"ok": True, "path": request.url.path}, headers=forged_mark)

    origin_ports = dict(zip(REGIONS, free_ports(len(REGIONS)), strict=True))
    url_ports = dict(zip(REGIONS, free_ports(len(REGIONS)), strict=True))
    edge_port = free_ports(1)[0]
    gate = settings(issuer.jwks)
    package = edge_gate_package({r: OriginTarget("127.0.0.1", p, "http") for r, p in url_ports.items()}, "us-east-1",
                                gate=gate)
    folder = Path(__file__).parent / ".." / ".." / ".." / ".build" / f"test-proxy-gate-{edge_port}"
    folder = folder.resolve()
    for name, text in package.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    viewer = dataclasses.replace(load_from_stack_file("prod").viewer_function_settings(), issuer=ISSUER,
                                 audience=AUDIENCE, public_host=f"127.0.0.1:{edge_port}", public_scheme="http",
                                 allowed_origins=(ALLOWED_ORIGIN,))
    edge_settings = EdgeSettings.from_json(EdgeSettings(
        viewer_function_code=render_viewer_function(viewer), router_source="", router_handler=GATE_HANDLER,
        function_package=str(folder), include_body=True,
        default_origin=OriginConfig("127.0.0.1", url_ports["us-east-1"], "http", 30, 5), default_country="DE",
        removed_response_headers=(REFUSAL_HEADER,),
    ).to_json())
    patch = pytest.MonkeyPatch()
    for name, value in CREDENTIALS.items():
        patch.setenv(name, value)  # the gate signs with them, the URLs verify against them
    credentials = credentials_from()
    app = Starlette(routes=[Route("/mcp", mcp, methods=["POST"]),
                            Route("/{path:path}", anything, methods=["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH",
                                                                     "DELETE"])])
    try:
        with (
            serve(app, origin_ports["us-east-1"]), serve(app, origin_ports["eu-west-1"]),
            serve(FunctionUrl(f"http://127.0.0.1:{origin_ports['us-east-1']}", "us-east-1", credentials),
                  url_ports["us-east-1"]),
            serve(FunctionUrl(f"http://127.0.0.1:{origin_ports['eu-west-1']}", "eu-west-1", credentials),
                  url_ports["eu-west-1"]),
            serve(EdgeProxy(edge_settings), edge_port),
        ):
            yield f"http://127.0.0.1:{edge_port}", issuer, reached, url_ports
    finally:
        patch.undo()
        sys.path.remove(str(folder))
        for name in [n for n in sys.modules if n == "geo_router" or n.split(".")[0] == "edge_gate"]:
            del sys.modules[name]


def _post(url: str, token: str, message: dict, **headers: str) -> httpx.Response:
    return httpx.post(f"{url}/mcp", json=message, headers={"authorization": f"Bearer {token}",
                                                          "accept": "application/json, text/event-stream", **headers})


def test_a_verified_request_reaches_the_origin_signed_with_the_identity_and_the_token_aside(gated) -> None:
    url, issuer, reached, _ = gated
    before = len(reached)
    token = issuer.token(scope="mcp")
    response = _post(url, token, TOOLS_LIST)
    assert response.status_code == 200, response.text
    assert response.json() == {"ok": True, "body": TOOLS_LIST}
    headers = reached[before]
    assert headers["x-mcp-edge-authorization"] == f"Bearer {token}"
    # Authorization is the edge's SigV4 signature, as a Function URL passes it on (the origin's
    # Web Adapter puts the side header's token back in its place: AWS_LWA_AUTHORIZATION_SOURCE).
    assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=")
    assert headers["x-mcp-edge-subject"] == "user-1" and headers["x-mcp-edge-scopes"] == "mcp"


def test_a_forged_token_gets_401_at_the_edge_and_never_reaches_an_origin(gated) -> None:
    url, issuer, reached, _ = gated
    before = len(reached)
    forged = issuer.token(key=rsa.generate_private_key(public_exponent=65537, key_size=2048), scope="mcp")
    response = _post(url, forged, TOOLS_LIST)
    assert response.status_code == 401 and 'error="invalid_token"' in response.headers["www-authenticate"]
    assert response.headers.get(REFUSAL_HEADER), "the edge marks its own refusal (what the probes require)"
    assert len(reached) == before


def test_a_scoped_tool_needs_its_scope_and_works_after_step_up(gated) -> None:
    url, issuer, reached, _ = gated
    before = len(reached)
    refused = _post(url, issuer.token(scope="mcp"), SEARCH)
    assert refused.status_code == 403
    assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]
    assert 'scope="mcp search:read"' in refused.headers["www-authenticate"]
    assert len(reached) == before
    allowed = _post(url, issuer.token(scope="mcp search:read"), SEARCH)
    assert allowed.status_code == 200 and len(reached) == before + 1


def test_a_viewer_cannot_set_the_identity_headers(gated) -> None:
    url, issuer, reached, _ = gated
    response = _post(url, issuer.token(scope="mcp"), TOOLS_LIST, **{"x-mcp-edge-subject": "admin",
                                                                      "x-amz-date": "20200101T000000Z"})
    assert response.status_code == 200 and reached[-1]["x-mcp-edge-subject"] == "user-1"


def test_a_request_straight_to_a_function_url_without_a_signature_gets_403(gated) -> None:
    _, issuer, reached, url_ports = gated
    before = len(reached)
    for region in REGIONS:
        response = httpx.post(f"http://127.0.0.1:{url_ports[region]}/mcp", json=TOOLS_LIST,
                              headers={"authorization": f"Bearer {issuer.token(scope='mcp')}"})
        assert response.status_code == 403 and response.json() == {"Message": "Forbidden"}
    assert len(reached) == before


# --- only MCP, through the local edge ----------------------------------------------------------------


def _raw(url: str, method: str, target: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, dict, bytes]:
    """One request with its target sent byte for byte (httpx would resolve ``/./`` and ``/../``)."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request(method, target, body=body or None, headers={"content-type": "application/json", **headers})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def _raw_post(url: str, headers: list[tuple[str, str]], body: bytes) -> tuple[int, dict[str, str], bytes]:
    """A POST with exactly these header lines (http.client sends a value's trailing tab,
    which httpx's h11 refuses to); the status, the headers and the body of the answer."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        connection.putrequest("POST", "/mcp", skip_host=True, skip_accept_encoding=True)
        for name, value in [*headers, ("Content-Length", str(len(body)))]:
            connection.putheader(name, value)
        connection.endheaders(body)
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        connection.close()


def _refused_at_the_edge(answer: tuple[int, dict, bytes], status: int, reason: str) -> dict:
    code, headers, body = answer
    assert (code, headers.get(REFUSAL_HEADER)) == (status, reason), (code, headers, body)
    document: dict = json.loads(body)
    return document


@pytest.mark.parametrize("target", ["/", "/other", "/status", "//mcp", "/./mcp", "/x/../mcp", "/MCP", "/mcp/",
                                    "/mcp/x", "/%6Dcp", "/mcp%2F"])
def test_another_path_gets_404_with_a_valid_token_and_never_reaches_an_origin(gated, target) -> None:
    url, issuer, reached, _ = gated
    before = len(reached)
    answer = _raw(url, "POST", target, {"authorization": f"Bearer {issuer.token(scope='mcp')}"},
                  json.dumps(TOOLS_LIST).encode())
    _refused_at_the_edge(answer, 404, "not-found")
    assert len(reached) == before


def test_the_readiness_path_reaches_the_origin_for_the_probes_client_only(gated) -> None:
    url, issuer, reached, _ = gated
    before = len(reached)
    other = _raw(url, "GET", READINESS_PATH, {"authorization": f"Bearer {issuer.token(scope='mcp')}"})
    _refused_at_the_edge(other, 404, "not-found")
    assert len(reached) == before
    probe = _raw(url, "GET", READINESS_PATH,
                 {"authorization": f"Bearer {issuer.token(scope='mcp', client_id=PROBE_CLIENT_ID)}"})
    assert probe[0] == 200 and REFUSAL_HEADER not in probe[1], probe
    assert len(reached) == before + 1 and reached[-1][":path"] == READINESS_PATH


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH"])
def test_every_method_but_post_on_the_mcp_path_gets_405_allow_post(gated, method) -> None:
    url, issuer, reached, _ = gated
    before = len(reached)
    answer = _raw(url, method, "/mcp", {"authorization": f"Bearer {issuer.token(scope='mcp')}",
                                        "accept": "text/event-stream"})
    _refused_at_the_edge(answer, 405, "method-not-allowed")
    assert answer[1]["allow"] == "POST" and len(reached) == before


@pytest.mark.parametrize("headers", [{}, {"origin": ALLOWED_ORIGIN}, {"access-control-request-method": "POST"}])
def test_an_options_that_is_not_a_real_preflight_gets_405_without_a_token(gated, headers) -> None:
    url, _, reached, _ = gated
    before = len(reached)
    _refused_at_the_edge(_raw(url, "OPTIONS", "/mcp", headers), 405, "method-not-allowed")
    assert len(reached) == before


def test_a_real_preflight_from_the_allowed_origin_reaches_the_origin_and_another_origins_gets_the_viewers_403(
        gated) -> None:
    url, _, reached, _ = gated
    before = len(reached)
    passed = _raw(url, "OPTIONS", "/mcp", {"origin": ALLOWED_ORIGIN, "access-control-request-method": "POST"})
    assert passed[0] == 200 and REFUSAL_HEADER not in passed[1], passed
    assert len(reached) == before + 1 and reached[-1][":method"] == "OPTIONS"
    # Another origin: refused by the viewer function, which marks its refusal too.
    refused = _raw(url, "OPTIONS", "/mcp", {"origin": "https://evil.example", "access-control-request-method": "POST"})
    _refused_at_the_edge(refused, 403, "origin-not-allowed")
    assert len(reached) == before + 1


@pytest.mark.parametrize("query", ["a=%zz", "a=%", "a=b+c", "%41=1", "a=1;b=2", "a=b&", "&a=b", "a=b&&c=d"])
def test_a_query_string_on_the_mcp_path_gets_400_never_a_5xx_and_never_reaches_an_origin(gated, query) -> None:
    url, issuer, reached, _ = gated
    before = len(reached)
    answer = _raw(url, "POST", f"/mcp?{query}", {"authorization": f"Bearer {issuer.token(scope='mcp')}"},
                  json.dumps(TOOLS_LIST).encode())
    document = _refused_at_the_edge(answer, 400, "bad-request")
    assert document["error"]["code"] == -32600
    assert len(reached) == before


def test_the_edges_own_refusals_carry_the_mark_and_the_origins_answers_lose_theirs(gated) -> None:
    url, issuer, _, _ = gated
    served = _post(url, issuer.token(scope="mcp"), TOOLS_LIST)
    assert served.status_code == 200 and REFUSAL_HEADER not in served.headers  # the origin sent one
    # The viewer function's refusals (no token, a malformed one) and the gate's (a forged one).
    assert httpx.post(f"{url}/mcp", json=TOOLS_LIST).headers[REFUSAL_HEADER] == "no-token"
    assert _post(url, "not-a-jwt", TOOLS_LIST).headers[REFUSAL_HEADER] == "invalid-token"
    forged = issuer.token(key=rsa.generate_private_key(public_exponent=65537, key_size=2048), scope="mcp")
    assert _post(url, forged, TOOLS_LIST).headers[REFUSAL_HEADER] == "invalid-token"
SCOPED_CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "delete_all", "arguments": {}}}


@pytest.mark.parametrize(("content_type", "encoding", "body"), [
    # The attack: "+AGQ-elete_all" is delete_all to a UTF-7 decoder, a free tool's name to the gate.
    ("application/json; charset=utf-7", None,
     json.dumps(SCOPED_CALL).replace('"delete_all"', '"+AGQ-elete_all"').encode()),
    ("application/json; charset=utf-16", None, json.dumps(SCOPED_CALL).encode("utf-16")),
    ('application/json; charset="UTF-16LE"', None, json.dumps(SCOPED_CALL).encode("utf-16-le")),
    ("application/json", "gzip", gzip.compress(json.dumps(SCOPED_CALL).encode())),
    ("text/plain", None, json.dumps(SEARCH).encode()),
    ("application/x-www-form-urlencoded", None, b"jsonrpc=2.0&method=tools/call"),
    (None, None, json.dumps(SEARCH).encode()),
])
def test_a_body_not_declared_as_utf8_json_gets_415_at_the_edge_and_never_reaches_an_origin(
        gated, content_type, encoding, body) -> None:
    url, issuer, reached, _ = gated
    before = len(reached)
    headers = [("Host", urlsplit(url).netloc), ("Authorization", f"Bearer {issuer.token(scope='mcp search:read')}"),
               ("Accept", "application/json, text/event-stream")]
    headers += [("Content-Type", content_type)] if content_type is not None else []
    headers += [("Content-Encoding", encoding)] if encoding is not None else []
    status, answer_headers, answer = _raw_post(url, headers, body)
    assert status == 415, answer
    assert answer_headers["x-mcp-edge-refusal"] == "unsupported-media-type"
    assert "application/json in UTF-8" in json.loads(answer)["error"]["message"]
    assert len(reached) == before


def test_header_values_reach_the_origin_without_their_optional_whitespace(gated) -> None:
    # A trailing tab on Mcp-Method made the local Function URL answer 502 (h11 refused to send it on).
    url, issuer, reached, _ = gated
    before = len(reached)
    token = issuer.token(scope="mcp search:read")
    status, _, answer = _raw_post(url, [
        ("Host", urlsplit(url).netloc), ("Authorization", f"Bearer {token}\t"), ("Content-Type", "application/json\t"),
        ("Accept", "application/json, text/event-stream \t"), ("MCP-Protocol-Version", "2026-07-28\t"),
        ("Mcp-Method", "tools/call\t"), ("Mcp-Name", "search \t"), ("X-Trace-Note", "kept inside\tthe value \t"),
    ], json.dumps(SEARCH).encode())
    assert status == 200, answer
    assert len(reached) == before + 1
    forwarded = reached[-1]
    assert forwarded["mcp-method"] == "tools/call" and forwarded["mcp-name"] == "search"
    assert forwarded["x-mcp-edge-authorization"] == f"Bearer {token}"
    assert forwarded["x-trace-note"] == "kept inside\tthe value"  # whitespace inside a value is the value's


def test_underscore_spellings_of_the_edges_headers_never_reach_an_origin(gated) -> None:
    url, issuer, reached, _ = gated
    before = len(reached)
    forged = [("x_mcp_edge_subject", "admin"), ("x_mcp_edge_scopes", "admin"), ("X_Mcp_Edge_Client_Id", "trusted"),
              ("x_mcp_edge_authorization", "Bearer forged"), ("x-mcp-edge_region", "eu-west-1"),
              ("x_mcp_edge_refusal", "none"), ("x_amz_security_token", "viewer"), ("x-mcp-edge-new-thing", "x")]
    status, _, answer = _raw_post(url, [("Host", urlsplit(url).netloc), ("Content-Type", "application/json"),
                                        ("Authorization", f"Bearer {issuer.token(scope='mcp')}"), *forged],
                                  json.dumps(TOOLS_LIST).encode())
    assert status == 200, answer
    assert len(reached) == before + 1
    seen = {name.replace("_", "-"): value for name, value in reached[-1].items()}
    assert seen["x-mcp-edge-subject"] == "user-1" and seen["x-mcp-edge-scopes"] == "mcp"
    assert seen["x-mcp-edge-client-id"] == "client-1"
    assert "x-mcp-edge-region" not in seen and "x-mcp-edge-refusal" not in seen and "x-mcp-edge-new-thing" not in seen
    assert not [name for name in reached[-1] if "_" in name], reached[-1]
