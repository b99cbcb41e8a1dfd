"""CloudFront's documented limits on a viewer request, as the local edge applies them.

From CloudFront's quotas ("General quotas") and its request behaviour for custom
origins ("Maximum length of a request and maximum length of a URL"):

- the request line and headers (path, query string and every header, not the body)
  may total 20,480 bytes;
- the URL CloudFront builds from the request (scheme, host, path, query string) may
  be 8,192 bytes;

and over either CloudFront answers ``413 Request Entity Too Large`` (then closes the
connection), before any function runs. Limits the local edge does not apply are in
``NOT_APPLIED`` (``scripts/run-local explain`` lists them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MAX_REQUEST_HEAD_BYTES = 20_480
MAX_URL_BYTES = 8_192
TOO_LARGE_STATUS = 413

NOT_APPLIED = (
    "Request header count: CloudFront documents no limit on the number of viewer request headers (only on the "
    "headers a policy lists and the origin custom headers), so the local edge applies none beyond the 20,480-byte "
    "total.",
    "The CloudFront Function's memory (2 MB) and compute-utilization quotas: QuickJS, an interpreter like "
    "CloudFront's, is still not CloudFront's runtime, so its memory and time say nothing about CloudFront's verdict (bench/edge_bench.py measures the "
    "function on interpreters instead, and CI's test-function job reads the real utilization). An event reaches "
    "the function only within the request limits above, which are applied.",
)


@dataclass(frozen=True)
class LimitExceeded:
    status: int
    error: str
    detail: str


def request_head_bytes(method: str, target: str, headers: Iterable[tuple[str, str]]) -> int:
    """Bytes of ``METHOD target HTTP/1.1`` and the header lines, as the viewer sent them."""
    size = len(method) + 1 + len(target.encode("latin-1", "replace")) + len(" HTTP/1.1\r\n")
    for name, value in headers:
        size += len(name) + 2 + len(value.encode("latin-1", "replace")) + 2
    return size + 2


def check_request(method: str, target: str, headers: Iterable[tuple[str, str]], *, host: str,
                  scheme: str = "https") -> LimitExceeded | None:
    """The limit a viewer request exceeds, if any (``target`` is path plus ``?query``)."""
    pairs = list(headers)
    head = request_head_bytes(method, target, pairs)
    if head > MAX_REQUEST_HEAD_BYTES:
        return LimitExceeded(TOO_LARGE_STATUS, "RequestTooLarge",
                             f"request line and headers are {head} bytes; CloudFront allows {MAX_REQUEST_HEAD_BYTES}")
    url = len(f"{scheme}://{host}".encode("latin-1", "replace")) + len(target.encode("latin-1", "replace"))
    if url > MAX_URL_BYTES:
        return LimitExceeded(TOO_LARGE_STATUS, "UrlTooLong", f"the URL is {url} bytes; CloudFront allows {MAX_URL_BYTES}")
    return None
