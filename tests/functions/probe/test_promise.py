"""Direct targets signed with SigV4, and the platform's promise checked with every probe: a
forged token at the edge and an unsigned request at a Function URL are refused, or the
result says otherwise. Against the official SDK's server behind a loopback Function URL
(verifying SigV4 with botocore) or the edge's token check."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from functions.contract import PROBE_CHECK_HEADER, PROBE_TOKEN_HEADER
from functions.probe.errors import ProbeHttpError, ProbePromiseError
from functions.probe.promise import (
    BROKEN,
    CHECK_FORGED_TOKEN,
    CHECK_UNSIGNED,
    PASS,
    UNKNOWN,
    probe_check_proof,
    verdict,
)
from functions.probe.secrets_manager import Credentials
from functions.probe.sigv4 import FunctionUrlSigner
from tests.functions.probe.conftest import (
    ROLE_CREDENTIALS,
    Edge,
    FunctionUrl,
    Loopback,
    OAuthServer,
    legacy_only_wrapper,
    modern,
    probe,
    sdk_server,
    sigv4_problem,
    token_source,
)


def sdk() -> Any:
    return sdk_server().streamable_http_app(stateless_http=True, json_response=True)


@pytest.fixture
def function_url() -> Iterator[tuple[FunctionUrl, Loopback]]:
    url = FunctionUrl(sdk())
    with Loopback(url) as running:
        yield url, running


def claims(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    header, payload, _ = token.split(".")
    return tuple(json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4))) for p in (header, payload))  # type: ignore[return-value]


# --- SigV4 ------------------------------------------------------------------------------


def test_the_signer_signs_for_lambda_in_the_region_with_the_body_hash_as_botocore_verifies_it():
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
    url = "https://abc123.lambda-url.eu-west-1.on.aws/mcp"
    headers = dict(FunctionUrlSigner("eu-west-1", ROLE_CREDENTIALS)("POST", url, body))
    assert set(headers) == {"authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}
    signed = {**headers, "host": "abc123.lambda-url.eu-west-1.on.aws"}
    assert sigv4_problem("POST", url, signed, body, ROLE_CREDENTIALS, "eu-west-1") is None
    assert "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token," in headers["authorization"]
    # Anything changed on the way is refused: the body, the region, the key.
    assert sigv4_problem("POST", url, signed, body + b" ", ROLE_CREDENTIALS, "eu-west-1") is not None
    assert sigv4_problem("POST", url, signed, body, ROLE_CREDENTIALS, "us-east-1") is not None
    other = Credentials(ROLE_CREDENTIALS.access_key, "another-secret-key", ROLE_CREDENTIALS.token)
    assert sigv4_problem("POST", url, signed, body, other, "eu-west-1") == "signature does not match"


def test_a_direct_target_is_probed_signed_and_its_token_reaches_the_server_in_authorization(
        function_url, oauth: OAuthServer):
    url, running = function_url
    result = probe(running.url(), tokens=token_source(oauth), signed=True)
    assert result["status"] == "healthy" and result["toolCount"] == 3
    exchange = url.seen[:-1]
    assert exchange and all(problem is None for _, _, problem in exchange)
    # The token travels beside the signature (the adapter restores it), never instead of it.
    assert all(h["x-mcp-edge-authorization"].startswith("Bearer ey") for _, h, _ in exchange)
    assert all(h["authorization"].startswith("AWS4-HMAC-SHA256 ") for _, h, _ in exchange)


def test_a_direct_target_of_the_handshake_era_is_signed_too(oauth: OAuthServer):
    url = FunctionUrl(legacy_only_wrapper(sdk()))
    with Loopback(url) as running:
        result = probe(running.url(), tokens=token_source(oauth), signed=True)
    assert result["era"] == "legacy" and result["promise"]["status"] == PASS
    assert all(problem is None for _, _, problem in url.seen[:-1])


def test_a_signature_for_another_region_is_refused_with_403(oauth: OAuthServer):
    with Loopback(FunctionUrl(sdk(), region="ap-southeast-1")) as running, \
            pytest.raises(ProbeHttpError, match="HTTP 403"):
        probe(running.url(), tokens=token_source(oauth), signed=True, region="eu-west-1")


# --- the promise: unsigned requests to a Function URL ------------------------------------


def test_a_function_url_refusing_an_unsigned_request_passes_the_check(function_url, oauth: OAuthServer):
    url, running = function_url
    result = probe(running.url(), tokens=token_source(oauth), signed=True)
    method, headers, problem = url.seen[-1]
    assert problem == "no SigV4 Authorization header" and "x-amz-date" not in headers
    assert result["promise"] == {"check": CHECK_UNSIGNED, "status": PASS, "httpStatus": 403, "detail": None}


def test_a_function_url_answering_an_unsigned_request_breaks_the_promise(oauth: OAuthServer):
    with Loopback(FunctionUrl(sdk(), open=True)) as running:
        result = probe(running.url(), tokens=token_source(oauth), signed=True)
    assert result["status"] == "healthy"  # the server works; the lock does not
    promise = result["promise"]
    assert promise["status"] == BROKEN and promise["httpStatus"] == 200
    assert "without a signature" in promise["detail"]


def test_a_5xx_instead_of_the_refusal_is_unknown_not_broken(oauth: OAuthServer):
    with Loopback(FunctionUrl(sdk(), refusal_status=502)) as running:
        result = probe(running.url(), tokens=token_source(oauth), signed=True)
    assert result["status"] == "healthy"
    assert result["promise"]["status"] == UNKNOWN and result["promise"]["httpStatus"] == 502


# --- the promise: forged tokens at the edge -------------------------------------------------


def test_the_edge_refusing_a_forged_token_passes_the_check(oauth: OAuthServer):
    edge = Edge(sdk(), oauth)
    with Loopback(edge) as running:
        result = probe(running.url(), tokens=token_source(oauth), target="edge", pin="eu-west-1")
    assert result["status"] == "healthy"
    assert result["promise"] == {"check": CHECK_FORGED_TOKEN, "status": PASS, "httpStatus": 401, "detail": None}
    (real, real_refused), (forged, forged_refused) = edge.seen[0], edge.seen[-1]
    assert not real_refused and forged_refused
    # The forgery differs from the real token in its signature only: right iss, aud, exp, kid, alg.
    real_token, forged_token = real.removeprefix("Bearer "), forged.removeprefix("Bearer ")
    assert claims(forged_token) == claims(real_token)
    assert forged_token.rsplit(".", 1)[0] == real_token.rsplit(".", 1)[0] and forged_token != real_token


def test_the_forged_token_check_carries_the_real_token_beside_it_for_the_edges_metrics_only(oauth: OAuthServer):
    # The edge counts the check's 401 as the probes' by this header (edge/gate/handler.py probe_check).
    seen: list[str | None] = []

    class Recording(Edge):
        async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                seen.append(dict(scope["headers"]).get(PROBE_TOKEN_HEADER.encode(), b"").decode() or None)
            await super().__call__(scope, receive, send)

    edge = Recording(sdk(), oauth)
    with Loopback(edge) as running:
        result = probe(running.url(), tokens=token_source(oauth), target="edge", pin="eu-west-1")
    assert result["promise"]["status"] == PASS
    (real, _), (forged, _) = edge.seen[0], edge.seen[-1]
    # Only the forged-token check carries it, and it is the real token, not the forgery
    assert seen[-1] == real.removeprefix("Bearer ") != forged.removeprefix("Bearer ")
    assert seen[:-1] and all(value is None for value in seen[:-1])


def test_an_edge_answering_a_forged_token_breaks_the_promise(oauth: OAuthServer):
    with Loopback(Edge(sdk(), oauth, open=True)) as running:
        result = probe(running.url(), tokens=token_source(oauth), target="edge", pin="eu-west-1")
    assert result["promise"]["status"] == BROKEN and result["promise"]["httpStatus"] == 200
    assert "signed by another key" in result["promise"]["detail"]


def test_a_server_refusing_a_forged_token_itself_behind_an_open_edge_breaks_the_promise(oauth: OAuthServer):
    # The attack: the edge fails open, and the server verifies tokens itself, so the forged
    # token still gets a 401, but the server's, without the edge's mark.
    server_checking_tokens = Edge(sdk(), oauth, mark=None, proof=None)
    with Loopback(Edge(server_checking_tokens, oauth, open=True)) as running:
        result = probe(running.url(), tokens=token_source(oauth), target="edge", pin="eu-west-1")
    assert result["status"] == "healthy"
    promise = result["promise"]
    assert (promise["status"], promise["httpStatus"]) == (BROKEN, 401)
    assert f"without the edge's {PROBE_CHECK_HEADER} header" in promise["detail"]
    assert "did not come from the edge" in promise["detail"]
    assert server_checking_tokens.seen[-1][1], "the forged token reached the server, which refused it"


@pytest.mark.parametrize("proof", [None, "", "0" * 32, probe_check_proof("some other token")])
def test_a_marked_401_without_the_proof_for_the_probes_own_token_breaks_the_promise(oauth: OAuthServer, proof):
    # The refusal mark alone proves nothing (a server can send that header; on AWS a response
    # headers policy removes it from origin answers, but nothing documents what it does to the
    # edge's own): only the digest of the token no origin ever sees does.
    with Loopback(Edge(sdk(), oauth, mark="invalid-token", proof=proof)) as running:
        result = probe(running.url(), tokens=token_source(oauth), target="edge", pin="eu-west-1")
    assert (result["promise"]["status"], result["promise"]["httpStatus"]) == (BROKEN, 401)
    assert "did not come from the edge" in result["promise"]["detail"]


def test_the_proof_alone_passes_even_when_the_refusal_mark_is_stripped(oauth: OAuthServer):
    with Loopback(Edge(sdk(), oauth, mark=None)) as running:
        result = probe(running.url(), tokens=token_source(oauth), target="edge", pin="eu-west-1")
    assert result["promise"] == {"check": CHECK_FORGED_TOKEN, "status": PASS, "httpStatus": 401, "detail": None}


def test_the_edges_marked_refusal_with_another_status_proves_nothing_and_is_unknown(oauth: OAuthServer):
    # The edge answered (rate-limited the probe), but not to the forged token's signature.
    with Loopback(Edge(sdk(), oauth, status=429, mark="rate-limited")) as running:
        result = probe(running.url(), tokens=token_source(oauth), target="edge", pin="eu-west-1")
    assert (result["promise"]["status"], result["promise"]["httpStatus"]) == (UNKNOWN, 429)


def test_a_broken_promise_is_reported_even_when_the_probe_itself_fails(oauth: OAuthServer, scripted):
    # The edge lets anything through and the server fails tools/list: the failure record must
    # still say the promise is broken, not only that the target is down.
    async def half_broken(request: Request, body: dict[str, Any]) -> Response:
        if body.get("method") == "tools/list":
            return JSONResponse({"error": "boom"}, status_code=500)
        return await modern(request, body)

    server = scripted(half_broken)
    with pytest.raises(ProbePromiseError, match=r"edge@eu-west-1: a forged token .* HTTP 200.*ProbeHttpError.*HTTP 500"):
        probe(server.url(), tokens=token_source(oauth), target="edge", pin="eu-west-1", region="eu-west-1")


def test_a_failing_probe_with_the_promise_kept_reports_its_own_error(oauth: OAuthServer, scripted):
    async def down(request: Request, body: dict[str, Any]) -> Response:
        return JSONResponse({"error": "down"}, status_code=503)

    with pytest.raises(ProbeHttpError, match="HTTP 503"):
        probe(scripted(down).url(), tokens=token_source(oauth), target="edge", pin="eu-west-1")


def test_without_a_token_source_the_forged_token_check_is_unknown(scripted):
    result = probe(scripted(modern).url(), target="edge", pin="eu-west-1")
    assert result["promise"]["status"] == UNKNOWN and "no token to forge" in result["promise"]["detail"]


def test_an_opaque_token_cannot_be_forged_and_is_unknown(scripted):
    from functions.probe.event import parse_event
    from functions.probe.forge import forge
    from functions.probe.promise import check_promise
    from functions.probe.wire import Deadline, new_probe_client

    target = parse_event({"endpoint": scripted(modern).url(), "serverId": "s", "target": "edge",
                          "targetRegion": "eu-west-1", "pinRegion": "eu-west-1"})
    result = check_promise(target, new_probe_client, Deadline(5), era="modern",
                           forged_token=lambda: forge("not-a-jwt"), real_token="not-a-jwt")
    assert result["status"] == UNKNOWN and "not JWTs" in result["detail"]


@given(st.sampled_from([CHECK_FORGED_TOKEN, CHECK_UNSIGNED]), st.one_of(st.none(), st.integers(100, 599)),
       st.one_of(st.none(), st.sampled_from(["", " ", "invalid-token", "rate-limited"])))
def test_a_2xx_or_the_edges_401_unmarked_breaks_the_promise_and_only_the_expected_refusal_keeps_it(
        check: str, status: int | None, mark: str | None):
    result = verdict(check, status, mark)
    marked = bool(mark and mark.strip())
    if status is not None and 200 <= status < 300:
        assert result == BROKEN
    elif status == {CHECK_FORGED_TOKEN: 401, CHECK_UNSIGNED: 403}[check]:
        # The edge's refusal must carry its mark; the Function URL's own 403 carries none.
        assert result == (PASS if marked or check == CHECK_UNSIGNED else BROKEN)
    else:
        assert result == UNKNOWN
