"""Tokens at the local edge: the challenge leads to the protected resource metadata, which is served."""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from pathlib import Path

import httpx
import jwt
import pytest

from functions.contract import REFUSAL_HEADER
from local.client import token_for
from local.oauth.issuer import load_private_key, sign_token
from local.plan import LocalPlan
from tests.e2e.server_tools import forged_token, forwarded_count, marked

pytestmark = pytest.mark.e2e

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _post(plan: LocalPlan, token: str | None) -> httpx.Response:
    headers = dict(HEADERS)
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    return httpx.post(plan.mcp_url, json=INITIALIZE, headers=headers, timeout=30)


def _metadata_url(response: httpx.Response) -> str:
    challenge = response.headers["www-authenticate"]
    match = re.search(r'resource_metadata="([^"]+)"', challenge)
    assert challenge.startswith("Bearer") and match, challenge
    return match.group(1)


def _expired_token(plan: LocalPlan) -> str:
    key = load_private_key(Path(plan.issuer.key_file))
    # Expired beyond the edge's and the origin's leeway (30 s), otherwise genuine.
    return sign_token(key, issuer=plan.issuer.issuer, audience=plan.issuer.audience, client_id="local-dev",
                      lifetime_s=-600, scope="mcp")


def _forged_token(plan: LocalPlan) -> str:
    """Well-formed, current, right issuer and audience, but signed by someone else's key."""
    genuine = token_for(plan)
    header, payload, _ = genuine.split(".")
    signature = base64.urlsafe_b64encode(b"\x00" * 256).rstrip(b"=").decode()
    return f"{header}.{payload}.{signature}"


@pytest.mark.parametrize("make_token", [
    lambda plan: None,
    lambda plan: "not-a-jwt",
    lambda plan: "e30.e30.e30",
    _expired_token,
    _forged_token,
], ids=["no-token", "malformed", "empty-claims", "expired", "bad-signature"])
def test_a_bad_token_gets_401_whose_challenge_leads_to_served_metadata(plan: LocalPlan, make_token) -> None:  # type: ignore[no-untyped-def]
    response = _post(plan, make_token(plan))
    assert response.status_code == 401, response.text
    url = _metadata_url(response)
    assert url == f"{plan.edge_url}/.well-known/oauth-protected-resource{plan.mcp_path}"
    metadata = httpx.get(url, timeout=30)  # no token: the metadata must be public
    assert metadata.status_code == 200
    document = metadata.json()
    assert document["resource"] == plan.mcp_url
    assert plan.issuer.issuer in document["authorization_servers"]
    # ... and the issuer it names serves its metadata, which leads to the token endpoint.
    issuer_meta = httpx.get(plan.issuer.base_url + "/.well-known/oauth-authorization-server", timeout=30).json()
    assert issuer_meta["token_endpoint"] == plan.issuer.token_url


def test_expired_and_malformed_tokens_never_reach_an_origin(plan: LocalPlan) -> None:
    for token in ("not-a-jwt", _expired_token(plan)):
        response = _post(plan, token)
        assert response.status_code == 401
        assert "x-mcp-edge-served-region" not in response.headers  # answered by the viewer function
        assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_a_good_token_is_accepted(plan: LocalPlan) -> None:
    token = token_for(plan)
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["aud"] == plan.mcp_url and claims["exp"] > time.time()
    response = _post(plan, token)
    assert response.status_code == 200, response.text
    body = response.json() if response.headers["content-type"].startswith("application/json") else json.loads(
        response.text.split("data: ", 1)[1])
    assert body["result"]["serverInfo"]["name"]  # the stack's server answered, whatever it calls itself


def test_answers_are_dated_once_and_the_edges_own_are_signed_cloudfront(plan: LocalPlan) -> None:
    # What the origin answered goes on with the origin's Date (the edge's server adds none
    # of its own, which made two); what the edge answers itself carries CloudFront's.
    forwarded, own = _post(plan, token_for(plan)), _post(plan, None)
    assert forwarded.status_code == 200 and own.status_code == 401
    for response, server in ((forwarded, None), (own, "CloudFront")):
        names = [name.lower() for name, _ in response.headers.multi_items()]
        assert names.count("date") == 1, response.headers
        assert response.headers.get("server") == server, response.headers


# --- the edge verifies, the origins are locked by IAM ----------------------------------------------

TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def test_a_forged_signature_gets_401_at_the_edge_and_never_reaches_an_origin(plan: LocalPlan) -> None:
    marker = uuid.uuid4().hex
    response = httpx.post(plan.mcp_url, json=INITIALIZE, timeout=30,
                          headers={**HEADERS, **marked(marker), "authorization": f"Bearer {forged_token(plan)}"})
    assert response.status_code == 401, response.text
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    assert response.headers.get(REFUSAL_HEADER), "the edge marks its own refusal (what the probes require)"
    # The same request with the genuine token is let through, and counted.
    genuine = uuid.uuid4().hex
    httpx.post(plan.mcp_url, json=INITIALIZE, timeout=30,
               headers={**HEADERS, **marked(genuine), "authorization": f"Bearer {token_for(plan)}"})
    time.sleep(0.5)  # a line the URL would have written is in its log by now
    assert forwarded_count(plan, genuine) == 1
    assert forwarded_count(plan, marker) == 0


def test_a_request_straight_to_an_origins_function_url_without_a_valid_signature_gets_403(plan: LocalPlan) -> None:
    marker = uuid.uuid4().hex
    token = token_for(plan)
    for region, port in plan.ports.function_urls.items():
        url = f"http://127.0.0.1:{port}{plan.mcp_path}"
        unsigned = httpx.post(url, json=TOOLS_LIST, headers={**HEADERS, **marked(marker),
                                                             "authorization": f"Bearer {token}"}, timeout=30)
        assert unsigned.status_code == 403, (region, unsigned.text)
        assert unsigned.json() == {"Message": "Forbidden"}
        forged = httpx.post(url, json=TOOLS_LIST, timeout=30, headers={
            **HEADERS, **marked(marker), "x-amz-date": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
            "x-amz-content-sha256": "0" * 64,
            "authorization": f"AWS4-HMAC-SHA256 Credential=testing/{time.strftime('%Y%m%d', time.gmtime())}/"
                             f"{region}/lambda/aws4_request, SignedHeaders=host;x-amz-date, Signature={'0' * 64}"})
        assert forged.status_code == 403, (region, forged.text)
    time.sleep(0.5)
    assert forwarded_count(plan, marker) == 0


# --- only MCP through the whole local edge (the program's viewer function, gate and policies) -----------


def _raw(plan: LocalPlan, method: str, target: str, headers: dict[str, str], body: bytes = b"") -> httpx.Response:
    """A request whose target goes out byte for byte (httpx would resolve ``/./`` and ``/../``)."""
    import http.client

    host, port = plan.edge_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request(method, target, body=body or None, headers=headers)
        answer = connection.getresponse()
        return httpx.Response(answer.status, headers=answer.getheaders(), content=answer.read())
    finally:
        connection.close()


# What the hostile-input run sent with a valid token, and what the edge answers instead of forwarding.
REFUSED_AT_THE_EDGE = [
    ("POST", "/", 404, "not-found"),
    ("POST", "//mcp", 404, "not-found"),
    ("POST", "/./mcp", 404, "not-found"),
    ("POST", "/x/../mcp", 404, "not-found"),
    ("POST", "/MCP", 404, "not-found"),
    ("POST", "/mcp/", 404, "not-found"),
    ("GET", "/healthz", 404, "not-found"),
    ("GET", "/mcp", 405, "method-not-allowed"),
    ("DELETE", "/mcp", 405, "method-not-allowed"),
    ("OPTIONS", "/mcp", 405, "method-not-allowed"),
    ("POST", "/mcp?a=%zz", 400, "bad-request"),
    ("POST", "/mcp?a=%", 400, "bad-request"),
    ("POST", "/mcp?a=b+c", 400, "bad-request"),
]


def test_the_edge_forwards_only_post_to_the_mcp_path_and_marks_what_it_refuses(plan: LocalPlan) -> None:
    marker, answers = uuid.uuid4().hex, []
    for method, target, *_ in REFUSED_AT_THE_EDGE:
        target = plan.mcp_path + target[len("/mcp"):] if target.startswith("/mcp") else target
        response = _raw(plan, method, target, {**HEADERS, **marked(marker),
                                               "authorization": f"Bearer {token_for(plan)}"},
                        json.dumps(TOOLS_LIST).encode() if method == "POST" else b"")
        answers.append((method, target, response.status_code, response.headers.get("x-mcp-edge-refusal"),
                        response.json()["error"]["code"]))
    assert answers == [(m, plan.mcp_path + t[len("/mcp"):] if t.startswith("/mcp") else t, s, r, -32600)
                       for m, t, s, r in REFUSED_AT_THE_EDGE]
    time.sleep(0.5)  # a line the URL would have written is in its log by now
    assert forwarded_count(plan, marker) == 0


def test_a_served_answer_carries_no_refusal_mark_and_the_viewer_functions_refusal_does(plan: LocalPlan) -> None:
    served = _post(plan, token_for(plan))
    assert served.status_code == 200 and "x-mcp-edge-refusal" not in served.headers
    assert _post(plan, None).headers["x-mcp-edge-refusal"] == "no-token"
    assert _post(plan, forged_token(plan)).headers["x-mcp-edge-refusal"] == "invalid-token"  # the gate's
