"""The local edge running the gate package (include-body, verify, scopes, SigV4) in front of
local Function URLs: what reaches an origin is signed, verified and carries the identity;
what the gate refuses never reaches one."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from pathlib import Path

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
from tests.edge.gate_harness import AUDIENCE, CREDENTIALS, ISSUER, Issuer, settings
from tests.local.conftest import serve

REGIONS = ("us-east-1", "eu-west-1")
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
SEARCH = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search", "arguments": {}}}


@pytest.fixture(scope="module")
def gated() -> Iterator[tuple[str, Issuer, list[dict[str, str]], dict[str, int]]]:
    issuer = Issuer.generate()
    reached: list[dict[str, str]] = []

    async def mcp(request: Request) -> Response:
        reached.append(dict(request.headers))
        return JSONResponse({"ok": True, "body": json.loads(await request.body())})

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
                                 audience=AUDIENCE, public_host=f"127.0.0.1:{edge_port}", public_scheme="http")
    edge_settings = EdgeSettings.from_json(EdgeSettings(
        viewer_function_code=render_viewer_function(viewer), router_source="", router_handler=GATE_HANDLER,
        function_package=str(folder), include_body=True,
        default_origin=OriginConfig("127.0.0.1", url_ports["us-east-1"], "http", 30, 5), default_country="DE",
    ).to_json())
    patch = pytest.MonkeyPatch()
    for name, value in CREDENTIALS.items():
        patch.setenv(name, value)  # the gate signs with them, the URLs verify against them
    credentials = credentials_from()
    app = Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])
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
