"""The local edge: CloudFront's request path on one loopback port.

For each request, as the distribution would do it:

1. the viewer-request CloudFront Function (the program's rendered code, in QuickJS) sees
   the request and either answers it (a 401 for a malformed token) or lets it on; it
   sees the request's head only (CloudFront Functions never see a body), so it runs as
   soon as the head is in, while the body may still be on its way;
2. the headers the origin request policy forwards are selected (all viewer headers,
   plus ``CloudFront-Viewer-Country``, which locally comes from the request's own
   ``CloudFront-Viewer-Country`` header or the configured default country), cookies
   and query strings as the policy says;
3. the origin-request Lambda@Edge function runs: the program's gate package
   (``function_package``: the shipped zip extracted, its router and constants rendered
   with the local origin targets and issuer; ``devkit.edge_runtimes.in_process.PackageFunction``)
   or a router alone (``router_source``). With ``include_body`` (the association's
   include-body) the body is read first and handed over as Lambda@Edge does (base64,
   cut at 1 MB and marked truncated); without it the function sees the head only and
   the body is read after it (a request it answers never waits for its body). It picks
   the region, rewrites the origin and ``Host`` and (the gate) verifies and signs;
4. the request goes to that origin with the distribution's origin custom headers, if
   any, and the response streams back chunk by chunk: SSE is never buffered, as
   CloudFront with compression off does not buffer it. The response headers policy's
   removed headers (``removed_response_headers``: the edge's refusal mark) are taken out
   of the origin's response, and only of it: an answer a function generated keeps them,
   as AWS documents the policy removing "headers that it received from the origin".

Header values are read as CloudFront reads them, without the optional whitespace (spaces,
tabs) around them (``viewer_header_fields``). Before any of it, the ``Host`` must be one of the distribution's names (``host_names``:
its domain name and aliases, compared without the port and case-insensitively), else 403
as CloudFront answers a Host it serves no distribution for: a DNS-rebinding page (a name
of the attacker's resolving to 127.0.0.1) never reaches a function or an origin, whose own
Host check cannot see the viewer's Host once the router has rewritten it. Then CloudFront's request limits (``request_limits``: request line and
headers 20,480 bytes, URL 8,192) answer 413, then the distribution's AWS WAF web ACL
(``web_acl``, when the stack has one) may block the request with its own answer. Failures answer as CloudFront does: a
throwing function 503, an invalid function
result 502, an unreachable origin 502, an origin read timeout 504, each naming the
error in ``x-cache``/the body so a developer can tell edge from origin.
"""

from __future__ import annotations

import base64
import email.utils
import json
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio

from devkit.edge_runtimes.in_process import EdgeFunctionError, PackageFunction, RouterFunction, ViewerFunction
from local.cloudfront.events import (
    HOP_BY_HOP,
    EdgeResponse,
    OriginConfig,
    ViewerRequest,
    format_query,
    origin_request_event,
    parse_cookies,
    parse_query,
    read_function_result,
    read_router_result,
    viewer_request_event,
)
from local.cloudfront.key_value_store import StoreReader
from local.cloudfront.origin_client import OriginError, OriginPool, OriginResponse, OriginTimeoutError, sized
from local.cloudfront.request_limits import check_request
from local.cloudfront.web_acl import EdgeWebAcl

SETTINGS_ENV = "MCPEDGE_LOCAL_EDGE"
COUNTRY_HEADER = "cloudfront-viewer-country"
# Function URLs take at most 6 MB of request payload; CloudFront itself allows more.
MAX_BODY_BYTES = 6 * 1024 * 1024
CONNECT_TIMEOUT_S = 10.0  # CloudFront's origin connection timeout (default)
CHUNK_LOG_LIMIT = 200

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

log = logging.getLogger("local.edge")


@dataclass(frozen=True)
class OriginRequestPolicy:
    """The parts of the distribution's origin request policy the proxy applies."""

    header_behavior: str = "allViewerAndWhitelistCloudFront"  # none|whitelist|allViewer|allViewerAndWhitelistCloudFront|allExcept
    header_items: tuple[str, ...] = ("CloudFront-Viewer-Country",)
    cookie_behavior: str = "none"  # none|whitelist|all|allExcept
    cookie_items: tuple[str, ...] = ()
    query_string_behavior: str = "all"  # none|whitelist|all|allExcept
    query_string_items: tuple[str, ...] = ()

    def headers(self, viewer: list[tuple[str, str]], cloudfront: dict[str, str]) -> list[tuple[str, str]]:
        items = {h.lower() for h in self.header_items}
        behavior = self.header_behavior
        if behavior in ("allViewer", "allViewerAndWhitelistCloudFront"):
            selected = list(viewer)
        elif behavior == "allExcept":
            selected = [(n, v) for n, v in viewer if n not in items]
        elif behavior == "whitelist":
            selected = [(n, v) for n, v in viewer if n in items]
        else:
            selected = []
        if behavior in ("allViewerAndWhitelistCloudFront", "whitelist"):
            selected += [(n, v) for n, v in cloudfront.items() if n in items]
        return selected

    @staticmethod
    def _select(behavior: str, items: tuple[str, ...], pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        if behavior == "all":
            return pairs
        if behavior == "whitelist":
            return [(n, v) for n, v in pairs if n in items]
        if behavior == "allExcept":
            return [(n, v) for n, v in pairs if n not in items]
        return []

    def cookies(self, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return self._select(self.cookie_behavior, self.cookie_items, pairs)

    def query(self, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return self._select(self.query_string_behavior, self.query_string_items, pairs)


@dataclass(frozen=True)
class EdgeSettings:
    viewer_function_code: str
    router_source: str
    default_origin: OriginConfig
    router_handler: str = "geo_router.handler"
    policy: OriginRequestPolicy = field(default_factory=OriginRequestPolicy)
    default_country: str | None = None
    distribution_domain: str = "127.0.0.1"
    # The distribution's alternate domain names (CNAMEs); with distribution_domain, the only
    # Host names the edge answers.
    aliases: tuple[str, ...] = ("localhost",)
    distribution_id: str = "ELOCALEDGE0001"
    # The KeyValueStore associated with the viewer function (region health), as the
    # emulator's file; None: no store associated.
    health_store_file: str | None = None
    # The origin-request function's package folder (the gate, with the libraries it
    # ships), run with ``router_handler``; None: ``router_source`` alone.
    function_package: str | None = None
    # The association's include-body: the function gets the request's body.
    include_body: bool = False
    # The distribution's web ACL (the WebAcl resource's inputs) and where blocks are logged; None: no web ACL.
    web_acl: dict[str, Any] | None = None
    web_acl_block_log: str | None = None
    # The response headers policy's remove_headers_config: taken out of origin responses.
    removed_response_headers: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> EdgeSettings:
        raw = json.loads(text)
        origin = raw.pop("default_origin")
        origin["ssl_protocols"] = tuple(origin.get("ssl_protocols", ("TLSv1.2",)))
        policy: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.pop("policy").items()}
        raw["aliases"] = tuple(raw.get("aliases", cls.aliases))
        raw["removed_response_headers"] = tuple(raw.get("removed_response_headers", ()))
        return cls(default_origin=OriginConfig(**origin), policy=OriginRequestPolicy(**policy), **raw)

    def serves_host(self, value: str) -> bool:
        """Whether a Host header names this distribution: its host part (the value without
        surrounding whitespace or a port) is the domain name or an alias, in any case."""
        host = value.strip(" \t").lower()
        # An IPv6 literal's port follows its "]"; a name or IPv4 address has no ":" of its own.
        host = host[:host.find("]") + 1] if host.startswith("[") else host.split(":", 1)[0]
        return host in {name.lower() for name in (self.distribution_domain, *self.aliases)}


_ids = random.Random()  # seeded from the OS once; an id per request needs no kernel read


# RFC 9110 5.5 / RFC 9112 5: a field value does not include the optional whitespace (SP,
# HTAB) around it. llhttp (uvicorn's httptools) drops the leading but keeps the trailing, and
# a trailing tab then made the local Function URL's h11 refuse the request (a 502); HTTP/2
# and HTTP/3 viewers cannot send such a value at all (RFC 9113 8.2.1), so CloudFront never
# passes one on. Every function, WAF and the origin see the value without it, as here.
FIELD_OWS = " \t"


def viewer_header_fields(raw: Any) -> list[tuple[str, str]]:
    """The viewer's header fields as CloudFront reads them: names as sent, values without
    the optional whitespace around them."""
    return [(k.decode("latin-1"), v.decode("latin-1").strip(FIELD_OWS)) for k, v in raw]


def _request_id() -> str:
    # CloudFront's request ids: 56 base64url-ish characters. Unique, not secret (they are
    # sent to the viewer and the origin), so from a seeded generator, not secrets.
    return base64.urlsafe_b64encode(_ids.randbytes(42)).decode()


def _error_page(error: EdgeFunctionError, request_id: str, *, close: bool = False) -> EdgeResponse:
    reason = {403: "Forbidden", 413: "Request Entity Too Large", 502: "Bad Gateway", 503: "Service Unavailable",
              504: "Gateway Timeout"}.get(error.status, "Error")
    body = (
        f"<html><head><title>{error.status} {reason}</title></head><body><h1>{error.status} ERROR</h1>"
        f"<p>The request could not be satisfied.</p><p>{error.error}: {error.detail}</p>"
        f"<p>Generated by local edge (CloudFront emulation). Request ID: {request_id}</p></body></html>"
    ).encode()
    return EdgeResponse(error.status, [
        ("content-type", "text/html"), ("x-cache", "Error from cloudfront"), ("x-local-edge-error", error.error),
        *([("connection", "close")] if close else []),
    ], body)


def _body_too_large() -> EdgeResponse:
    return EdgeResponse(413, [("content-type", "text/plain")], b"request body too large")


class EdgeProxy:
    """The ASGI app."""

    def __init__(self, settings: EdgeSettings):
        self.settings = settings
        store = StoreReader(Path(settings.health_store_file)) if settings.health_store_file else None
        self.viewer = ViewerFunction(settings.viewer_function_code, kvs=store.get if store else None)
        self.router: RouterFunction | PackageFunction = (
            PackageFunction(settings.function_package, settings.router_handler) if settings.function_package
            else RouterFunction(settings.router_source, settings.router_handler))
        # Keep-alive connections to the origins, kept as long as the origin's keepaliveTimeout.
        self.origins = OriginPool(keepalive_s=settings.default_origin.keepalive_timeout_s)
        self.web_acl = EdgeWebAcl(settings.web_acl, Path(settings.web_acl_block_log)
                                  if settings.web_acl_block_log else None) if settings.web_acl else None

    async def aclose(self) -> None:
        await self.origins.aclose()
        self.viewer.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return  # CloudFront forwards WebSockets, but MCP does not use them
        await self._http_request(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                # The function runs in this (the serving) thread: loaded here, not on the first event.
                self.viewer.warm()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        request_id = _request_id()
        client_ip = (scope.get("client") or ("127.0.0.1", 0))[0]
        raw_headers = viewer_header_fields(scope["headers"])
        raw_path = scope.get("raw_path") or scope["path"].encode()
        query = scope.get("query_string", b"")
        target = (raw_path + (b"?" + query if query else b"")).decode("latin-1")
        host = next((v for n, v in raw_headers if n.lower() == "host"), self.settings.distribution_domain)
        exceeded = check_request(scope["method"], target, raw_headers, host=host)
        if exceeded is not None:
            # CloudFront refuses it before any function runs, then closes the connection.
            await self._send(send, _error_page(EdgeFunctionError(exceeded.status, exceeded.error, exceeded.detail),
                                               request_id, close=True), request_id)
            return
        hosts = [v for n, v in raw_headers if n.lower() == "host"]
        if not all(self.settings.serves_host(v) for v in hosts) or len(hosts) > 1:
            await self._send(send, _error_page(EdgeFunctionError(
                403, "InvalidHost", "Bad request: the Host header names none of the distribution's domain names"),
                request_id), request_id)
            log.info(json.dumps({"method": scope["method"], "uri": raw_path.decode("latin-1")[:CHUNK_LOG_LIMIT],
                                 "status": 403, "host": "refused", "requestId": request_id}))
            return
        if self.web_acl is not None:  # WAF decides before any function runs, on the head and the body
            blocked, receive = await self.web_acl.check(scope["method"], raw_path.decode("latin-1"),
                                                        query.decode("latin-1"), raw_headers, client_ip, receive)
            if blocked is not None:
                await self._send(send, blocked, request_id)
                log.info(json.dumps({"method": scope["method"], "uri": raw_path.decode("latin-1")[:CHUNK_LOG_LIMIT],
                                     "status": blocked.status, "waf": "blocked", "requestId": request_id}))
                return
        headers = [(n.lower(), v) for n, v in raw_headers]
        country = next((v for n, v in headers if n == COUNTRY_HEADER), None) or self.settings.default_country
        viewer_headers = [(n, v) for n, v in headers if n not in HOP_BY_HOP and n != "cookie"]
        cookies = parse_cookies(v for n, v in headers if n == "cookie")
        request = ViewerRequest(
            method=scope["method"],
            uri=raw_path.decode("latin-1"),
            querystring=parse_query(query.decode("latin-1")),
            headers=viewer_headers,
            cookies=cookies,
        )
        region = "-"
        try:
            # The viewer function (and a router without include-body) sees the request's
            # head only, as CloudFront's do: it runs while the body may still be on its
            # way (a viewer's client often writes the body after the head, a packet of its own).
            outcome = await self._edge(request, client_ip, request_id, country, receive)
            if outcome is None:
                return  # the viewer went away
            if isinstance(outcome, EdgeResponse):
                response = outcome
            else:
                origin, body = outcome
                if body is None:
                    body = await self._body(receive)
                    if body is None:
                        return  # the viewer went away
                if len(body) > MAX_BODY_BYTES:
                    await self._send(send, _body_too_large())
                    return
                region = origin.region_host
                response = None
                status = await self._forward(origin, body, request_id, receive, send)
        except EdgeFunctionError as error:
            response = _error_page(error, request_id)
        if response is not None:
            status = response.status
            await self._send(send, response, request_id)
        log.info(json.dumps({
            "method": request.method, "uri": request.uri[:CHUNK_LOG_LIMIT], "country": country, "origin": region,
            "status": status, "ms": round((time.perf_counter() - started) * 1000, 1), "requestId": request_id,
        }))

    @staticmethod
    async def _body(receive: Receive) -> bytes | None:
        """The request's body (read until it ends or passes ``MAX_BODY_BYTES``); None when
        the viewer disconnects first."""
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            if len(body) > MAX_BODY_BYTES or not message.get("more_body"):
                return body

    async def _edge(self, request: ViewerRequest, client_ip: str, request_id: str, country: str | None,
                    receive: Receive) -> Any:
        """Steps 1-3: the function, the policy, the origin-request function. An EdgeResponse, or
        (the origin request, the body if it was read already), or None if the viewer went away."""
        settings = self.settings
        event = viewer_request_event(request, client_ip=client_ip, distribution_domain=settings.distribution_domain,
                                     distribution_id=settings.distribution_id, request_id=request_id)
        # In this thread, to its end (QuickJS: no crossing to an engine thread and back).
        result = read_function_result(self.viewer(event))
        if isinstance(result, EdgeResponse):
            return result
        cloudfront_headers = {COUNTRY_HEADER: country} if country else {}
        viewer = [(n, v) for n, v in result.headers if n != COUNTRY_HEADER]
        forwarded = settings.policy.headers(viewer, cloudfront_headers)
        cookies = settings.policy.cookies(result.cookies)
        if cookies:
            forwarded.append(("cookie", "; ".join(f"{n}={v}" for n, v in cookies)))
        forwarded += [
            ("x-forwarded-for", client_ip),
            ("via", f"2.0 {request_id[:32]}.cloudfront.net (CloudFront)"),
            ("x-amz-cf-id", request_id),
        ]
        body = None
        if settings.include_body:
            body = await self._body(receive)
            if body is None:
                return None
            if len(body) > MAX_BODY_BYTES:
                return _body_too_large()
        event = origin_request_event(
            method=result.method, uri=result.uri, querystring=format_query(settings.policy.query(result.querystring)),
            headers=forwarded, client_ip=client_ip, origin=settings.default_origin,
            distribution_domain=settings.distribution_domain, distribution_id=settings.distribution_id,
            request_id=request_id, body=body,
        )
        outcome = read_router_result(self.router(event, owned=True))  # built for this call alone
        return outcome if isinstance(outcome, EdgeResponse) else (outcome, body)

    async def _forward(self, origin: Any, body: bytes, request_id: str, receive: Receive, send: Send) -> int:
        """Step 4: send to the chosen origin and stream its answer back."""
        try:
            response = await self.origins.request(origin.method, origin.url, origin.headers, body,
                                                  connect_timeout_s=CONNECT_TIMEOUT_S,
                                                  read_timeout_s=origin.read_timeout_s, whole=True)
        except OriginTimeoutError as exc:
            raise EdgeFunctionError(504, "OriginReadTimeout", f"{origin.url}: {exc}") from None
        except OriginError as exc:
            raise EdgeFunctionError(502, "OriginConnectError", f"{origin.url}: {type(exc).__name__}: {exc}") from None
        try:
            removed = {h.lower() for h in self.settings.removed_response_headers}
            headers = [(k, v) for k, v in response.headers if k not in HOP_BY_HOP and k.lower() not in removed]
            headers += [("x-cache", "Miss from cloudfront"), ("via", "1.1 local-edge.cloudfront.net (CloudFront)"),
                        ("x-amz-cf-pop", "LOCAL1-P1"), ("x-amz-cf-id", request_id)]
            start = {"type": "http.response.start", "status": response.status,
                     "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]}
            if sized(response.headers):
                # A sized answer (plain JSON): read whole (under the same between-packets
                # timeout), then its head and body sent together, which the edge's
                # protocol (local/cloudfront/http_protocol.py) writes as one; no disconnect watcher.
                try:
                    answer = await response.read()
                except OriginError as exc:
                    log.warning(json.dumps({"streamError": f"{type(exc).__name__}: {exc}"}))
                    answer = b""
                await send(start)
                await send({"type": "http.response.body", "body": answer, "more_body": False})
            else:
                await send(start)
                await self._stream(response, receive, send)
        finally:
            await response.aclose()
        return response.status

    @staticmethod
    async def _stream(response: OriginResponse, receive: Receive, send: Send) -> None:
        """Pass chunks on as they arrive; stop reading the origin when the viewer goes away."""
        async with anyio.create_task_group() as tasks:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                tasks.cancel_scope.cancel()

            tasks.start_soon(watch_disconnect)
            try:
                async for chunk in response.chunks():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except OriginError as exc:
                # Headers are gone already: CloudFront cuts the stream short too.
                log.warning(json.dumps({"streamError": f"{type(exc).__name__}: {exc}"}))
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            tasks.cancel_scope.cancel()

    @staticmethod
    async def _send(send: Send, response: EdgeResponse, request_id: str = "") -> None:
        """An answer of the edge's own (the function's, the router's, an error page), dated
        and signed as CloudFront's are (the server runs without uvicorn's Date and Server)."""
        headers = list(response.headers)
        names = {n for n, _ in headers}
        if "content-length" not in names:
            headers.append(("content-length", str(len(response.body))))
        if "date" not in names:
            headers.append(("date", email.utils.formatdate(usegmt=True)))
        if "server" not in names:
            headers.append(("server", "CloudFront"))
        if request_id:
            headers.append(("x-amz-cf-id", request_id))
        await send({"type": "http.response.start", "status": response.status,
                    "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]})
        await send({"type": "http.response.body", "body": response.body, "more_body": False})


def create_app() -> EdgeProxy:
    """uvicorn factory: settings from ``$MCPEDGE_LOCAL_EDGE`` (JSON, or @path to a JSON file)."""
    raw = os.environ.get(SETTINGS_ENV)
    if not raw:
        raise RuntimeError(f"{SETTINGS_ENV} is not set: the local runner passes the edge's settings in it")
    if raw.startswith("@"):
        with open(raw[1:], encoding="utf-8") as f:
            raw = f.read()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    # The request log line names none of them: not looked up for each record (the logging
    # HOWTO's "Optimization"; 24 -> 15 us a line).
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None
    return EdgeProxy(EdgeSettings.from_json(raw))
