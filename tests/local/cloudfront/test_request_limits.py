"""CloudFront's documented request limits, as the local edge applies them."""

from __future__ import annotations

import anyio
import httpx
from hypothesis import given
from hypothesis import strategies as st

from local.cloudfront.request_limits import (
    MAX_REQUEST_HEAD_BYTES,
    MAX_URL_BYTES,
    NOT_APPLIED,
    check_request,
    request_head_bytes,
)
from tests.local.cloudfront.test_proxy import edge_settings_for

HOST = "d111111abcdef8.cloudfront.net"
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=20)
values = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=3000)


@given(headers=st.lists(st.tuples(names, values), max_size=12), path=st.text(alphabet="abc/", max_size=9000))
def test_a_request_is_refused_exactly_when_its_head_or_url_is_over_cloudfronts_limit(headers, path):
    target = "/" + path
    verdict = check_request("POST", target, headers, host=HOST)
    head = request_head_bytes("POST", target, headers)
    url = len(f"https://{HOST}") + len(target)
    if head > MAX_REQUEST_HEAD_BYTES:
        assert verdict is not None and (verdict.status, verdict.error) == (413, "RequestTooLarge")
    elif url > MAX_URL_BYTES:
        assert verdict is not None and (verdict.status, verdict.error) == (413, "UrlTooLong")
    else:
        assert verdict is None


def test_the_head_counts_the_request_line_and_every_header_line():
    # "POST /mcp HTTP/1.1\r\n" + "a: b\r\n" + "\r\n"
    assert request_head_bytes("POST", "/mcp", [("a", "b")]) == 20 + 6 + 2


def test_a_head_of_exactly_the_limit_passes_and_one_byte_more_is_refused():
    base = request_head_bytes("POST", "/mcp", [("authorization", "")])
    fits = [("authorization", "x" * (MAX_REQUEST_HEAD_BYTES - base))]
    assert request_head_bytes("POST", "/mcp", fits) == MAX_REQUEST_HEAD_BYTES
    assert check_request("POST", "/mcp", fits, host=HOST) is None
    over = [("authorization", "x" * (MAX_REQUEST_HEAD_BYTES - base + 1))]
    assert check_request("POST", "/mcp", over, host=HOST).status == 413  # type: ignore[union-attr]


def test_what_is_not_applied_says_why():
    assert NOT_APPLIED and all(len(line) > 60 for line in NOT_APPLIED)


def test_the_local_edge_answers_413_before_the_function_to_a_20_kb_token_and_a_70_kb_header():
    # Given the local edge (the program's viewer function and router; its origin is down,
    # so a request that got past the limits would be a 502, not a 413),
    from local.cloudfront.proxy import EdgeProxy

    proxy = EdgeProxy(edge_settings_for(edge_port=1, origin_ports={"us-east-1": 1, "eu-west-1": 1}))

    async def send_all() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=proxy)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:1") as client:
            return [
                await client.post("/mcp", headers={"authorization": "Bearer " + "a" * 20 * 1024}, content=b"{}"),
                await client.post("/mcp", headers={"x-big": "b" * 70_000}, content=b"{}"),
                await client.get("/mcp?q=" + "c" * 8_200),
                await client.post("/mcp", headers={"authorization": "Bearer " + "a" * 100}, content=b"{}"),
            ]

    try:
        token, header, url, small = anyio.run(send_all)
    finally:
        anyio.run(proxy.aclose)
    # when requests exceed CloudFront's limits, then the edge refuses them with 413 and closes,
    for response, error in ((token, "RequestTooLarge"), (header, "RequestTooLarge"), (url, "UrlTooLong")):
        assert response.status_code == 413, response.text
        assert response.headers["x-local-edge-error"] == error
        assert response.headers["x-cache"] == "Error from cloudfront"
        assert response.headers["connection"] == "close"
    # while a request within them reaches the function (a malformed token: its 401).
    assert small.status_code == 401
