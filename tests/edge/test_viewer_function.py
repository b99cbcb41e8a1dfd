"""The viewer-request CloudFront Function, executed in a JS engine exactly as the
program uploads it (the ``code`` input of ``aws:cloudfront/function:Function``), on
CloudFront-shaped viewer-request events."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.jwt_rules import ALLOWED_JWT_ALGORITHMS
from devkit.mock_program import run_program
from devkit.shipped import (
    ViewerFunction,
    alt_program,
    b64url,
    make_token,
    viewer_event,
    viewer_function_resource,
)
from edge.regions import AWS_REGIONS
from edge.viewer_function import (
    MAX_CODE_BYTES,
    VIEWER_FUNCTION_TEMPLATE,
    ViewerFunctionSettings,
    ViewerFunctionTooLargeError,
    render_viewer_function,
)
from functions.contract import REFUSAL_HEADER
from stack_config.loading import load_from_stack_file

CONFIG = load_from_stack_file("prod")
ISSUER = CONFIG.auth.issuer
AUDIENCE = CONFIG.auth.audience
LEEWAY = CONFIG.auth.leeway_s
METADATA_URL = "https://mcp.acme.example/.well-known/oauth-protected-resource/mcp"
CHALLENGE = f'Bearer resource_metadata="{METADATA_URL}"'


def claims(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "iss": ISSUER, "aud": AUDIENCE, "sub": "client-1", "exp": int(time.time()) + 600, "iat": int(time.time()),
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not ...}


def valid_token(**overrides: Any) -> str:
    return make_token({"alg": "RS256", "typ": "at+jwt", "kid": "k1"}, claims(**overrides))


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def assert_passes(viewer: ViewerFunction, event: dict[str, Any]) -> None:
    assert viewer.handler(event) == event["request"], "the request must pass unchanged"


def assert_rejected(result: dict[str, Any], *, error: str | None, challenge_base: str = CHALLENGE) -> None:
    assert result["statusCode"] == 401
    assert result["statusDescription"] == "Unauthorized"
    headers = result["headers"]
    challenge = headers["www-authenticate"]["value"]
    if error is None:
        assert challenge == challenge_base
    else:
        assert challenge.startswith(f'{challenge_base}, error="{error}", error_description="')
    assert headers["cache-control"]["value"] == "no-store"
    assert headers["content-type"]["value"] == "application/json"
    # The edge's refusal mark, which no origin response can carry (the response headers policy).
    assert headers[REFUSAL_HEADER]["value"] == ("invalid-token" if error else "no-token")
    body = json.loads(result["body"]["data"])
    assert result["body"]["encoding"] == "text"
    assert body["error"] == (error or "unauthorized") and body["error_description"]


# --- the code the program ships ------------------------------------------------------


def test_the_shipped_code_is_the_rendering_of_the_stack_config(prod, viewer):
    assert viewer.code == render_viewer_function(CONFIG.viewer_function_settings())
    assert viewer_function_resource(prod).inputs["runtime"] == "cloudfront-js-2.0"


def test_the_prod_stacks_code_fits_in_5_kb(viewer):
    assert len(viewer.code.encode("utf-8")) <= 5 * 1024 < MAX_CODE_BYTES


def test_even_the_largest_plausible_config_stays_under_the_limit():
    settings_ = ViewerFunctionSettings(
        mcp_path="/" + "p" * 60, issuer="https://" + "i" * 240 + ".example/", audience="https://" + "a" * 240,
        algorithms=ALLOWED_JWT_ALGORITHMS, leeway_s=300, regions=tuple(AWS_REGIONS),
        public_host="mcp." + "h" * 200 + ".example",
    )
    assert len(render_viewer_function(settings_).encode()) < 8 * 1024


def test_rendering_refuses_code_over_the_limit_alg_none_and_unknown_or_no_regions():
    huge = ViewerFunctionSettings("/mcp", "https://i/" + "x" * 8000, "aud", ("RS256",), 30, ("us-east-1",))
    with pytest.raises(ViewerFunctionTooLargeError, match="10240-byte limit"):
        render_viewer_function(huge)
    with pytest.raises(ValueError, match="'none'"):
        render_viewer_function(ViewerFunctionSettings("/mcp", "https://i/", "aud", ("RS256", "none"), 30, ("us-east-1",)))
    with pytest.raises(ValueError, match="deployed regions"):
        render_viewer_function(ViewerFunctionSettings("/mcp", "https://i/", "aud", ("RS256",), 30))
    with pytest.raises(ValueError, match="mars-north-1"):
        render_viewer_function(ViewerFunctionSettings("/mcp", "https://i/", "aud", ("RS256",), 30, ("mars-north-1",)))


def test_code_uses_only_what_cloudfront_js_2_0_documents(viewer):
    # The cloudfront module on the first line (the only import), an async handler for
    # the KeyValueStore read; no atob/btoa (not in cloudfront-js-2.0), no require or network.
    lines = viewer.code.splitlines()
    assert lines[0] == "import cf from 'cloudfront';"
    assert "import " not in "\n".join(lines[1:])
    assert "async function handler(event)" in viewer.code and "cf.kvs()" in viewer.code
    for name in ("atob", "btoa", "require(", "fetch(", ".then(", "Promise."):
        assert name not in viewer.code


def test_the_template_keeps_comments_on_lines_of_their_own():
    # minify() drops whole comment lines only; a trailing comment would ship.
    for number, line in enumerate(VIEWER_FUNCTION_TEMPLATE.read_text().splitlines(), 1):
        code = line.split("//")[0]
        assert "//" not in line or not code.strip() or code.count("'") % 2 == 1, f"line {number}: {line}"


# --- passing requests ------------------------------------------------------------------


def test_a_valid_token_passes(viewer):
    assert_passes(viewer, viewer_event(headers=bearer(valid_token())))


@pytest.mark.parametrize(
    "variant",
    [
        # Callables: times are taken when the test runs, not when it is collected.
        pytest.param(lambda now: {"aud": ["https://other.example", AUDIENCE]}, id="audience-in-a-list"),
        pytest.param(lambda now: {"exp": now - LEEWAY // 2}, id="expired-within-leeway"),
        pytest.param(lambda now: {"nbf": now + LEEWAY // 2}, id="not-before-within-leeway"),
        pytest.param(lambda now: {"exp": now + 60.5}, id="fractional-exp"),
    ],
)
def test_tokens_the_origin_would_accept_pass(viewer, variant):
    assert_passes(viewer, viewer_event(headers=bearer(valid_token(**variant(int(time.time()))))))


def test_the_one_canonical_spelling_passes(viewer):
    assert_passes(viewer, viewer_event(headers={"authorization": f"Bearer {valid_token()}"}))


def test_every_configured_algorithm_passes_and_es256_too(viewer):
    for alg in CONFIG.auth.algorithms:
        token = make_token({"alg": alg}, claims())
        assert_passes(viewer, viewer_event(headers=bearer(token)))


def test_cors_preflight_passes_without_a_token(viewer, browser_viewer):
    assert_passes(viewer, viewer_event(method="OPTIONS"))
    assert_passes(browser_viewer, viewer_event(method="OPTIONS", headers={"origin": "https://app.example"}))


@pytest.mark.parametrize(
    "uri",
    ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource",
     "/.well-known/oauth-authorization-server", "/", "/healthz", "/mcpx", "/other/mcp"],
)
def test_paths_other_than_the_mcp_path_pass_without_a_token(viewer, uri):
    assert_passes(viewer, viewer_event(uri=uri, method="GET"))


@pytest.mark.parametrize("version", ["2026-07-28", "2025-06-18", "1999-01-01", "garbage", ""])
def test_the_protocol_version_never_causes_a_rejection(viewer, version):
    # Version negotiation is the origin's: rejecting here would silently downgrade clients.
    headers = {**bearer(valid_token()), "mcp-protocol-version": version, "mcp-method": "server/discover"}
    assert_passes(viewer, viewer_event(headers=headers))


# --- rejected requests -------------------------------------------------------------------


@pytest.mark.parametrize("uri", ["/mcp", "/mcp/", "/mcp/sub", "//mcp", "/%6Dcp", "/mcp%2Fx"])
def test_a_request_without_a_token_to_the_mcp_path_is_challenged(viewer, uri):
    assert_rejected(viewer.handler(viewer_event(uri=uri)), error=None)


def test_a_non_bearer_authorization_is_challenged_without_an_error_code(viewer):
    result = viewer.handler(viewer_event(headers={"authorization": "Basic dXNlcjpwYXNz"}))
    assert_rejected(result, error=None)


def _segments(token: str) -> list[str]:
    return token.split(".")


# Built when a test runs (times are relative to then), not when tests are collected.
MALFORMED: dict[str, Callable[[int], str]] = {
    "empty-bearer": lambda now: "",
    "two-segments": lambda now: ".".join(_segments(valid_token())[:2]),
    "four-segments": lambda now: valid_token() + ".extra",
    "empty-signature": lambda now: ".".join(_segments(valid_token())[:2]) + ".",
    "empty-header": lambda now: "." + ".".join(_segments(valid_token())[1:]),
    "padding-characters": lambda now: valid_token().replace(".", "=.", 1),
    "standard-base64-characters": lambda now: "a+b/" + valid_token(),
    "impossible-base64-length": lambda now: "a" + valid_token(),
    "header-not-json": lambda now: b64url(b"not json") + "." + _segments(valid_token())[1] + ".sig",
    "header-is-an-array": lambda now: make_token(["RS256"], claims()),
    "payload-not-json": lambda now: _segments(valid_token())[0] + "." + b64url(b"{nope") + ".sig",
    "payload-is-a-string": lambda now: make_token({"alg": "RS256"}, "claims"),
    "payload-invalid-utf8": lambda now: _segments(valid_token())[0] + "." + b64url(b'{"iss":"\xff"}') + ".sig",
    "payload-overlong-utf8": lambda now: _segments(valid_token())[0] + "." + b64url(b'{"a":"\xc0\xaf"}') + ".sig",
    "payload-utf8-surrogate": lambda now: _segments(valid_token())[0] + "." + b64url(b'{"a":"\xed\xa0\x80"}') + ".sig",
    "alg-none": lambda now: make_token({"alg": "none"}, claims(), signature="x"),
    "alg-None": lambda now: make_token({"alg": "None"}, claims(), signature="x"),
    "alg-HS256": lambda now: make_token({"alg": "HS256"}, claims()),
    "alg-not-allowed-here": lambda now: make_token({"alg": "PS512"}, claims()),
    "alg-missing": lambda now: make_token({"typ": "JWT"}, claims()),
    "alg-not-a-string": lambda now: make_token({"alg": ["RS256"]}, claims()),
    "exp-missing": lambda now: valid_token(exp=...),
    "exp-a-string": lambda now: valid_token(exp=str(now + 600)),
    "exp-boolean": lambda now: valid_token(exp=True),
    "expired": lambda now: valid_token(exp=now - LEEWAY - 60),
    "nbf-in-the-future": lambda now: valid_token(nbf=now + LEEWAY + 600),
    "nbf-a-string": lambda now: valid_token(nbf="soon"),
    "issuer-wrong": lambda now: valid_token(iss="https://evil.example/"),
    "issuer-missing": lambda now: valid_token(iss=...),
    "issuer-without-trailing-slash": lambda now: valid_token(iss=ISSUER.rstrip("/")),
    "audience-wrong": lambda now: valid_token(aud="https://other.example/mcp"),
    "audience-missing": lambda now: valid_token(aud=...),
    "audience-list-without-ours": lambda now: valid_token(aud=["https://a.example", "https://b.example"]),
}


@pytest.mark.parametrize("make", MALFORMED.values(), ids=MALFORMED.keys())
def test_each_malformed_or_unacceptable_token_is_401_invalid_token(viewer, make):
    token = make(int(time.time()))
    result = viewer.handler(viewer_event(headers={"authorization": f"Bearer {token}"}))
    assert_rejected(result, error="invalid_token")


# Each would be a per-token rate key of its own to a rule keyed on the raw header (WAF's key
# folds them too, edge/firewall_rules.py): refused here, so none reaches an origin.
RESPELLINGS = {
    "lower-case-scheme": "bearer {}", "upper-case-scheme": "BEARER {}", "mixed-case-scheme": "BeArEr {}",
    "two-spaces": "Bearer  {}", "tab": "Bearer\t{}", "space-and-tab": "Bearer \t{}", "trailing-space": "Bearer {} ",
    "trailing-tab": "Bearer {}\t", "leading-space": " Bearer {}",
}


@pytest.mark.parametrize("spelling", RESPELLINGS.values(), ids=RESPELLINGS.keys())
def test_every_other_spelling_of_a_valid_token_is_401_naming_the_one_spelling(viewer, spelling):
    result = viewer.handler(viewer_event(headers={"authorization": spelling.format(valid_token())}))
    if spelling.startswith(" "):
        assert_rejected(result, error=None)  # not even the Bearer scheme where it must start
    else:
        assert_rejected(result, error="invalid_token")
        assert json.loads(result["body"]["data"])["error_description"] == \
            "Authorization must be exactly Bearer, one space, the token"


def test_a_respelled_non_jwt_is_refused_for_its_spelling_and_a_canonical_one_for_its_shape(viewer):
    respelled = viewer.handler(viewer_event(headers={"authorization": "bearer not-a-jwt"}))
    canonical = viewer.handler(viewer_event(headers={"authorization": "Bearer not-a-jwt"}))
    assert "one space" in json.loads(respelled["body"]["data"])["error_description"]
    assert "not a JWT" in json.loads(canonical["body"]["data"])["error_description"]


def test_two_authorization_headers_are_rejected(viewer):
    event = viewer_event(headers=bearer(valid_token()))
    token = event["request"]["headers"]["authorization"]["value"]
    event["request"]["headers"]["authorization"]["multiValue"] = [{"value": token}, {"value": "Bearer other"}]
    assert_rejected(viewer.handler(event), error="invalid_token")


def test_a_rejection_readable_by_browsers_carries_cors_headers(browser_viewer):
    result = browser_viewer.handler(viewer_event(headers={"origin": "https://app.example"}))
    assert_rejected(result, error=None)
    assert result["headers"]["access-control-allow-origin"]["value"] == "*"
    assert result["headers"]["access-control-expose-headers"]["value"] == "www-authenticate"


def test_the_challenge_names_the_custom_domain_whatever_the_viewer_host(viewer):
    result = viewer.handler(viewer_event(host="d111111abcdef8.cloudfront.net"))
    assert_rejected(result, error=None, challenge_base=CHALLENGE)


# --- browser origins (the MCP transport spec: validate Origin, 403 for an invalid one) --

ALLOWED_ORIGINS = ["https://app.example", "http://localhost:6274", "null"]


@pytest.fixture(scope="module")
def browser_viewer():
    """The CloudFront Function of a stack that allows browser origins, as the program uploads it."""
    run = run_program("prod", config_overrides={"allowedOrigins": ALLOWED_ORIGINS})
    function = ViewerFunction(viewer_function_resource(run).inputs["code"])
    yield function
    function.close()


def assert_origin_refused(result: dict[str, Any]) -> None:
    assert result["statusCode"] == 403 and result["statusDescription"] == "Forbidden", result
    assert result["headers"] == {"cache-control": {"value": "no-store"}, "content-type": {"value": "application/json"},
                                 REFUSAL_HEADER: {"value": "origin-not-allowed"}}
    assert result["body"]["encoding"] == "text"
    assert json.loads(result["body"]["data"]) == {
        "jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "Origin not allowed"}}


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE", "OPTIONS"])
@pytest.mark.parametrize("origin", ["https://app.example", "null", "http://127.0.0.1:8400", ""])
def test_by_default_every_browser_origin_gets_403_on_the_mcp_path_even_with_a_valid_token(viewer, method, origin):
    headers = {**bearer(valid_token()), "origin": origin}
    assert_origin_refused(viewer.handler(viewer_event(method=method, headers=headers)))


@pytest.mark.parametrize("uri", ["/mcp", "/mcp/sub", "//mcp", "/%6Dcp"])
def test_the_origin_is_checked_on_every_spelling_of_the_mcp_path(viewer, uri):
    assert_origin_refused(viewer.handler(viewer_event(uri=uri, headers={"origin": "https://evil.example"})))


@pytest.mark.parametrize("uri", ["/.well-known/oauth-protected-resource/mcp", "/healthz"])
def test_paths_other_than_the_mcp_path_are_not_origin_checked(viewer, uri):
    assert_passes(viewer, viewer_event(uri=uri, method="GET", headers={"origin": "https://evil.example"}))


def test_a_request_without_origin_is_not_a_browsers_and_passes(viewer):
    assert_passes(viewer, viewer_event(headers=bearer(valid_token())))


@pytest.mark.parametrize("host", ["d111111abcdef8.cloudfront.net", "MCP.acme.example"])
def test_the_requests_own_origin_passes_without_being_listed(viewer, host):
    # A page of the distribution itself (CloudFront answers only its names); the scheme must match too.
    origin = "https://" + host.lower()
    event = viewer_event(host=host, headers={**bearer(valid_token()), "origin": origin})
    # It passes without its Origin: the origin behind sees the Function URL's Host and would
    # take a same-origin page for a foreign one.
    passed = viewer.handler(event)
    assert "origin" not in passed["headers"]
    assert passed == {**event["request"], "headers": {k: v for k, v in event["request"]["headers"].items()
                                                      if k != "origin"}}
    assert_origin_refused(viewer.handler(viewer_event(host=host, headers={"origin": "http://" + host.lower()})))
    assert_origin_refused(viewer.handler(viewer_event(host="evil.example", headers={"origin": origin})))


@pytest.mark.parametrize("origin", ["https://app.example", " https://app.example\t", "http://localhost:6274", "null"])
def test_a_listed_origin_passes_trimmed_of_surrounding_whitespace(browser_viewer, origin):
    # Unchanged, Origin included: a cross-origin page's CORS answer is the server's to give.
    assert_passes(browser_viewer, viewer_event(headers={**bearer(valid_token()), "origin": origin}))


@pytest.mark.parametrize("origin", ["https://APP.example", "https://app.example:443", "https://app.example/",
                                    "https://app.example.evil.example", "http://app.example", "http://localhost:6275",
                                    "https://evil.example", "Null", "https://app.example, https://evil.example"])
def test_an_origin_not_listed_exactly_gets_403(browser_viewer, origin):
    assert_origin_refused(browser_viewer.handler(viewer_event(headers={**bearer(valid_token()), "origin": origin})))


def test_two_origin_headers_get_403_even_when_both_are_listed(browser_viewer):
    event = viewer_event(headers={**bearer(valid_token()), "origin": "https://app.example"})
    event["request"]["headers"]["origin"]["multiValue"] = [{"value": "https://app.example"}, {"value": "null"}]
    assert_origin_refused(browser_viewer.handler(event))


def test_the_local_edges_own_origin_passes_as_the_conformance_suite_sends_it():
    # Host and Origin both name the local edge (http): the suite's "valid localhost" request.
    settings_ = ViewerFunctionSettings("/mcp", ISSUER, AUDIENCE, ("RS256",), 30, ("us-east-1",), "127.0.0.1:8400", "http")
    function = ViewerFunction(render_viewer_function(settings_))
    try:
        for host in ("127.0.0.1:8400", "localhost:8400"):
            result = function.handler(viewer_event(host=host, headers={"origin": f"http://{host}"}))
            assert result["statusCode"] == 401, result  # past the Origin check, on to the token
        assert_origin_refused(function.handler(viewer_event(host="127.0.0.1:8400",
                                                            headers={"origin": "http://localhost:8400"})))
    finally:
        function.close()


def test_the_origin_is_checked_before_the_token(browser_viewer, viewer):
    # A page that may not call the server learns nothing about its tokens (no challenge, no CORS).
    assert_origin_refused(viewer.handler(viewer_event(headers={"origin": "https://app.example"})))
    assert browser_viewer.handler(viewer_event(headers={"origin": "https://app.example"}))["statusCode"] == 401


@pytest.mark.parametrize("origin", ["*", "https://app.example/", "https://APP.example", "https://app.example:443",
                                    "http://app.example:80", "ftp://app.example", "app.example", "https://a b"])
def test_an_allowed_origin_that_browsers_never_send_is_refused_before_rendering(origin):
    with pytest.raises(ValueError, match="allowed origins"):
        render_viewer_function(ViewerFunctionSettings("/mcp", ISSUER, AUDIENCE, ("RS256",), 30, ("us-east-1",),
                                                      allowed_origins=(origin,)))


# --- no custom domain: the public host comes from the viewer's Host ------------------


@pytest.fixture(scope="module")
def viewer_without_domain():
    function = ViewerFunction(viewer_function_resource(alt_program()).inputs["code"])
    yield function
    function.close()


def test_without_a_custom_domain_the_challenge_uses_the_viewer_host(viewer_without_domain):
    result = viewer_without_domain.handler(viewer_event(host="d3c47efdc3cafe.cloudfront.net"))
    metadata = "https://d3c47efdc3cafe.cloudfront.net/.well-known/oauth-protected-resource/mcp"
    assert_rejected(result, error=None, challenge_base=f'Bearer resource_metadata="{metadata}"')


@pytest.mark.parametrize("host", ['evil.example", error="x', "a b", "", "host/path"])
def test_a_host_header_that_is_not_a_host_name_never_reaches_the_challenge(viewer_without_domain, host):
    result = viewer_without_domain.handler(viewer_event(host=host))
    assert result["statusCode"] == 401
    assert result["headers"]["www-authenticate"]["value"] == "Bearer"


def test_a_local_edge_renders_an_http_metadata_url():
    settings_ = ViewerFunctionSettings("/mcp", ISSUER, AUDIENCE, ("RS256",), 30, ("us-east-1",), "127.0.0.1:8443", "http")
    function = ViewerFunction(render_viewer_function(settings_))
    try:
        result = function.handler(viewer_event(host="ignored"))
        assert result["headers"]["www-authenticate"]["value"] == (
            'Bearer resource_metadata="http://127.0.0.1:8443/.well-known/oauth-protected-resource/mcp"'
        )
    finally:
        function.close()


# --- property-based: the code never throws, and decides as the rules say -----------------

header_names = st.sampled_from(["authorization", "host", "origin", "mcp-protocol-version", "content-type", "x-other"])
header_values = st.one_of(st.text(max_size=80), st.text(alphabet="AZaz09-_.= \t/+", max_size=200))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
claim_values = {
    "alg": st.one_of(st.sampled_from(["RS256", "ES256", "HS256", "none", "NONE", "PS256", ""]), json_values),
    "iss": st.one_of(st.just(ISSUER), json_values),
    "aud": st.one_of(st.just(AUDIENCE), st.lists(st.sampled_from([AUDIENCE, "x"]), max_size=3), json_values),
    # Offsets stay clear of the leeway boundary, so the test clock and the engine's agree.
    "exp": st.one_of(st.sampled_from([-10**6, -LEEWAY - 120, -LEEWAY + 20, 300, 10**8]), json_values),
    "nbf": st.one_of(st.sampled_from([-600, LEEWAY - 20, LEEWAY + 120]), json_values),
}


@st.composite
def jwt_like(draw: st.DrawFn) -> tuple[Any, Any]:
    """A valid token's header and claims, each field kept, dropped or replaced."""
    now = int(time.time())
    header: dict[str, Any] = {"alg": draw(st.sampled_from(CONFIG.auth.algorithms)), "typ": "JWT"}
    payload: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "exp": now + 600}
    if draw(st.booleans()):
        payload["nbf"] = now - 60
    for name, strategy in claim_values.items():
        target = header if name == "alg" else payload
        fate = draw(st.sampled_from(["keep", "keep", "keep", "drop", "replace"]))
        if fate == "drop":
            target.pop(name, None)
        elif fate == "replace":
            value = draw(strategy)
            if name in ("exp", "nbf") and isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**9:
                value = now + value  # an offset from now
            target[name] = value
    return header, payload


def oracle_accepts(header: Any, payload: Any) -> bool:
    """The rules, restated in Python from their description (docs/architecture.md), not from the JS."""
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    now = time.time()
    if not isinstance(header, dict) or not isinstance(payload, dict):
        return False
    if header.get("alg") not in CONFIG.auth.algorithms:
        return False
    exp: Any = payload.get("exp")
    nbf: Any = payload.get("nbf")
    if not number(exp) or exp + LEEWAY <= now:
        return False
    if "nbf" in payload and (not number(nbf) or nbf - LEEWAY > now):
        return False
    aud = payload.get("aud")
    return payload.get("iss") == ISSUER and (aud == AUDIENCE or (isinstance(aud, list) and AUDIENCE in aud))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jwt_like())
def test_decisions_on_arbitrary_claims_match_the_rules(viewer, token_parts):
    header, payload = token_parts
    token = make_token(header, payload)
    result = viewer.check(viewer_event(headers=bearer(token))["request"])
    accepted = "statusCode" not in result
    assert accepted == oracle_accepts(header, payload), (header, payload, result)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    uri=st.one_of(st.sampled_from(["/mcp", "/mcp/x", "/.well-known/x", "/"]), st.text(max_size=40)),
    method=st.sampled_from(["GET", "POST", "DELETE", "OPTIONS", "PUT", "PATCH", "HEAD"]),
    headers=st.dictionaries(header_names, header_values, max_size=5),
    multi=st.booleans(),
)
def test_arbitrary_requests_never_make_the_function_throw(viewer, uri, method, headers, multi):
    event = viewer_event(uri=uri, method=method)
    request = event["request"]
    request["headers"] = {name: {"value": value} for name, value in headers.items()}
    if multi and "authorization" in headers:
        request["headers"]["authorization"]["multiValue"] = [{"value": headers["authorization"]}, {"value": "x"}]
    result = viewer.check(request)  # raises if the code throws: no safety net here
    if "statusCode" in result and "origin" in headers and result["statusCode"] == 403:
        assert json.loads(result["body"]["data"])["error"]["code"] == -32000  # prod allows no browser origin
    elif "statusCode" in result:
        assert result["statusCode"] == 401
        error = r'error="invalid_token", error_description="[^"\\]+"'
        assert re.fullmatch(rf"{re.escape(CHALLENGE)}(, {error})?", result["headers"]["www-authenticate"]["value"])
    else:
        assert result == request


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(segments=st.lists(st.one_of(st.text(max_size=30), st.binary(max_size=40).map(b64url)), min_size=0, max_size=5))
def test_arbitrary_tokens_never_make_the_function_throw(viewer, segments):
    request = viewer_event(headers=bearer(".".join(segments)))["request"]
    result = viewer.check(request)
    assert result == request or result["statusCode"] == 401


# --- the challenge names the stack's scopes ------------------------------------------------

SCOPES = ["mcp:tools", "mcp:read"]


@pytest.fixture(scope="module")
def scoped_viewer():
    """The CloudFront Function of a stack that advertises scopes, as the program uploads it."""
    run = run_program("prod", config_overrides={"authScopes": SCOPES})
    function = ViewerFunction(viewer_function_resource(run).inputs["code"])
    yield function
    function.close()


@pytest.mark.parametrize("authorization, error", [
    (None, None),
    ("Bearer not-a-jwt", "invalid_token"),
])
def test_a_401_names_the_scopes_the_stack_advertises_for_clients_to_ask_for(scoped_viewer, authorization, error):
    # MCP authorization (2025-11-25 and later): servers SHOULD name the scopes in the
    # challenge, and clients use them before the metadata's scopes_supported.
    headers = {"authorization": authorization} if authorization else {}
    result = scoped_viewer.handler(viewer_event(headers=headers))
    assert result["statusCode"] == 401
    challenge = result["headers"]["www-authenticate"]["value"]
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    assert challenge.startswith("Bearer ") and params["scope"] == " ".join(SCOPES)
    assert params.get("error") == error and "resource_metadata" in params


def test_without_scopes_the_challenge_names_none(viewer):
    assert "scope=" not in viewer.handler(viewer_event())["headers"]["www-authenticate"]["value"]


@pytest.mark.parametrize("scope", ['a"b', "a b", "a\\b", "", "é"])
def test_a_scope_that_is_not_a_scope_token_is_refused_before_rendering(scope):
    with pytest.raises(ValueError, match="scope token"):
        render_viewer_function(ViewerFunctionSettings("/mcp", ISSUER, AUDIENCE, ("RS256",), 30, ("us-east-1",),
                                                      scopes=(scope,)))
