"""A/B: the local edge's origin client (``local/cloudfront/origin_client.py``, httptools' C parser)
against the same client on ``h11`` (the sans-IO HTTP/1.1 library uvicorn and httpcore use),
measured in the same run.

    .venv/bin/python -m bench.origin_client_ab [--requests 2000] [--rounds 10] [--json]

Two measures, each alternating the two clients round by round:

- **over loopback**: sequential 2026-07-28 ``tools/list`` requests to the real origin
  (the prod stack's us-east-1 origin under uvicorn, as ``scripts/run-local`` starts it),
  each client keeping its connection alive, from one asyncio loop in this process:
  median and p95 microseconds per request (the origin's own time included, the same for both);
- **client work alone**: one request written and a recorded ``tools/list`` answer parsed
  back per iteration, no socket (the head built, the answer's status, headers and
  body read, the connection made ready for the next request): microseconds per exchange.

The h11 client here does what ``OriginPool`` does on the path measured (keep-alive, a
sized request body, a sized or chunked answer read whole, a 1xx skipped); it exists to be
measured against, not to be used. Not part of ``python -m bench``: its figures are quoted
in ``local/cloudfront/origin_client.py``'s docstring.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import h11
import httptools
import httpx

from bench.local_bench import MODERN, REGION, _body, _headers, start, targets, wait_until_served
from local.client import token_for
from local.cloudfront.origin_client import OriginPool, _Parsed

# A recorded 2026-07-28 tools/list answer of the origin (its headers; the body's size).
ANSWER_HEAD = (b"HTTP/1.1 200 OK\r\ndate: Tue, 01 Dec 2026 15:00:00 GMT\r\ncontent-type: application/json\r\n"
               b"mcp-protocol-version: " + MODERN.encode() + b"\r\nvary: Origin\r\nx-request-id: 0123456789abcdef\r\n")
ANSWER_BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": [
    {"name": f"tool{i}", "description": "x" * 80, "inputSchema": {"type": "object", "properties": {}}}
    for i in range(6)]}}).encode()
ANSWER = ANSWER_HEAD + b"content-length: " + str(len(ANSWER_BODY)).encode() + b"\r\n\r\n" + ANSWER_BODY


class H11Client:
    """One keep-alive connection to one origin, on h11."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._conn = h11.Connection(h11.CLIENT)

    def request_bytes(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
        if self._conn.our_state is h11.DONE and self._conn.their_state is h11.DONE:
            self._conn.start_next_cycle()
        head = [("host", f"{self.host}:{self.port}"), *headers, ("content-length", str(len(body)))]
        return (self._conn.send(h11.Request(method=method, target=target, headers=head)) or b"") + \
            (self._conn.send(h11.Data(data=body)) or b"") + (self._conn.send(h11.EndOfMessage()) or b"")

    def feed(self, data: bytes) -> None:
        self._conn.receive_data(data)

    def answer(self) -> tuple[int, list[tuple[str, str]], bytes] | None:
        """The whole answer, once it is in (None: more data needed)."""
        while True:
            event = self._conn.next_event()
            if event is h11.NEED_DATA:
                return None
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                self._status = event.status_code
                self._headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in event.headers]
                self._body: list[bytes] = []
            elif isinstance(event, h11.Data):
                self._body.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return self._status, self._headers, b"".join(self._body)

    async def request(self, method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> int:
        if self._streams is None:
            self._streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._streams
        writer.write(self.request_bytes(method, target, headers, body))
        await writer.drain()
        while (whole := self.answer()) is None:
            self.feed(await reader.read(64 * 1024))
        return whole[0]

    async def aclose(self) -> None:
        if self._streams is not None:
            self._streams[1].close()


def httptools_exchange(headers: list[tuple[str, str]], body: bytes) -> int:
    """What ``OriginPool`` does for one exchange, without the socket."""
    payload = ("\r\n".join(["POST /mcp HTTP/1.1", "host: 127.0.0.1:1", *(f"{n}: {v}" for n, v in headers),
                            f"content-length: {len(body)}"]) + "\r\n\r\n").encode("latin-1") + body
    parsed = _Parsed()
    parser = parsed.parser = httptools.HttpResponseParser(parsed)
    parser.feed_data(ANSWER)
    b"".join(parsed.body)
    return len(payload) + parser.get_status_code()


def client_work(headers: list[tuple[str, str]], body: bytes, iterations: int, rounds: int) -> dict[str, float]:
    h11_client = H11Client("127.0.0.1", 1)

    def h11_exchange() -> int:
        payload = h11_client.request_bytes("POST", "/mcp", headers, body)
        h11_client.feed(ANSWER)
        answer = h11_client.answer()
        assert answer is not None and answer[2] == ANSWER_BODY
        return len(payload) + answer[0]

    ways = {"httptools": lambda: httptools_exchange(headers, body), "h11": h11_exchange}
    samples: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, exchange in ways.items():
            began = time.perf_counter()
            for _ in range(iterations // rounds):
                exchange()
            samples[name].append((time.perf_counter() - began) / (iterations // rounds) * 1e6)
    return {name: statistics.median(s) for name, s in samples.items()}


async def loopback(url: str, headers: list[tuple[str, str]], requests: int, rounds: int) -> dict[str, dict[str, float]]:
    host_port = url.split("//", 1)[1].split("/", 1)[0]
    host, port = host_port.split(":")
    pool = OriginPool()
    h11_client = H11Client(host, int(port))
    body = json.dumps(_body("tools/list", 1)).encode()

    async def via_httptools() -> int:
        response = await pool.request("POST", url, headers, body, connect_timeout_s=10, read_timeout_s=30)
        b"".join([chunk async for chunk in response.chunks()])
        await response.aclose()
        return response.status

    async def via_h11() -> int:
        return await h11_client.request("POST", "/mcp", headers, body)

    ways = {"httptools": via_httptools, "h11": via_h11}
    samples: dict[str, list[float]] = {name: [] for name in ways}
    try:
        for way in ways.values():  # warm-up: connections, the origin's first-call paths
            for _ in range(20):
                assert (status := await way()) == 200, status
        for _ in range(rounds):
            for name, way in ways.items():
                for _ in range(requests // rounds):
                    began = time.perf_counter()
                    status = await way()
                    samples[name].append((time.perf_counter() - began) * 1e6)
                    assert status == 200, f"{name}: {status}"
    finally:
        await pool.aclose()
        await h11_client.aclose()
    return {name: {"median_us": statistics.median(s), "p95_us": sorted(s)[int(0.95 * len(s))]}
            for name, s in samples.items()}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=2000, help="sequential requests per client over loopback")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv if argv is not None else [])
    with tempfile.TemporaryDirectory(prefix="origin-client-ab-") as tmp:
        supervisor, plan = start(Path(tmp))
        try:
            origin = targets(plan, token_for(plan))[1]
            with httpx.Client(headers=origin.headers, trust_env=False) as client:
                wait_until_served(client, origin)
            headers = [*origin.headers.items(), *_headers("tools/list").items()]
            over_loopback = asyncio.run(loopback(origin.url, headers, args.requests, args.rounds))
        finally:
            supervisor.stop_all()
    work = client_work(headers, json.dumps(_body("tools/list", 1)).encode(), args.requests * 10, args.rounds)
    result = {"loopback": over_loopback, "client_work_us": work}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"origin client A/B ({REGION} origin, {args.requests} sequential tools/list per client, same run)")
        print("| client | loopback median (us) | loopback p95 (us) | client work per exchange (us) |")
        print("|---|---|---|---|")
        for name in ("httptools", "h11"):
            row = over_loopback[name]
            print(f"| {name} | {row['median_us']:.0f} | {row['p95_us']:.0f} | {work[name]:.1f} |")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
