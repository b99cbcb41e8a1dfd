"""The local edge on loopback: the program's viewer function and router in front of fake origins."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator

import anyio
import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from edge.router import OriginTarget, render_router
from edge.viewer_function import render_viewer_function
from local.cloudfront.events import OriginConfig
from local.cloudfront.http_protocol import EDGE_HTTP_PROTOCOL
from local.cloudfront.proxy import MAX_BODY_BYTES, EdgeProxy, EdgeSettings
from local.supervisor import free_ports
from stack_config.loading import load_from_stack_file
from tests.local.conftest import serve

REGIONS = ("us-east-1", "eu-west-1", "ap-northeast-1")
SECRET = "origin-secret-" + "x" * 24
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
release_stream = threading.Event()
# The shortest read timeout the router may set (the Lambda@Edge event's minimum), and an
# origin that answers over twice as long, one packet a second.
SHORT_READ_TIMEOUT_S = 4
TRICKLE_PACKETS, TRICKLE_GAP_S = 9, 1.0
# The edge served as the topology serves it: its own protocol (local/cloudfront/http_protocol.py) on uvloop.
EDGE_SERVER = {"http": EDGE_HTTP_PROTOCOL, "loop": "uvloop"}


def origin_app(region: str) -> Starlette:
    async def echo(request: Request) -> Response:
        return JSONResponse(
            {"region": region, "path": request.url.path, "query": request.url.query,
             "headers": [[k, v] for k, v in request.headers.items()], "body": (await request.body()).decode()},
            headers={"x-mcp-edge-served-region": region},
        )

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[bytes]:
            yield b"data: first\n\n"
            # Holds the stream until the test has seen the first event: a buffering
            # proxy would deliver nothing before this gives up.
            for _ in range(100):
                if release_stream.is_set():
                    yield b"data: second\n\n"
                    return
                await anyio.sleep(0.05)
            yield b"data: gave-up\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def trickle(request: Request) -> Response:
        async def stream() -> AsyncIterator[bytes]:
            for i in range(TRICKLE_PACKETS):
                yield f": keep-alive {i}\n\n".encode()
                await anyio.sleep(TRICKLE_GAP_S)
            yield b"data: done\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def silent(request: Request) -> Response:
        await anyio.sleep(TRICKLE_PACKETS * TRICKLE_GAP_S)
        return JSONResponse({"late": True})

    return Starlette(routes=[Route("/mcp", echo, methods=["GET", "POST"]), Route("/mcp/events", events),
                             Route("/mcp/trickle", trickle), Route("/mcp/silent", silent)])


def edge_settings_for(edge_port: int, origin_ports: dict[str, int], read_timeout_s: int | None = None) -> EdgeSettings:
    """The local edge in front of ``origin_ports``, with the prod stack's viewer function
    and edge timeouts (or ``read_timeout_s``), as the child process reads its settings."""
    prod = load_from_stack_file("prod")
    read_timeout_s = read_timeout_s or prod.edge.origin_read_timeout_s
    viewer = dataclasses.replace(
        prod.viewer_function_settings(),
        issuer="http://127.0.0.1:1/", audience=f"http://127.0.0.1:{edge_port}/mcp",
        public_host=f"127.0.0.1:{edge_port}", public_scheme="http",
    )
    settings = EdgeSettings(
        viewer_function_code=render_viewer_function(viewer),
        router_source=render_router({r: OriginTarget("127.0.0.1", p, "http") for r, p in origin_ports.items()}, "us-east-1",
                                    read_timeout_s=read_timeout_s,
                                    keepalive_timeout_s=prod.edge.origin_keepalive_s),
        default_origin=OriginConfig("127.0.0.1", origin_ports["us-east-1"], "http", read_timeout_s,
                                    prod.edge.origin_keepalive_s, {"x-mcp-edge-origin-secret": SECRET}),
        default_country="DE",
    )
    return EdgeSettings.from_json(settings.to_json())  # as the child process reads it


@pytest.fixture(scope="module")
def edge() -> Iterator[tuple[str, dict[str, int]]]:
    ports = dict(zip(REGIONS, free_ports(len(REGIONS) + 1), strict=False))
    edge_port = free_ports(1)[0]
    settings = edge_settings_for(edge_port, ports)
    # ap-northeast-1 is left down on purpose.
    with (
        serve(origin_app("us-east-1"), ports["us-east-1"]),
        serve(origin_app("eu-west-1"), ports["eu-west-1"]),
        serve(EdgeProxy(settings), edge_port, **EDGE_SERVER),
    ):
        yield f"http://127.0.0.1:{edge_port}", ports


def _token(edge_url: str) -> str:
    now = int(time.time())
    claims = {"iss": "http://127.0.0.1:1/", "aud": f"{edge_url}/mcp", "exp": now + 600, "iat": now}
    return jwt.encode(claims, KEY, algorithm="RS256", headers={"kid": "k"})


def test_no_token_is_answered_at_the_edge_with_the_metadata_challenge(edge: tuple[str, dict]) -> None:
    url, _ = edge
    response = httpx.post(f"{url}/mcp", json={})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith(
        f'Bearer resource_metadata="{url}/.well-known/oauth-protected-resource/mcp"')
    assert "x-mcp-edge-served-region" not in response.headers


def test_the_function_answers_on_the_request_head_without_waiting_for_its_body(edge: tuple[str, dict]) -> None:
    # Given a request whose head says a body follows, and a body that has not come yet,
    url, _ = edge
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as viewer:
        viewer.sendall(f"POST /mcp HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
                       "content-length: 100\r\n\r\n".encode())
        # the viewer function, which never sees a body in CloudFront either, already
        # answered the missing token: the answer arrives before the body is sent.
        head = viewer.recv(65_536)
    assert head.startswith(b"HTTP/1.1 401 "), head[:200]


def test_a_request_the_function_answers_leaves_its_connection_usable_for_the_next(edge: tuple[str, dict]) -> None:
    # Given a viewer whose first request (no token, a 1 MB body) the function answers on its head,
    url, _ = edge
    with httpx.Client(timeout=30) as viewer:
        refused = viewer.post(f"{url}/mcp", content=b"x" * 1_000_000)
        # the body it never read is not taken for the next request on that connection.
        served = viewer.get(f"{url}/mcp", headers={"authorization": f"Bearer {_token(url)}",
                                                   "cloudfront-viewer-country": "US"})
    assert (refused.status_code, served.status_code) == (401, 200)
    assert served.headers["x-mcp-edge-served-region"] == "us-east-1"


def test_a_body_over_the_function_urls_payload_limit_is_refused_with_413(edge: tuple[str, dict]) -> None:
    url, _ = edge
    response = httpx.post(f"{url}/mcp", content=b"x" * (MAX_BODY_BYTES + 1), timeout=30,
                          headers={"authorization": f"Bearer {_token(url)}", "cloudfront-viewer-country": "US"})
    assert response.status_code == 413 and "x-mcp-edge-served-region" not in response.headers


def test_a_request_reaches_the_countrys_region_with_cloudfronts_headers(edge: tuple[str, dict]) -> None:
    url, ports = edge
    response = httpx.post(
        f"{url}/mcp?a=1&b=2", content=b'{"jsonrpc":"2.0"}',
        headers={"authorization": f"Bearer {_token(url)}", "cloudfront-viewer-country": "US",
                 "x-mcp-edge-origin-secret": "forged", "cookie": "session=1", "content-type": "application/json"},
    )
    assert response.status_code == 200, response.text
    assert response.headers["x-mcp-edge-served-region"] == "us-east-1"
    assert response.headers["x-cache"] == "Miss from cloudfront"
    seen = response.json()
    headers = dict(seen["headers"])
    assert seen["query"] == "a=1&b=2" and seen["body"] == '{"jsonrpc":"2.0"}'
    assert headers["host"] == f"127.0.0.1:{ports['us-east-1']}"
    assert [v for k, v in seen["headers"] if k == "x-mcp-edge-origin-secret"] == [SECRET]
    assert headers["cloudfront-viewer-country"] == "US"
    assert "x-forwarded-for" in headers and "x-amz-cf-id" in headers
    assert "cookie" not in headers  # the policy forwards no cookies


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example:{port}",
                                  "attacker.localhost:{port}", "127.0.0.2:{port}"])
def test_a_host_that_is_none_of_the_distributions_names_gets_403_before_any_function_or_origin(
        edge: tuple[str, dict], host: str) -> None:
    # DNS rebinding: a page's own name resolved to 127.0.0.1; the token would be valid.
    url, _ = edge
    port = url.rsplit(":", 1)[1]
    response = httpx.post(f"{url}/mcp", content=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
                          headers={"host": host.format(port=port), "authorization": f"Bearer {_token(url)}",
                                   "content-type": "application/json", "origin": "http://evil.example"})
    assert response.status_code == 403, response.text
    assert response.headers["x-cache"] == "Error from cloudfront"
    assert response.headers["x-local-edge-error"] == "InvalidHost"
    assert "x-mcp-edge-served-region" not in response.headers and "www-authenticate" not in response.headers


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}", "127.0.0.1"])
def test_the_distributions_names_in_any_case_and_with_any_port_are_served(edge: tuple[str, dict], host: str) -> None:
    url, _ = edge
    port = url.rsplit(":", 1)[1]
    response = httpx.post(f"{url}/mcp", content=b'{"jsonrpc":"2.0"}',
                          headers={"host": host.format(port=port), "authorization": f"Bearer {_token(url)}",
                                   "cloudfront-viewer-country": "US", "content-type": "application/json"})
    assert response.status_code == 200, response.text
    assert response.headers["x-mcp-edge-served-region"] == "us-east-1"


def test_the_edges_own_origin_passes_and_any_other_gets_the_viewer_functions_403(edge: tuple[str, dict]) -> None:
    url, _ = edge
    headers = {"authorization": f"Bearer {_token(url)}", "cloudfront-viewer-country": "US",
               "content-type": "application/json"}
    own = httpx.post(f"{url}/mcp", content=b'{"jsonrpc":"2.0"}', headers={**headers, "origin": url})
    assert own.status_code == 200, own.text
    other = httpx.post(f"{url}/mcp", content=b'{"jsonrpc":"2.0"}', headers={**headers, "origin": "http://evil.example"})
    assert other.status_code == 403 and other.json()["error"]["code"] == -32000
    assert "x-mcp-edge-served-region" not in other.headers


def test_the_host_names_survive_the_settings_round_trip() -> None:
    settings = edge_settings_for(8400, {r: 1 + i for i, r in enumerate(REGIONS)})
    assert settings.aliases == ("localhost",) and settings.serves_host("localhost:8400")
    assert not settings.serves_host("evil.example:8400") and not settings.serves_host("")
    assert settings.serves_host("[::1]:8400") is False
    aliased = dataclasses.replace(settings, aliases=("mcp.acme.example", "::1"))
    assert aliased.serves_host(" MCP.acme.example ") and not aliased.serves_host("localhost")


def test_without_a_country_header_the_default_country_routes(edge: tuple[str, dict]) -> None:
    url, _ = edge
    response = httpx.get(f"{url}/mcp", headers={"authorization": f"Bearer {_token(url)}"})
    assert response.headers["x-mcp-edge-served-region"] == "eu-west-1"  # DE is nearest to eu-west-1
    assert dict(response.json()["headers"])["cloudfront-viewer-country"] == "DE"


def test_sse_streams_through_without_buffering(edge: tuple[str, dict]) -> None:
    url, _ = edge
    release_stream.clear()
    with httpx.stream("GET", f"{url}/mcp/events", headers={"authorization": f"Bearer {_token(url)}",
                                                          "cloudfront-viewer-country": "US"}, timeout=30) as response:
        chunks = response.iter_raw()
        first = next(chunks)
        assert first == b"data: first\n\n"
        release_stream.set()
        rest = b"".join(chunks)
    assert rest == b"data: second\n\n"


def test_an_unreachable_origin_is_a_502_naming_the_error(edge: tuple[str, dict]) -> None:
    url, _ = edge
    response = httpx.get(f"{url}/mcp", headers={"authorization": f"Bearer {_token(url)}",
                                                "cloudfront-viewer-country": "JP"})
    assert response.status_code == 502
    assert response.headers["x-local-edge-error"] == "OriginConnectError"
    assert response.headers["x-cache"] == "Error from cloudfront"


@pytest.fixture(scope="module")
def short_timeout_edge() -> Iterator[str]:
    origin_port, edge_port = free_ports(2)
    settings = edge_settings_for(edge_port, {"us-east-1": origin_port}, read_timeout_s=SHORT_READ_TIMEOUT_S)
    with serve(origin_app("us-east-1"), origin_port), serve(EdgeProxy(settings), edge_port, **EDGE_SERVER):
        yield f"http://127.0.0.1:{edge_port}"


def test_the_read_timeout_is_between_packets_as_cloudfronts(short_timeout_edge: str) -> None:
    # Given a 4 s read timeout, an origin whose answer takes 9 s but sends a packet every
    # second gets through whole,
    url, auth = short_timeout_edge, {"authorization": f"Bearer {_token(short_timeout_edge)}"}
    started = time.monotonic()
    streamed = httpx.get(f"{url}/mcp/trickle", headers=auth, timeout=30)
    assert streamed.status_code == 200 and streamed.text.endswith("data: done\n\n")
    assert time.monotonic() - started >= TRICKLE_PACKETS * TRICKLE_GAP_S
    # while one silent for as long is cut with a 504 once 4 s pass without a packet.
    started = time.monotonic()
    cut = httpx.get(f"{url}/mcp/silent", headers=auth, timeout=30)
    elapsed = time.monotonic() - started
    assert cut.status_code == 504 and cut.headers["x-local-edge-error"] == "OriginReadTimeout"
    assert SHORT_READ_TIMEOUT_S <= elapsed < TRICKLE_PACKETS * TRICKLE_GAP_S
