"""CloudFront's events and what the edge code's results mean (``local.cloudfront.events``),
on the program's own rendered code run in QuickJS and as the imported router."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from devkit.edge_runtimes.in_process import RouterFunction, ViewerFunction
from edge.router import OriginTarget, render_router
from edge.viewer_function import render_viewer_function
from local.cloudfront.events import (
    EdgeResponse,
    OriginConfig,
    OriginRequest,
    ViewerRequest,
    format_query,
    origin_request_event,
    parse_query,
    read_function_result,
    read_router_result,
    viewer_request_event,
)
from stack_config.loading import load_from_stack_file

ISSUER = "http://127.0.0.1:8100/"
AUDIENCE = "http://127.0.0.1:8080/mcp"
PORTS = {"us-east-1": 8110, "eu-west-1": 8111, "ap-southeast-1": 8112, "ap-northeast-1": 8113}
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def local_viewer_code() -> str:
    """The prod stack's viewer function rendered for a local edge on 127.0.0.1:8080."""
    stack = load_from_stack_file("prod").viewer_function_settings()
    local = dataclasses.replace(stack, issuer=ISSUER, audience=AUDIENCE, public_host="127.0.0.1:8080",
                                public_scheme="http")
    return render_viewer_function(local)


@pytest.fixture(scope="module")
def viewer() -> Iterator[ViewerFunction]:
    fn = ViewerFunction(local_viewer_code())
    yield fn
    fn.close()


@pytest.fixture(scope="module", params=["sync", "async"])
def pass_through(request: pytest.FixtureRequest) -> Iterator[ViewerFunction]:
    # An async handler's result comes back through the pending jobs and __cf_result, a
    # plain one's straight from the call: both carry the request back alike.
    prefix = "async " if request.param == "async" else ""
    fn = ViewerFunction(prefix + "function handler(event) { return event.request; }")
    yield fn
    fn.close()


@pytest.fixture(scope="module")
def router() -> RouterFunction:
    source = render_router({r: OriginTarget("127.0.0.1", p, "http") for r, p in PORTS.items()}, "us-east-1")
    return RouterFunction(source)


def viewer_request(**headers: str) -> ViewerRequest:
    return ViewerRequest(method="POST", uri="/mcp", querystring=[], headers=[(k.replace("_", "-"), v)
                                                                            for k, v in headers.items()])


def viewer_event(request: ViewerRequest) -> dict:
    return viewer_request_event(request, client_ip="127.0.0.1", distribution_domain="127.0.0.1",
                                distribution_id="E1", request_id="r1")


def signed_token(**overrides: object) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "exp": now + 600, "iat": now, **overrides}
    return jwt.encode(claims, KEY, algorithm="RS256", headers={"kid": "k"})


def test_the_rendered_viewer_function_turns_away_a_missing_token_with_the_metadata_url(viewer: ViewerFunction) -> None:
    result = read_function_result(viewer(viewer_event(viewer_request(host="127.0.0.1:8080"))))
    assert isinstance(result, EdgeResponse) and result.status == 401
    challenge = dict(result.headers)["www-authenticate"]
    assert 'resource_metadata="http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp"' in challenge


# Tokens are built when the test runs (a long suite would expire ones built at collection).
@pytest.mark.parametrize("make_token", [
    lambda: "not-a-jwt",
    lambda: "a.b.c",
    lambda: signed_token(exp=int(time.time()) - 600),
    lambda: signed_token(iss="https://auth.acme.example/"),
], ids=["not-a-jwt", "bad-segments", "expired", "stack-issuer"])
def test_the_rendered_viewer_function_rejects_bad_tokens(viewer: ViewerFunction, make_token: Callable[[], str]) -> None:
    result = read_function_result(viewer(viewer_event(viewer_request(authorization=f"Bearer {make_token()}"))))
    assert isinstance(result, EdgeResponse) and result.status == 401
    assert 'error="invalid_token"' in dict(result.headers)["www-authenticate"]


def test_the_rendered_viewer_function_passes_a_good_token_unchanged(viewer: ViewerFunction) -> None:
    request = viewer_request(authorization=f"Bearer {signed_token()}", accept="application/json")
    assert read_function_result(viewer(viewer_event(request))) == request


def origin_event(headers: list[tuple[str, str]]) -> dict:
    origin = OriginConfig("127.0.0.1", PORTS["us-east-1"], "http", 60, 5, {"x-mcp-edge-origin-secret": "s" * 32})
    return origin_request_event(method="POST", uri="/mcp", querystring="a=1", headers=headers, client_ip="10.0.0.1",
                                origin=origin, distribution_domain="127.0.0.1", distribution_id="E1", request_id="r")


@pytest.mark.parametrize(("country", "region"), [("JP", "ap-northeast-1"), ("DE", "eu-west-1"), ("SG", "ap-southeast-1"),
                                                 ("US", "us-east-1"), ("SE", "eu-west-1"), (None, "us-east-1")])
def test_the_rendered_router_picks_the_nearest_local_origin_and_keeps_the_origin_secret(
    router: RouterFunction, country: str | None, region: str
) -> None:
    headers = [("host", "127.0.0.1:8080"), ("x-mcp-edge-origin-secret", "forged")]
    if country:
        headers.append(("cloudfront-viewer-country", country))
    result = read_router_result(router(origin_event(headers)))
    assert isinstance(result, OriginRequest)
    assert result.url == f"http://127.0.0.1:{PORTS[region]}/mcp?a=1"
    sent = dict(result.headers)
    assert sent["host"] == f"127.0.0.1:{PORTS[region]}"
    # The distribution's custom header wins over a viewer's forged one, and only one is sent.
    assert [v for n, v in result.headers if n == "x-mcp-edge-origin-secret"] == ["s" * 32]


def test_a_router_response_is_sent_as_is() -> None:
    answering = RouterFunction(
        "def handler(event, context):\n"
        "    return {'status': '403', 'headers': {'content-type': [{'key': 'Content-Type', 'value': 'text/plain'}]},"
        " 'body': 'no'}\n"
    )
    assert read_router_result(answering(origin_event([]))) == EdgeResponse(403, [("content-type", "text/plain")], b"no")


_token_chars = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="&="),
                       min_size=1, max_size=12)


_header_names = st.from_regex(r"[a-z][a-z0-9-]{0,15}", fullmatch=True).filter(lambda n: n != "cookie")


_header_values = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=30)


@settings(max_examples=100, deadline=None)
@example(headers=[("__proto__", "x")], query=[("__proto__", "")])  # an object literal would eat these
@given(
    headers=st.lists(st.tuples(_header_names, _header_values), max_size=8),
    query=st.lists(st.tuples(_token_chars, st.one_of(st.just(""), _token_chars)), max_size=6),
)
def test_a_pass_through_function_gives_back_the_same_request(pass_through: ViewerFunction,
                                                             headers: list[tuple[str, str]],
                                                             query: list[tuple[str, str]]) -> None:
    """Multi-valued headers and query strings survive CloudFront's event shape (grouped by name)."""
    fn = pass_through
    request = ViewerRequest(method="GET", uri="/x", querystring=query, headers=headers)
    result = read_function_result(fn(viewer_event(request)))
    assert isinstance(result, ViewerRequest)

    def grouped(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for name, value in pairs:
            out.setdefault(name, []).append(value)
        return out

    assert grouped(result.headers) == grouped(headers)
    assert grouped(result.querystring) == grouped(query)
    assert parse_query(format_query(result.querystring)) == [(n, v) for n, v in result.querystring]
