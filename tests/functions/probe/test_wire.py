"""The SSE decoder (WHATWG rules), the deadline, the bounded decoding and the byte
budget: properties that must hold however the stream is cut into chunks."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from functions.probe.errors import ProbeLimitError, ProbeProtocolError, ProbeTimeoutError
from functions.probe.wire import DECODE_PIECE_BYTES, BoundedDecoder, Deadline, ExchangeBudget, SseDecoder

payloads = st.lists(st.dictionaries(st.text(max_size=5), st.text(max_size=20), max_size=3), min_size=1, max_size=4)
newlines = st.sampled_from(["\n", "\r\n", "\r"])


def encode(messages: list[dict], newline: str, comments: bool) -> bytes:
    out = "\ufeff"
    for message in messages:
        if comments:
            out += f": ping{newline}"
        out += f"event: message{newline}id: 7{newline}data: {json.dumps(message)}{newline}{newline}"
    return out.encode()


@given(payloads, newlines, st.booleans(), st.lists(st.integers(1, 40), max_size=30))
@settings(max_examples=200, deadline=None)
def test_events_are_the_same_however_the_stream_is_chunked(messages, newline, comments, cuts):
    data = encode(messages, newline, comments)
    decoder = SseDecoder()
    events = []
    position = 0
    for size in cuts:
        events += decoder.feed(data[position:position + size])
        position += size
    events += decoder.feed(data[position:])
    if newline == "\r":  # a lone CR at the very end is only known to end the line once more arrives
        events += decoder.feed(b"\n")
    assert [json.loads(d) for e, d in events if e == "message"] == messages


def test_multi_line_data_is_joined_with_newlines_and_default_event_is_message():
    decoder = SseDecoder()
    assert decoder.feed(b"data: one\ndata:two\n\n") == [("message", "one\ntwo")]


def test_event_larger_than_the_cap_is_a_protocol_error():
    decoder = SseDecoder(max_event_bytes=100)
    with pytest.raises(ProbeProtocolError, match="larger than 100 bytes"):
        decoder.feed(b"data: " + b"x" * 200)


def test_invalid_utf8_is_a_protocol_error():
    with pytest.raises(ProbeProtocolError, match="not valid UTF-8"):
        SseDecoder().feed(b"data: \xff\xfe\n\n")


def test_deadline_gives_the_time_left_and_then_refuses():
    now = [100.0]
    deadline = Deadline(2.0, clock=lambda: now[0])
    assert deadline.timeout_for("x") == 2.0
    now[0] = 101.5
    assert deadline.timeout_for("x") == pytest.approx(0.5)
    now[0] = 102.0
    with pytest.raises(ProbeTimeoutError, match="2 s deadline"):
        deadline.timeout_for("reading")


# --- bounded decoding and the exchange's byte budget -------------------------------------

ENCODERS = {"gzip": gzip.compress, "deflate": zlib.compress, "identity": lambda data: data}
BODIES = st.one_of(st.binary(max_size=2000), st.integers(0, 300_000).map(lambda n: b"\n" * n))


def chunked(data: bytes, sizes: list[int]) -> list[bytes]:
    out, at = [], 0
    for size in sizes:
        out.append(data[at:at + size])
        at += size
    return [*out, data[at:]]


@settings(max_examples=80, deadline=None)
@given(body=BODIES, encoding=st.sampled_from(list(ENCODERS)), sizes=st.lists(st.integers(1, 5000), max_size=8))
def test_decoding_in_any_chunking_gives_the_body_in_bounded_pieces(body: bytes, encoding: str, sizes: list[int]):
    decoder = BoundedDecoder(encoding)
    pieces = [p for chunk in chunked(ENCODERS[encoding](body), sizes) for p in decoder.decode(chunk)]
    decoder.finish()
    assert b"".join(pieces) == body
    if encoding != "identity":
        assert all(len(p) <= DECODE_PIECE_BYTES for p in pieces)


@settings(max_examples=40, deadline=None)
@given(body=st.binary(min_size=20, max_size=2000), cut=st.integers(1, 10))
def test_a_truncated_compressed_body_is_a_protocol_error(body: bytes, cut: int):
    decoder = BoundedDecoder("gzip")
    with pytest.raises(ProbeProtocolError, match="corrupt"):
        for _ in decoder.decode(gzip.compress(body)[:-cut]):
            pass
        decoder.finish()


@pytest.mark.parametrize("encoding", ["br", "zstd", "gzip, gzip", "compress"])
def test_encodings_the_probe_did_not_ask_for_are_refused(encoding: str):
    with pytest.raises(ProbeProtocolError, match="unsupported Content-Encoding"):
        BoundedDecoder(encoding)


@given(spends=st.lists(st.integers(0, 1000), max_size=30), limit=st.integers(0, 10_000))
def test_the_budget_refuses_exactly_when_the_total_passes_the_limit(spends: list[int], limit: int):
    budget = ExchangeBudget(limit)
    total = 0
    for n in spends:
        total += n
        if total > limit:
            with pytest.raises(ProbeLimitError):
                budget.spend(n, "tools/list")
            return
        budget.spend(n, "tools/list")
