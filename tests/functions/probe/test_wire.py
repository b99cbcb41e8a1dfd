"""The probe's bounded decoding and byte budget, as properties."""

from __future__ import annotations

import gzip
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from functions.probe.errors import ProbeLimitError, ProbeProtocolError
from functions.probe.wire import DECODE_PIECE_BYTES, BoundedDecoder, ExchangeBudget

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
