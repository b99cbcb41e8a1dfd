"""CloudFront's side of the edge code: the events CloudFront hands it, and what its results mean.

The local edge runs the code the program deploys, unchanged: the viewer-request
CloudFront Function and the origin-request Lambda@Edge router, in the runtimes of
``devkit.edge_runtimes.in_process`` (QuickJS for the function, an import of the rendered
source for the router). This module builds the events CloudFront would hand them, in
CloudFront's shapes, and reads their results back:

- CloudFront Functions (``cloudfront-js-2.0``): ``{version, context, viewer,
  request: {method, uri, querystring: {name: {value, multiValue?}}, headers:
  {lower-case name: {value, multiValue?}}, cookies}}``; the function returns the
  request (possibly changed) or a response ``{statusCode, statusDescription,
  headers, cookies, body: {encoding, data} | string}``.
- Lambda@Edge origin-request: ``{"Records": [{"cf": {config, request: {clientIp,
  method, uri, querystring (raw string), headers: {lower-case name: [{key, value}]},
  origin: {custom: {domainName, port, protocol, path, readTimeout,
  keepaliveTimeout, sslProtocols, customHeaders}}}}}]}``; the function returns the
  request or a response ``{status, statusDescription, headers, body, bodyEncoding}``.

What CloudFront does with failures is mirrored too: a function that throws or
returns nonsense makes the viewer get a 5xx naming the function error
(``EdgeFunctionError``), never a silent pass-through.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from devkit.edge_runtimes.in_process import EdgeFunctionError

# Headers that describe one connection, never forwarded (RFC 9110 section 7.6.1).
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer",
    "transfer-encoding", "upgrade",
})
# Header names' usual spelling, for Lambda@Edge's ``key`` (it keeps the viewer's case).
_CANONICAL = {"www-authenticate": "WWW-Authenticate", "cloudfront-viewer-country": "CloudFront-Viewer-Country"}

Headers = Sequence[tuple[str, str]]


@dataclass(frozen=True)
class EdgeResponse:
    """A response generated at the edge (by the function, the router or the proxy itself)."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""


@dataclass
class ViewerRequest:
    """The request as CloudFront Functions sees it and may change it."""

    method: str
    uri: str
    querystring: list[tuple[str, str]]  # raw (still percent-encoded) name/value pairs
    headers: list[tuple[str, str]]  # lower-case names, cookies excluded
    cookies: list[tuple[str, str]] = field(default_factory=list)


@functools.lru_cache(maxsize=1024)  # the same few names on every request
def canonical_header_name(name: str) -> str:
    return _CANONICAL.get(name) or "-".join(part[:1].upper() + part[1:] for part in name.split("-"))


def parse_query(raw: str) -> list[tuple[str, str]]:
    """``a=1&b&a=2`` -> [(a, 1), (b, ""), (a, 2)], still percent-encoded (as CloudFront hands them over)."""
    pairs = []
    for part in raw.split("&"):
        if not part:
            continue
        name, _, value = part.partition("=")
        pairs.append((name, value))
    return pairs


def format_query(pairs: Iterable[tuple[str, str]]) -> str:
    return "&".join(f"{name}={value}" if value != "" else name for name, value in pairs)


def parse_cookies(header_values: Iterable[str]) -> list[tuple[str, str]]:
    cookies = []
    for value in header_values:
        for item in value.split(";"):
            name, sep, cookie = item.strip().partition("=")
            if name and sep:
                cookies.append((name, cookie))
    return cookies


def _multi(values: Sequence[str]) -> dict[str, Any]:
    entry: dict[str, Any] = {"value": values[0]}
    if len(values) > 1:
        entry["multiValue"] = [{"value": v} for v in values]
    return entry


def _grouped(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for name, value in pairs:
        grouped.setdefault(name, []).append(value)
    return grouped


def viewer_request_event(
    request: ViewerRequest, *, client_ip: str, distribution_domain: str, distribution_id: str, request_id: str
) -> dict[str, Any]:
    return {
        "version": "1.0",
        "context": {
            "distributionDomainName": distribution_domain,
            "distributionId": distribution_id,
            "eventType": "viewer-request",
            "requestId": request_id,
        },
        "viewer": {"ip": client_ip},
        "request": {
            "method": request.method,
            "uri": request.uri,
            "querystring": {k: _multi(v) for k, v in _grouped(request.querystring).items()},
            "headers": {k: _multi(v) for k, v in _grouped(request.headers).items()},
            "cookies": {k: _multi(v) for k, v in _grouped(request.cookies).items()},
        },
    }


def _values(entry: Any, where: str, name: str) -> list[str]:
    """The values of one ``{value, multiValue?}`` entry a function returned (``where.name``,
    named only in an error: formatted for every entry, the name cost more than the check)."""
    if not isinstance(entry, dict):
        raise EdgeFunctionError(502, "FunctionInvalidResponseError", f"{where}.{name} is not an object with a value")
    multi = entry.get("multiValue")
    if isinstance(multi, list) and multi:
        values = [m.get("value") if isinstance(m, dict) else None for m in multi]
    else:
        values = [entry.get("value")]
    for value in values:
        if not isinstance(value, str):
            raise EdgeFunctionError(502, "FunctionInvalidResponseError", f"{where}.{name} has a value that is not a string")
    return values  # type: ignore[return-value]


def _pairs(obj: Any, where: str, lower: bool = False) -> list[tuple[str, str]]:
    if obj is None:
        return []
    if not isinstance(obj, dict):
        raise EdgeFunctionError(502, "FunctionInvalidResponseError", f"{where} is not an object")
    return [(k.lower() if lower else k, v) for k, entry in obj.items() for v in _values(entry, where, k)]


def read_function_result(result: Any) -> ViewerRequest | EdgeResponse:
    """What a viewer-request function returned: the request to go on with, or a response to send."""
    if not isinstance(result, dict):
        raise EdgeFunctionError(502, "FunctionInvalidResponseError",
                                f"the function returned {type(result).__name__}, not a request or a response")
    if "statusCode" in result:
        status = result["statusCode"]
        if not isinstance(status, int) or not 100 <= status <= 599:
            raise EdgeFunctionError(502, "FunctionInvalidResponseError", f"statusCode {status!r} is not an HTTP status")
        headers = _pairs(result.get("headers"), "response.headers", lower=True)
        headers += [("set-cookie", f"{name}={value}") for name, value in _pairs(result.get("cookies"), "response.cookies")]
        return EdgeResponse(status, headers, _function_body(result.get("body")))
    method, uri = result.get("method"), result.get("uri")
    if not isinstance(method, str) or not isinstance(uri, str) or not uri.startswith("/"):
        raise EdgeFunctionError(502, "FunctionInvalidResponseError", "the returned request has no method or uri")
    return ViewerRequest(
        method=method,
        uri=uri,
        querystring=_pairs(result.get("querystring"), "request.querystring"),
        headers=_pairs(result.get("headers"), "request.headers", lower=True),
        cookies=_pairs(result.get("cookies"), "request.cookies"),
    )


def _function_body(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, dict) and isinstance(body.get("data"), str):
        if body.get("encoding", "text") == "base64":
            return base64.b64decode(body["data"])
        return str(body["data"]).encode("utf-8")
    raise EdgeFunctionError(502, "FunctionInvalidResponseError", "response.body is neither a string nor {data, encoding}")


@dataclass(frozen=True)
class OriginConfig:
    """The distribution's (default) custom origin, as the origin-request event carries it."""

    domain_name: str
    port: int
    protocol: str
    read_timeout_s: int
    keepalive_timeout_s: int
    custom_headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    path: str = ""
    ssl_protocols: tuple[str, ...] = ("TLSv1.2",)

    def to_event(self) -> dict[str, Any]:
        return {
            "custom": {
                "customHeaders": {
                    name.lower(): [{"key": name, "value": value}] for name, value in self.custom_headers.items()
                },
                "domainName": self.domain_name,
                "keepaliveTimeout": self.keepalive_timeout_s,
                "path": self.path,
                "port": self.port,
                "protocol": self.protocol,
                "readTimeout": self.read_timeout_s,
                "sslProtocols": list(self.ssl_protocols),
            }
        }


# What Lambda@Edge's include-body hands an origin-request function at most: a longer body
# is cut to this and marked ``inputTruncated`` (the function must not forward it as whole).
INCLUDE_BODY_LIMIT = 1024 * 1024


def include_body_field(body: bytes) -> dict[str, Any]:
    """The event's ``body`` field with include-body (read-only, base64, cut at 1 MB)."""
    return {
        "action": "read-only",
        "data": base64.b64encode(body[:INCLUDE_BODY_LIMIT]).decode("ascii"),
        "encoding": "base64",
        "inputTruncated": len(body) > INCLUDE_BODY_LIMIT,
    }


def origin_request_event(
    *, method: str, uri: str, querystring: str, headers: Headers, client_ip: str, origin: OriginConfig,
    distribution_domain: str, distribution_id: str, request_id: str, body: bytes | None = None,
) -> dict[str, Any]:
    """The origin-request event; ``body`` given: with include-body's ``body`` field."""
    grouped: dict[str, list[dict[str, str]]] = {}
    for name, value in headers:
        grouped.setdefault(name.lower(), []).append({"key": canonical_header_name(name.lower()), "value": value})
    request: dict[str, Any] = {
        "clientIp": client_ip,
        "headers": grouped,
        "method": method,
        "origin": origin.to_event(),
        "querystring": querystring,
        "uri": uri,
    }
    if body is not None:
        request["body"] = include_body_field(body)
    return {
        "Records": [{
            "cf": {
                "config": {
                    "distributionDomainName": distribution_domain,
                    "distributionId": distribution_id,
                    "eventType": "origin-request",
                    "requestId": request_id,
                },
                "request": request,
            }
        }]
    }


@dataclass(frozen=True)
class OriginRequest:
    """Where CloudFront sends the request after the origin-request function."""

    url: str
    method: str
    headers: list[tuple[str, str]]
    read_timeout_s: float
    region_host: str


def _edge_headers(obj: Any, where: str) -> list[tuple[str, str]]:
    if obj is None:
        return []
    if not isinstance(obj, dict):
        raise EdgeFunctionError(502, "LambdaValidationError", f"{where} is not an object")
    out = []
    for name, entries in obj.items():
        if not isinstance(entries, list):
            raise EdgeFunctionError(502, "LambdaValidationError", f"{where}.{name} is not a list of {{key, value}}")
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("value"), str):
                raise EdgeFunctionError(502, "LambdaValidationError", f"{where}.{name} has an entry without a value")
            out.append((name.lower(), entry["value"]))
    return out


def read_router_result(result: Any) -> OriginRequest | EdgeResponse:
    """The origin request the router produced (custom origin headers added), or its response."""
    if not isinstance(result, dict):
        raise EdgeFunctionError(502, "LambdaValidationError", f"the router returned {type(result).__name__}")
    if "status" in result:
        try:
            status = int(result["status"])
        except (TypeError, ValueError):
            raise EdgeFunctionError(502, "LambdaValidationError", f"status {result['status']!r} is not a number") from None
        body = result.get("body") or ""
        data = base64.b64decode(body) if result.get("bodyEncoding") == "base64" else str(body).encode("utf-8")
        return EdgeResponse(status, _edge_headers(result.get("headers"), "response.headers"), data)
    custom = (result.get("origin") or {}).get("custom")
    if not isinstance(custom, dict):
        raise EdgeFunctionError(502, "LambdaValidationError", "the request has no origin.custom (S3 origins are not emulated)")
    try:
        domain, port, protocol = str(custom["domainName"]), int(custom["port"]), str(custom["protocol"])
        read_timeout = float(custom.get("readTimeout", 30))
    except (KeyError, TypeError, ValueError) as exc:
        raise EdgeFunctionError(502, "LambdaValidationError", f"origin.custom is incomplete: {exc}") from None
    if protocol not in ("http", "https"):
        raise EdgeFunctionError(502, "LambdaValidationError", f"origin protocol {protocol!r}")
    headers = _edge_headers(result.get("headers"), "request.headers")
    # CloudFront adds the origin's custom headers after the function ran; a viewer
    # header of the same name is replaced, never sent alongside.
    custom_headers = _edge_headers(custom.get("customHeaders"), "origin.custom.customHeaders")
    names = {n for n, _ in custom_headers}
    headers = [(n, v) for n, v in headers if n not in names] + custom_headers
    uri = result.get("uri")
    if not isinstance(uri, str) or not uri.startswith("/"):
        raise EdgeFunctionError(502, "LambdaValidationError", "request.uri must start with /")
    query = result.get("querystring") or ""
    url = f"{protocol}://{domain}:{port}{custom.get('path') or ''}{uri}" + (f"?{query}" if query else "")
    return OriginRequest(url=url, method=str(result.get("method", "GET")), headers=headers,
                         read_timeout_s=read_timeout, region_host=domain)
