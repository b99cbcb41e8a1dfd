"""The local edge's client to the origins (``local.cloudfront.origin_client``), against raw loopback
servers: keep-alive reuse, a kept connection the origin closed, bodies streamed as they
arrive, the between-packets read timeout, and what it sends."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from local.cloudfront.origin_client import (
    OriginConnectError,
    OriginPool,
    OriginProtocolError,
    OriginTimeoutError,
    sized,
)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return head, await reader.readexactly(length)


def serve(handler: Handler, test: Callable[[str, list[int]], Awaitable[None]]) -> None:
    """Run ``test(url, connections)`` against ``handler`` on a loopback port; ``connections``
    counts the connections the server accepted."""
    connections: list[int] = []

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        try:
            await handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(accepted, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            await test(f"http://127.0.0.1:{port}/mcp?a=1", connections)

    asyncio.run(main())


def replying(*parts: bytes, pause_s: float = 0.0) -> Handler:
    """A handler that reads one request and writes ``parts``, pausing ``pause_s`` between them."""
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        for i, part in enumerate(parts):
            if i:
                await asyncio.sleep(pause_s)
            writer.write(part)
            await writer.drain()

    return handler


async def answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    writer.write(OK)
    await writer.drain()


async def answer_forever(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        await answer_once(reader, writer)


async def answer(pool: OriginPool, url: str, *, method: str = "POST",
                 headers: tuple[tuple[str, str], ...] = (("host", "origin.example"),), body: bytes = b"{}",
                 read_timeout_s: float = 5, whole: bool = False) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and the whole body of one request through ``pool``."""
    response = await pool.request(method, url, list(headers), body, connect_timeout_s=5, read_timeout_s=read_timeout_s,
                                  whole=whole)
    try:
        return response.status, dict(response.headers), b"".join([chunk async for chunk in response.chunks()])
    finally:
        await response.aclose()


async def body_of(pool: OriginPool, url: str, body: bytes = b"{}", read_timeout_s: float = 5) -> tuple[int, bytes]:
    status, _, received = await answer(pool, url, body=body, read_timeout_s=read_timeout_s)
    return status, received


def answered_twice_on_two_connections(pause_s: float) -> Callable[[str, list[int]], Awaitable[None]]:
    """A test: two requests ``pause_s`` apart both answered, the second on a connection of its own."""
    async def test(url: str, connections: list[int]) -> None:
        pool = OriginPool()
        assert await body_of(pool, url) == (200, b"{}")
        await asyncio.sleep(pause_s)
        assert await body_of(pool, url) == (200, b"{}")
        assert len(connections) == 2
        await pool.aclose()

    return test


def test_a_connection_is_kept_for_the_next_request() -> None:
    async def test(url: str, connections: list[int]) -> None:
        pool = OriginPool()
        assert [await body_of(pool, url) for _ in range(3)] == [(200, b"{}")] * 3
        assert len(connections) == 1
        await pool.aclose()

    serve(answer_forever, test)


def test_a_kept_connection_the_origin_closed_is_replaced_without_failing_the_request() -> None:
    # answer_once: then the origin drops the idle connection (its keep-alive timeout)
    serve(answer_once, answered_twice_on_two_connections(pause_s=0.05))


def test_the_request_carries_the_body_length_and_the_callers_host_not_the_viewers_framing() -> None:
    seen: list[tuple[bytes, bytes]] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await read_request(reader))
        writer.write(OK)
        await writer.drain()

    async def test(url: str, connections: list[int]) -> None:
        pool = OriginPool()
        response = await pool.request("POST", url, [("host", "origin.example"), ("content-length", "999"),
                                                    ("transfer-encoding", "chunked"), ("x-a", "1")], b"hello",
                                      connect_timeout_s=5, read_timeout_s=5)
        await response.aclose()
        await pool.aclose()

    serve(record, test)
    head, body = seen[0]
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /mcp?a=1 HTTP/1.1"
    assert "host: origin.example" in lines and "content-length: 5" in lines and "x-a: 1" in lines
    assert not any(line.startswith(("transfer-encoding", "content-length: 999")) for line in lines)
    assert body == b"hello"


def test_a_chunked_answer_is_passed_on_piece_by_piece_as_it_arrives() -> None:
    release = asyncio.Event()

    async def stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                     b"6\r\nfirst\n\r\n")
        await writer.drain()
        await release.wait()  # the second piece only once the client has the first
        writer.write(b"7\r\nsecond\n\r\n0\r\n\r\n")
        await writer.drain()

    async def test(url: str, connections: list[int]) -> None:
        pool = OriginPool()
        response = await pool.request("POST", url, [], b"{}", connect_timeout_s=5, read_timeout_s=5)
        assert response.header("content-type") == "text/event-stream"
        pieces = []
        async for chunk in response.chunks():
            pieces.append(chunk)
            release.set()
        await response.aclose()
        await pool.aclose()
        assert pieces == [b"first\n", b"second\n"]

    serve(stream, test)


def test_the_read_timeout_is_between_packets() -> None:
    async def slow_but_steady_then_silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for _ in range(4):  # 0.8 s in all, a packet every 0.2 s
            writer.write(b"1\r\nx\r\n")
            await writer.drain()
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.5)  # then silent

    async def test(url: str, connections: list[int]) -> None:
        pool = OriginPool()
        response = await pool.request("POST", url, [], b"{}", connect_timeout_s=5, read_timeout_s=0.5)
        received = []
        with pytest.raises(OriginTimeoutError):
            async for chunk in response.chunks():
                received.append(chunk)
        assert received == [b"x"] * 4
        await response.aclose()
        await pool.aclose()

    serve(slow_but_steady_then_silent, test)


def test_a_silent_origin_times_out_before_its_headers_and_a_garbled_one_is_a_protocol_error() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(1.5)

    garbled = replying(b"SMTP ready\r\n\r\n")

    async def times_out(url: str, connections: list[int]) -> None:
        with pytest.raises(OriginTimeoutError):
            await body_of(OriginPool(), url, read_timeout_s=0.3)

    async def refused_as_garbled(url: str, connections: list[int]) -> None:
        with pytest.raises(OriginProtocolError):
            await body_of(OriginPool(), url)

    serve(silent, times_out)
    serve(garbled, refused_as_garbled)


def test_nobody_listening_is_a_connect_error() -> None:
    async def test() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(OriginConnectError):
            await body_of(OriginPool(), f"http://127.0.0.1:{port}/mcp")

    asyncio.run(test())


@pytest.mark.parametrize("whole", [False, True], ids=["as it arrives", "whole"])
def test_a_head_answer_has_no_body_and_its_connection_is_kept(whole: bool) -> None:
    async def head_then_ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 120\r\n\r\n")
        await writer.drain()
        await answer_forever(reader, writer)

    async def test(url: str, connections: list[int]) -> None:
        pool = OriginPool()
        status, headers, body = await answer(pool, url, method="HEAD", body=b"", read_timeout_s=1, whole=whole)
        assert (status, headers["content-length"], body) == (200, "120", b"")
        assert await body_of(pool, url) == (200, b"{}")
        assert len(connections) == 1
        await pool.aclose()

    serve(head_then_ok, test)


@pytest.mark.parametrize("whole", [False, True], ids=["as it arrives", "whole"])
def test_an_informational_answer_is_skipped_for_the_one_that_follows(whole: bool) -> None:
    early_hints = replying(b"HTTP/1.1 103 Early Hints\r\nlink: </a>; rel=preload\r\n\r\n", OK, pause_s=0.05)

    async def test(url: str, connections: list[int]) -> None:
        pool = OriginPool()
        status, headers, body = await answer(pool, url, headers=(("expect", "100-continue"),), whole=whole)
        assert (status, "link" in headers, body) == (200, False, b"{}")
        await pool.aclose()

    serve(early_hints, test)


def test_an_answer_without_a_length_ends_with_the_connection_and_one_cut_short_is_an_error() -> None:
    until_close = replying(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nall of it")
    cut_short = replying(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nnot all")

    async def whole(url: str, connections: list[int]) -> None:
        assert await body_of(OriginPool(), url) == (200, b"all of it")

    async def refused(url: str, connections: list[int]) -> None:
        with pytest.raises(OriginProtocolError):
            await body_of(OriginPool(), url)

    serve(until_close, whole)
    serve(cut_short, refused)


def test_read_answers_the_whole_body_whether_it_came_with_the_head_or_later() -> None:
    later = replying(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nfirst", b"-last", pause_s=0.05)

    async def whole(url: str, connections: list[int]) -> None:
        pool = OriginPool()
        for _ in range(2):  # the body after its head, then (kept connection) with it
            response = await pool.request("POST", url, [], b"{}", connect_timeout_s=5, read_timeout_s=5)
            assert await response.read() in (b"first-last", b"{}")
            await response.aclose()
        await pool.aclose()

    async def answer_later_then_ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await later(reader, writer)
        await answer_forever(reader, writer)

    serve(answer_later_then_ok, whole)


def test_data_the_origin_sends_unasked_after_an_answer_retires_its_connection() -> None:
    async def answer_then_garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answer_once(reader, writer)
        await asyncio.sleep(0.02)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nstale")  # belongs to no request
        await writer.drain()
        await answer_forever(reader, writer)

    # The next request never reads the stale answer as its own: it goes on a new connection.
    serve(answer_then_garbage, answered_twice_on_two_connections(pause_s=0.1))


@pytest.mark.parametrize("whole", [False, True], ids=["as it arrives", "whole"])
def test_an_answer_faster_than_its_reader_is_held_back_at_the_origin_not_buffered_whole(whole: bool) -> None:
    piece, pieces = b"x" * 65_536, 1_024  # 64 MiB: more than loopback's socket buffers hold
    written: list[int] = []

    async def fast(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % (len(piece) * pieces))
        for _ in range(pieces):
            writer.write(piece)
            await writer.drain()
            written.append(1)

    async def test(url: str, connections: list[int]) -> None:
        pool = OriginPool()
        response = await pool.request("GET", url, [], b"", connect_timeout_s=5, read_timeout_s=5, whole=whole)
        await asyncio.sleep(0.3)  # a slow viewer: nothing taken yet
        # The client stopped reading, so the origin could not write it all.
        assert len(written) < pieces // 2
        received = 0
        async for chunk in response.chunks():
            received += len(chunk)
        assert (received, len(written)) == (len(piece) * pieces, pieces)
        await response.aclose()
        await pool.aclose()

    serve(fast, test)


def test_a_request_body_larger_than_the_socket_buffers_is_written_whole_to_a_slow_origin() -> None:
    body = b"b" * (16 * 1024 * 1024)  # more than loopback's socket buffers hold: the write must wait

    async def slow_reader(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.startswith(b"content-length")))
        await asyncio.sleep(0.2)  # the client's write fills the buffers meanwhile
        received = len(await reader.readexactly(length))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%d" % (len(str(received)), received))
        await writer.drain()

    async def test(url: str, connections: list[int]) -> None:
        assert await body_of(OriginPool(), url, body=body) == (200, str(len(body)).encode())

    serve(slow_reader, test)


def test_an_origin_that_closes_a_new_connection_without_answering_is_a_protocol_error() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)  # then closes without a word

    async def test(url: str, connections: list[int]) -> None:
        with pytest.raises(OriginProtocolError):
            await body_of(OriginPool(), url)

    serve(hang_up, test)


def test_a_sized_answer_asked_whole_comes_back_whole_and_its_read_timeout_is_still_between_packets() -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 4\r\n\r\n"

    def trickling(packets: int) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await read_request(reader)
            writer.write(head)
            await writer.drain()
            for _ in range(packets):  # a packet every 0.2 s, 0.8 s in all for the whole body
                await asyncio.sleep(0.2)
                writer.write(b"x")
                await writer.drain()
            await asyncio.sleep(1.5)  # then silent

        return handler

    async def whole_body(url: str, connections: list[int]) -> None:
        # Given an origin whose body comes a byte every 0.2 s, and a read timeout of 0.5 s
        pool = OriginPool()
        response = await pool.request("POST", url, [], b"{}", connect_timeout_s=5, read_timeout_s=0.5, whole=True)
        # Then the request answers once the answer is all in (each packet restarted the timeout)
        assert response.status == 200 and await response.read() == b"xxxx"
        await response.aclose()
        await pool.aclose()

    async def cut_short(url: str, connections: list[int]) -> None:
        # Given one that goes silent after two of the four bytes, Then the timeout still ends the wait
        pool = OriginPool()
        with pytest.raises(OriginTimeoutError):
            await pool.request("POST", url, [], b"{}", connect_timeout_s=5, read_timeout_s=0.5, whole=True)
        await pool.aclose()

    serve(trickling(4), whole_body)
    serve(trickling(2), cut_short)


def test_a_stream_asked_whole_is_still_answered_at_its_head() -> None:
    # Given an SSE answer (sized or not, a stream is passed on as it arrives)
    stream = replying(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
                      b"5\r\nhello\r\n", b"0\r\n\r\n", pause_s=0.5)

    async def test(url: str, connections: list[int]) -> None:
        pool = OriginPool()
        began = asyncio.get_running_loop().time()
        response = await pool.request("POST", url, [], b"{}", connect_timeout_s=5, read_timeout_s=5, whole=True)
        # Then the request answers at its head, before its first event
        assert asyncio.get_running_loop().time() - began < 0.4
        assert b"".join([chunk async for chunk in response.chunks()]) == b"hello"
        await response.aclose()
        await pool.aclose()

    serve(stream, test)


@given(st.lists(st.tuples(st.sampled_from(["content-length", "content-type", "transfer-encoding", "x-other"]),
                          st.sampled_from(["12", "application/json", "text/event-stream", "text/event-stream; a=b",
                                           "chunked", ""])), max_size=5))
def test_an_answer_is_sized_when_it_has_a_length_and_is_not_an_event_stream(headers: list[tuple[str, str]]) -> None:
    has_length = any(n == "content-length" for n, _ in headers)
    content_type = next((v for n, v in headers if n == "content-type"), "")  # the first, as header() reads it
    assert sized(headers) is (has_length and not content_type.startswith("text/event-stream"))
