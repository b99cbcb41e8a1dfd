"""The local edge's server protocol: a held write goes out with the next one, or at the
loop's next turn; nothing is lost, reordered or held back for more data."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from local.cloudfront.http_protocol import CoalescingTransport


class RecordingTransport:
    """What reaches the socket: one entry per write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.eof = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.writes.append(data)

    def write_eof(self) -> None:
        self.eof = True

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 8080) if name == "sockname" else default


def _wrapped() -> tuple[CoalescingTransport, RecordingTransport]:
    real = RecordingTransport()
    return CoalescingTransport(real, asyncio.get_running_loop()), real  # type: ignore[arg-type]


def test_a_head_and_the_body_written_after_it_go_out_as_one_write() -> None:
    async def scenario() -> list[bytes]:
        transport, real = _wrapped()
        transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        transport.write(b"{}")
        sent_at_once = list(real.writes)
        await asyncio.sleep(0)
        assert real.writes == sent_at_once  # nothing left for the next turn
        return sent_at_once

    assert asyncio.run(scenario()) == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]


def test_a_lone_write_goes_out_at_the_next_turn_so_a_stream_is_not_held_back() -> None:
    async def scenario() -> list[list[bytes]]:
        transport, real = _wrapped()
        seen = []
        for chunk in (b"data: 1\n\n", b"data: 2\n\n"):  # one chunk a turn, as an SSE stream arrives
            transport.write(chunk)
            await asyncio.sleep(0)
            seen.append(list(real.writes))
        return seen

    assert asyncio.run(scenario()) == [[b"data: 1\n\n"], [b"data: 1\n\n", b"data: 2\n\n"]]


def test_close_and_write_eof_send_what_is_held_first() -> None:
    async def scenario() -> tuple[list[bytes], bool, list[bytes], bool]:
        closing, real = _wrapped()
        closing.write(b"last")
        closing.close()
        ending, other = _wrapped()
        ending.write(b"end")
        ending.write_eof()
        await asyncio.sleep(0)  # the turn's flush finds nothing more
        return real.writes, real.closed, other.writes, other.eof

    assert asyncio.run(scenario()) == ([b"last"], True, [b"end"], True)


def test_everything_else_is_the_wrapped_transports() -> None:
    async def scenario() -> Any:
        transport, _ = _wrapped()
        return transport.get_extra_info("sockname")

    assert asyncio.run(scenario()) == ("127.0.0.1", 8080)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.binary(max_size=8), max_size=4), max_size=6))
def test_every_byte_goes_out_once_in_order_and_by_the_end_of_the_next_turn(turns: list[list[bytes]]) -> None:
    # Given writes spread over loop turns, what reaches the socket is the same bytes in the
    # same order, no write is empty, and each turn's bytes are out once the next turn ran.
    async def scenario() -> None:
        transport, real = _wrapped()
        written = b""
        for chunks in turns:
            for chunk in chunks:
                transport.write(chunk)
                written += chunk
            await asyncio.sleep(0)
            assert b"".join(real.writes) == written
        assert all(real.writes)

    asyncio.run(scenario())
