"""The local Function URL's SigV4 check: what the edge gate signs (awscrt) and what botocore
signs pass; any change to what was signed, another region or key, a stale date, or a
payload hash that is not the body's is refused, and a refused request never reaches the origin."""

from __future__ import annotations

import datetime
import hashlib

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from edge.gate import signing
from functions.contract import EDGE_AUTHORIZATION_HEADER
from local.aws.function_url import FORBIDDEN_BODY, FunctionUrl, SignatureRefusedError, SignedRequest, verify
from local.supervisor import free_ports
from tests.local.conftest import serve

CREDS = Credentials("AKIALOCALTESTKEY0001", "local/secret/key/for/the/url/tests/0000", "local-session-token")
ENVIRON = {"AWS_ACCESS_KEY_ID": CREDS.access_key, "AWS_SECRET_ACCESS_KEY": CREDS.secret_key,
           "AWS_SESSION_TOKEN": CREDS.token}
REGION = "eu-west-1"
HOST = "127.0.0.1:9999"
BODY = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'


def gate_signed(method: str = "POST", path: str = "/mcp", query: str = "", body: bytes = BODY,
                region: str = REGION, environ: dict[str, str] = ENVIRON) -> SignedRequest:
    """Signed as the shipped gate signs (edge/gate/signing.py, awscrt)."""
    headers = signing.signature_headers(method, path, query, HOST, body, region, environ)
    return SignedRequest(method, path, query, [("host", HOST), *headers.items(),
                                               ("content-type", "application/json")], body)


def botocore_signed(body: bytes = BODY, when: datetime.datetime | None = None) -> SignedRequest:
    request = AWSRequest("POST", f"http://{HOST}/mcp", data=body,
                         headers={"x-amz-content-sha256": hashlib.sha256(body).hexdigest()})
    auth = SigV4Auth(CREDS, "lambda", REGION)
    if when is not None:
        request.context["timestamp"] = when.strftime("%Y%m%dT%H%M%SZ")
        auth._modify_request_before_signing(request)
        canonical = auth.canonical_request(request)
        signature = auth.signature(auth.string_to_sign(request, canonical), request)
        request.headers["Authorization"] = ", ".join([
            f"AWS4-HMAC-SHA256 Credential={auth.scope(request)}",
            f"SignedHeaders={auth.signed_headers(auth.headers_to_sign(request))}", f"Signature={signature}"])
    else:
        auth.add_auth(request)
    headers = [(k.lower(), v) for k, v in request.headers.items()] + [("host", HOST)]
    return SignedRequest("POST", "/mcp", "", headers, body)


def replaced(request: SignedRequest, name: str, value: str) -> SignedRequest:
    return SignedRequest(request.method, request.path, request.query,
                         [(n, value if n == name else v) for n, v in request.headers], request.body)


def test_what_the_gate_signs_passes() -> None:
    verify(gate_signed(), region=REGION, credentials=CREDS)
    verify(gate_signed("GET", "/mcp", "a=1&b=two", b""), region=REGION, credentials=CREDS)


def test_what_botocore_signs_passes() -> None:
    verify(botocore_signed(), region=REGION, credentials=CREDS)


@pytest.mark.parametrize(("what", "change"), [
    ("body", lambda r: SignedRequest(r.method, r.path, r.query, r.headers, r.body + b" ")),
    ("hash and body", lambda r: replaced(SignedRequest(r.method, r.path, r.query, r.headers, b"{}"),
                                         "x-amz-content-sha256", hashlib.sha256(b"{}").hexdigest())),
    ("path", lambda r: SignedRequest(r.method, "/admin", r.query, r.headers, r.body)),
    ("query", lambda r: SignedRequest(r.method, r.path, "x=1", r.headers, r.body)),
    ("method", lambda r: SignedRequest("PUT", r.path, r.query, r.headers, r.body)),
    ("host", lambda r: replaced(r, "host", "127.0.0.1:1")),
    ("date", lambda r: replaced(r, "x-amz-date", "20200101T000000Z")),
    ("token", lambda r: replaced(r, "x-amz-security-token", "another-token")),
    ("unsigned", lambda r: SignedRequest(r.method, r.path, r.query,
                                         [(n, v) for n, v in r.headers if n != "authorization"], r.body)),
    ("unsigned payload", lambda r: replaced(r, "x-amz-content-sha256", "UNSIGNED-PAYLOAD")),
])
def test_a_request_changed_after_signing_is_refused(what, change) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SignatureRefusedError):
        verify(change(gate_signed()), region=REGION, credentials=CREDS)


def test_another_region_or_key_is_refused() -> None:
    with pytest.raises(SignatureRefusedError, match="credential scope"):
        verify(gate_signed(region="us-east-1"), region=REGION, credentials=CREDS)
    other = {**ENVIRON, "AWS_SECRET_ACCESS_KEY": "another/secret/key/that/is/not/the/local/one"}
    with pytest.raises(SignatureRefusedError, match="signature does not match"):
        verify(gate_signed(environ=other), region=REGION, credentials=CREDS)
    with pytest.raises(SignatureRefusedError, match="access key"):
        verify(gate_signed(environ={**ENVIRON, "AWS_ACCESS_KEY_ID": "AKIAOTHERKEY00000001"}), region=REGION,
               credentials=CREDS)


def test_a_signature_older_or_newer_than_15_minutes_is_refused() -> None:
    now = datetime.datetime.now(datetime.UTC)
    verify(botocore_signed(when=now - datetime.timedelta(minutes=14)), region=REGION, credentials=CREDS)
    for skew in (datetime.timedelta(minutes=16), -datetime.timedelta(minutes=16)):
        with pytest.raises(SignatureRefusedError, match="15 minutes"):
            verify(botocore_signed(when=now - skew), region=REGION, credentials=CREDS)


@settings(max_examples=30, deadline=None)
@given(st.binary(max_size=200), st.binary(min_size=1, max_size=200))
def test_any_other_body_than_the_signed_one_is_refused(signed_body: bytes, extra: bytes) -> None:
    request = gate_signed(body=signed_body)
    verify(request, region=REGION, credentials=CREDS)
    with pytest.raises(SignatureRefusedError):
        verify(SignedRequest(request.method, request.path, request.query, request.headers, signed_body + extra),
               region=REGION, credentials=CREDS)


# --- served: refused requests never reach the origin, verified ones stream through ------------


def test_served_url_refuses_with_aws_body_and_forwards_signed_requests_as_received() -> None:
    reached: list[dict[str, str]] = []

    async def mcp(request: Request) -> Response:
        reached.append(dict(request.headers))
        if request.method == "GET":
            async def events():  # type: ignore[no-untyped-def]
                yield b"data: one\n\n"
                yield b"data: two\n\n"
            return StreamingResponse(events(), media_type="text/event-stream")
        return JSONResponse({"body": (await request.body()).decode()})

    origin_port, url_port = free_ports(2)
    origin = Starlette(routes=[Route("/mcp", mcp, methods=["GET", "POST"])])
    url = FunctionUrl(f"http://127.0.0.1:{origin_port}", REGION, CREDS)
    with serve(origin, origin_port), serve(url, url_port):
        base = f"http://127.0.0.1:{url_port}"
        refused = httpx.post(base + "/mcp", content=BODY, headers={"content-type": "application/json"})
        assert refused.status_code == 403 and refused.content == FORBIDDEN_BODY
        assert refused.headers["content-type"] == "application/json"
        assert not reached
        host = f"127.0.0.1:{url_port}"
        signed = signing.signature_headers("POST", "/mcp", "", host, BODY, REGION, ENVIRON)
        ok = httpx.post(base + "/mcp", content=BODY, headers={**signed, "x-mcp-edge-authorization": "Bearer t"})
        assert ok.status_code == 200 and ok.json() == {"body": BODY.decode()}
        assert reached[-1]["x-mcp-edge-authorization"] == "Bearer t"
        tampered = httpx.post(base + "/mcp", content=BODY + b" ", headers=signed)
        assert tampered.status_code == 403 and len(reached) == 1
        signed_get = signing.signature_headers("GET", "/mcp", "", host, b"", REGION, ENVIRON)
        with httpx.stream("GET", base + "/mcp", headers=signed_get) as stream:
            assert stream.status_code == 200
            assert b"".join(stream.iter_raw()) == b"data: one\n\ndata: two\n\n"


def test_served_url_restores_the_viewers_authorization_from_the_side_header_as_the_web_adapter_does() -> None:
    reached: list[list[tuple[str, str]]] = []

    async def mcp(request: Request) -> Response:
        reached.append([(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw])
        return JSONResponse({})

    origin_port, url_port = free_ports(2)
    origin = Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])
    # Configured with the header name as the stack renders it (AWS_LWA_AUTHORIZATION_SOURCE); any case matches.
    url = FunctionUrl(f"http://127.0.0.1:{origin_port}", REGION, CREDS, EDGE_AUTHORIZATION_HEADER.upper())
    with serve(origin, origin_port), serve(url, url_port):
        base, host = f"http://127.0.0.1:{url_port}", f"127.0.0.1:{url_port}"
        signed = signing.signature_headers("POST", "/mcp", "", host, BODY, REGION, ENVIRON)
        viewer = "Bearer viewer.token.value"
        with_token = httpx.post(base + "/mcp", content=BODY, headers={**signed, EDGE_AUTHORIZATION_HEADER: viewer})
        without_token = httpx.post(base + "/mcp", content=BODY, headers=signed)
    assert with_token.status_code == 200 and without_token.status_code == 200
    restored, bare = ({name.lower(): [v for n, v in headers if n.lower() == name.lower()]
                       for name in ("authorization", EDGE_AUTHORIZATION_HEADER)} for headers in reached)
    # The viewer's token, once, in place of the SigV4 signature; the side header gone.
    assert restored == {"authorization": [viewer], EDGE_AUTHORIZATION_HEADER: []}
    # No side header: the signature is not passed on as the server's Authorization either.
    assert bare == {"authorization": [], EDGE_AUTHORIZATION_HEADER: []}
    assert signed["authorization"].startswith("AWS4-HMAC-SHA256")
