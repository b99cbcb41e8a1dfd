"""A local Lambda Function URL with ``AuthType AWS_IAM`` in front of one local origin.

On AWS only a caller whose request carries a valid SigV4 signature (service ``lambda``,
the function's region) of a principal allowed to invoke the function reaches the origin:
the edge gate's role and the probe role. Locally the one principal is the emulator's fake
credentials (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN`` of this
process, what the plan gives the edge and the probes). For each request:

- ``verify``: the ``Authorization`` header is one ``AWS4-HMAC-SHA256`` signature whose
  credential scope is ``<access key>/<date>/<region>/lambda/aws4_request`` with this
  process's access key and this URL's region; ``x-amz-date`` is within 15 minutes of
  now (AWS's clock skew limit) and is the scope's date; ``host`` and ``x-amz-date`` are
  signed; the session token, when the credentials have one, is sent and signed;
  ``x-amz-content-sha256`` equals the SHA-256 of the body received (Function URLs refuse
  unsigned payloads); and the signature, recomputed with botocore's ``SigV4Auth`` over
  the signed headers, the method, path, query and that hash, is the one sent (compared
  in constant time);
- anything else gets 403 with AWS's body, ``{"Message":"Forbidden"}``;
- a verified request goes to the origin as received (every header, the side header
  carrying the viewer's token included; only hop-by-hop headers dropped), except ``Host``:
  the server gets the Function URL's own, ``<url-id>.lambda-url.<region>.on.aws``, as the
  Web Adapter passes it on AWS (so an SDK's default DNS-rebinding check fails here as there);
  its answer streams back chunk by chunk (``RESPONSE_STREAM``);
- the origin is one of several instances of the server (``origins``), taken in turn for
  each request, as Lambda sends requests to whichever execution environment is free: a
  server that keeps sessions in memory fails here as it does on AWS;
- an answer that tells of such a server (an ``mcp-session-id`` header) or of a Host check
  refusing the Function URL's Host (``functions.probe.advice``) leaves a notice in
  ``notices`` (a folder; one file per kind and region, holding the advice), which
  ``scripts/run-local`` prints;
- when the answer has ended, one ``span`` line: the local counterpart of the segment
  Lambda's active tracing records for the invocation (its duration and status), under the
  trace id of the ``traceparent`` the request carried (the edge's span as its parent), or of a new trace without one; the
  status page's trace view reads these lines (``local/traces.py``).

Served by uvicorn as a factory: ``local.aws.function_url:create_app``, settings in
``$MCPEDGE_LOCAL_FUNCTION_URL`` (JSON: ``region``, ``origins`` (or one ``origin``), ``host``,
``notices``).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import itertools
import json
import os
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from edge.gate.telemetry import TRACEPARENT, parse_traceparent
from functions.probe.advice import host_check_advice, stateful_server_advice

SETTINGS_ENV = "MCPEDGE_LOCAL_FUNCTION_URL"
SERVICE = "lambda"
ALGORITHM = "AWS4-HMAC-SHA256"
MAX_CLOCK_SKEW = datetime.timedelta(minutes=15)
FORBIDDEN_BODY = b'{"Message":"Forbidden"}'
# Function URLs take at most 6 MB of request payload.
MAX_BODY_BYTES = 6 * 1024 * 1024
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "transfer-encoding", "upgrade", "content-length"})
SESSION_HEADER = "mcp-session-id"
# Enough of a refusal's body to tell an SDK's Host check by.
HOST_CHECK_BODY_BYTES = 4096
_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<credential>[^,\s]+),\s*SignedHeaders=(?P<signed>[a-z0-9;-]+),"
    r"\s*Signature=(?P<signature>[0-9a-f]{64})")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class SignatureRefusedError(Exception):
    """Why a request is not let in (logged locally; the caller only sees 403, as on AWS)."""


@dataclass(frozen=True)
class SignedRequest:
    method: str
    path: str  # as received, percent-encoded
    query: str  # as received
    headers: Sequence[tuple[str, str]]  # lower-case names
    body: bytes


def _one(headers: Sequence[tuple[str, str]], name: str) -> str:
    values = [v for n, v in headers if n == name]
    if len(values) != 1:
        raise SignatureRefusedError(f"{name}: {'missing' if not values else 'sent more than once'}")
    return values[0]


def verify(request: SignedRequest, *, region: str, credentials: Credentials,
           now: datetime.datetime | None = None) -> None:
    """Raise ``SignatureRefusedError`` unless the request is signed as described above."""
    match = _AUTHORIZATION.fullmatch(_one(request.headers, "authorization").strip())
    if match is None:
        raise SignatureRefusedError(f"authorization is not one {ALGORITHM} signature")
    access_key, _, scope = match["credential"].partition("/")
    date, scope_region, service, terminator = (scope.split("/") + ["", "", "", ""])[:4]
    if not hmac.compare_digest(access_key, credentials.access_key):
        raise SignatureRefusedError("unknown access key")
    if (scope_region, service, terminator) != (region, SERVICE, "aws4_request") or scope.count("/") != 3:
        raise SignatureRefusedError(f"credential scope {scope!r} is not <date>/{region}/{SERVICE}/aws4_request")
    amz_date = _one(request.headers, "x-amz-date")
    try:
        signed_at = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
    except ValueError:
        raise SignatureRefusedError(f"x-amz-date {amz_date!r} is not a SigV4 date") from None
    if amz_date[:8] != date:
        raise SignatureRefusedError("x-amz-date is not the credential scope's date")
    current = now or datetime.datetime.now(datetime.UTC)
    if abs(current - signed_at) > MAX_CLOCK_SKEW:
        raise SignatureRefusedError(f"signed at {amz_date}, more than 15 minutes from now")
    if _one(request.headers, "x-amz-content-sha256") != hashlib.sha256(request.body).hexdigest():
        raise SignatureRefusedError("x-amz-content-sha256 is not the SHA-256 of the body")
    signed = match["signed"].split(";")
    if signed != sorted(set(signed)) or not {"host", "x-amz-date", "x-amz-content-sha256"} <= set(signed):
        raise SignatureRefusedError(f"signed headers {signed} must be sorted, once each, and include host, "
                                    "x-amz-date and x-amz-content-sha256")
    if credentials.token and ("x-amz-security-token" not in signed or not hmac.compare_digest(
            _one(request.headers, "x-amz-security-token"), credentials.token)):
        raise SignatureRefusedError("the session token is not sent and signed")
    if "authorization" in signed:
        raise SignatureRefusedError("the authorization header cannot sign itself")
    grouped: dict[str, list[str]] = {}
    for name, value in request.headers:
        if name in signed:
            grouped.setdefault(name, []).append(value)
    missing = [name for name in signed if name not in grouped]
    if missing:
        raise SignatureRefusedError(f"signed headers {missing} are not in the request")
    url = f"https://{grouped['host'][0]}{request.path}" + (f"?{request.query}" if request.query else "")
    aws_request = AWSRequest(method=request.method, url=url, data=request.body,
                             headers={name: ",".join(values) for name, values in grouped.items()})
    aws_request.context["timestamp"] = amz_date
    signer = SigV4Auth(credentials, SERVICE, region)
    string_to_sign = signer.string_to_sign(aws_request, signer.canonical_request(aws_request))
    expected = signer.signature(string_to_sign, aws_request)
    if not hmac.compare_digest(expected, match["signature"]):
        raise SignatureRefusedError("the signature does not match")


def credentials_from(environ: Mapping[str, str] = os.environ) -> Credentials:
    access_key, secret_key = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
    if not access_key or not secret_key:
        raise RuntimeError("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set: the local Function URL "
                           "verifies signatures made with them")
    return Credentials(access_key, secret_key, environ.get("AWS_SESSION_TOKEN") or None)


def function_url_host(url_id: str, region: str) -> str:
    """The Host of a Function URL (what the server behind it receives)."""
    return f"{url_id}.lambda-url.{region}.on.aws"


class FunctionUrl:
    """The ASGI app: verify, then forward to one of ``origins`` (``http://127.0.0.1:<port>``,
    in turn) with ``host`` as the Host (None: the Host as received)."""

    def __init__(self, origin: str | Sequence[str], region: str, credentials: Credentials,
                 authorization_source: str | None = None, host: str | None = None, notices: Path | None = None):
        self.origins = [o.rstrip("/") for o in ([origin] if isinstance(origin, str) else origin)]
        if not self.origins:
            raise ValueError("a Function URL needs at least one origin")
        self._turn = itertools.count()
        self.host = host
        self.notices = notices
        self._noticed: set[str] = set()
        self.region = region
        self.credentials = credentials
        # What the Web Adapter does inside the function (AWS_LWA_AUTHORIZATION_SOURCE): the
        # named header's value becomes Authorization (the SigV4 one is Lambda's, not the server's).
        self.authorization_source = authorization_source.lower() if authorization_source else None
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10.0))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await self.client.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > MAX_BODY_BYTES:
                await self._forbidden(send, "body over 6 MB")
                return
            if not message.get("more_body"):
                break
        headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]
        raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        query = scope.get("query_string", b"").decode("latin-1")
        try:
            verify(SignedRequest(scope["method"], raw_path, query, headers, body), region=self.region,
                   credentials=self.credentials)
        except SignatureRefusedError as exc:
            await self._forbidden(send, str(exc))
            return
        # One line per request let in: what reached the origin (the end-to-end tests count them).
        print(json.dumps({"functionUrl": "forwarded", "region": self.region, "method": scope["method"],
                          "path": raw_path, "query": query}), flush=True)
        started, clock = time.time(), time.perf_counter()
        status = await self._forward(scope["method"], raw_path, query, headers, body, send)
        print(json.dumps(invocation_span(self.region, scope["method"], raw_path, headers, status, started,
                                         (time.perf_counter() - clock) * 1000)), flush=True)

    async def _forbidden(self, send: Send, reason: str) -> None:
        print(json.dumps({"functionUrl": "forbidden", "region": self.region, "reason": reason}), flush=True)
        await send({"type": "http.response.start", "status": 403, "headers": [
            (b"content-type", b"application/json"), (b"x-amzn-errortype", b"AccessDeniedException"),
            (b"content-length", str(len(FORBIDDEN_BODY)).encode())]})
        await send({"type": "http.response.body", "body": FORBIDDEN_BODY, "more_body": False})

    async def _forward(self, method: str, path: str, query: str, headers: Sequence[tuple[str, str]], body: bytes,
                       send: Send) -> int:
        """Forwards the request and streams the answer back; returns the status sent."""
        origin = self.origins[next(self._turn) % len(self.origins)]
        url = origin + path + (f"?{query}" if query else "")
        forwarded = [(n, v) for n, v in headers if n not in HOP_BY_HOP]
        if self.host:
            forwarded = [(n, v) for n, v in forwarded if n != "host"] + [("host", self.host)]
        if self.authorization_source:
            restored = [v for n, v in forwarded if n == self.authorization_source]
            forwarded = [(n, v) for n, v in forwarded if n not in ("authorization", self.authorization_source)]
            if restored:
                forwarded.append(("authorization", restored[0]))
        request = self.client.build_request(method, url, headers=forwarded, content=body)
        try:
            response = await self.client.send(request, stream=True)
        except httpx.TransportError as exc:
            message = json.dumps({"Message": f"origin unreachable: {type(exc).__name__}"}).encode()
            await send({"type": "http.response.start", "status": 502,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": message, "more_body": False})
            return 502
        if SESSION_HEADER in response.headers:
            self._notice("stateful", stateful_server_advice())
        refusal = response.status_code in (400, 403, 421)
        head = b""
        try:
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": [(k, v) for k, v in response.headers.raw if k.lower() not in
                                    {h.encode() for h in HOP_BY_HOP}]})
            try:
                async for chunk in response.aiter_raw():
                    if refusal and len(head) < HOST_CHECK_BODY_BYTES:
                        head += chunk[:HOST_CHECK_BODY_BYTES - len(head)]
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except httpx.TransportError:
                pass  # the origin cut the stream: so does the URL
            # Noted before the answer ends: whoever reads the answer finds the notice.
            if refusal and (advice := host_check_advice(response.status_code, head.decode("utf-8", "replace"))):
                self._notice("host-check", advice)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()
        return response.status_code

    def _notice(self, kind: str, advice: str) -> None:
        """Once per kind: a log line, and the advice in the notices folder for scripts/run-local."""
        if kind in self._noticed:
            return
        self._noticed.add(kind)
        print(json.dumps({"functionUrl": "notice", "region": self.region, "kind": kind}), flush=True)
        if self.notices is not None:
            self.notices.mkdir(parents=True, exist_ok=True)
            (self.notices / f"{kind}.{self.region}").write_text(advice + "\n")


def invocation_span(region: str, method: str, path: str, headers: Sequence[tuple[str, str]], status: int,
                    started: float, duration_ms: float) -> dict[str, Any]:
    """The span of one invocation, as a ``span`` log line: the trace and parent of the request's
    ``traceparent`` (one valid header; else a new trace, no parent), a span id of its own."""
    sent = [v for n, v in headers if n == TRACEPARENT]
    parent = parse_traceparent(sent[0]) if len(sent) == 1 else None
    return {"functionUrl": "span", "region": region, "name": f"{method} {path}"[:200],
            "traceId": parent.trace_id if parent else secrets.token_hex(16),
            "parentSpanId": parent.parent_id if parent else None, "spanId": secrets.token_hex(8),
            "startedAt": round(started, 3), "durationMs": round(duration_ms, 3), "status": status}


def create_app() -> FunctionUrl:
    """uvicorn factory: ``$MCPEDGE_LOCAL_FUNCTION_URL`` = ``{"region": ..., "origins": [...], "host": ...,
    "notices": ...}``."""
    raw = os.environ.get(SETTINGS_ENV)
    if not raw:
        raise RuntimeError(f"{SETTINGS_ENV} is not set: the local runner passes the URL's region and origin in it")
    settings = json.loads(raw)
    return FunctionUrl(settings.get("origins") or settings["origin"], settings["region"], credentials_from(),
                       settings.get("authorizationSource"), host=settings.get("host"),
                       notices=Path(settings["notices"]) if settings.get("notices") else None)
