"""Long tool calls through the local edge with the prod stack's settings: CloudFront's
60 s read timeout between packets against the prod origins' 300 s function timeout.

Each call takes a minute or two (real seconds: the timeout is CloudFront's, not ours
to shorten); both eras and the 70 s answer that is cut share one 100 s call window."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest

from local.client import connect, token_for
from local.plan import LocalPlan
from stack_config.loading import load_from_stack_file
from tests.e2e.conftest import SessionTopology

pytestmark = pytest.mark.e2e

PROD = load_from_stack_file("prod")
READ_TIMEOUT_S = PROD.edge.origin_read_timeout_s


def test_the_prod_stack_lets_calls_outlive_the_edges_read_timeout(plan: LocalPlan) -> None:
    # The setting the tests below are about, as the local edge got it from the program.
    assert (READ_TIMEOUT_S, PROD.origin.timeout_s) == (60, 300)
    assert plan.edge.default_origin.read_timeout_s == READ_TIMEOUT_S


@dataclass
class CutAnswer:
    """The 70 s silent answer's request, sent in a thread of its own: it waits out the read
    timeout in the same minute as the 100 s calls instead of a minute of its own."""

    thread: threading.Thread
    outcome: list[tuple[httpx.Response, float] | BaseException] = field(default_factory=list)

    def result(self) -> tuple[httpx.Response, float]:
        self.thread.join(timeout=150)
        assert not self.thread.is_alive(), "the 70 s call did not come back within 150 s"
        outcome = self.outcome[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


@pytest.fixture(scope="module")
def cut_answer(session_topology: SessionTopology) -> Iterator[CutAnswer]:
    plan = session_topology.get().plan
    # Given a handshake-era client that accepts only JSON (so the origin cannot stream) and a
    # call that answers after 70 s of silence,
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "countdown", "arguments": {"steps": 35, "interval_s": 2.0}}}
    headers = {"authorization": f"Bearer {token_for(plan)}", "content-type": "application/json",
               "accept": "application/json", "mcp-protocol-version": "2025-11-25",
               "cloudfront-viewer-country": "DE"}

    def send() -> None:
        try:
            started = time.monotonic()
            response = httpx.post(plan.mcp_url, json=body, headers=headers, timeout=120)
            cut.outcome.append((response, time.monotonic() - started))
        except BaseException as exc:  # re-raised by the test that reads it
            cut.outcome.append(exc)

    cut = CutAnswer(threading.Thread(target=send, name="70 s call", daemon=True))
    cut.thread.start()
    yield cut
    cut.thread.join(timeout=150)  # not left running past the module, whichever tests ran


def test_a_100_second_silent_tool_call_completes_through_the_edge_in_both_eras(
        plan: LocalPlan, cut_answer: CutAnswer) -> None:
    # (cut_answer: the 70 s call below is under way beside these two, in the same silent window.)
    # Given a tool call that emits nothing for 100 s (no progress token: 50 silent steps of 2 s),
    token = token_for(plan)
    arguments = {"steps": 50, "interval_s": 2.0}
    results: dict[str, Any] = {}

    async def call(mode: str) -> None:
        async with connect(plan.mcp_url, token, mode=mode, headers={"cloudfront-viewer-country": "DE"}) as client:
            # Listed first: the client validates the result against the listed schema, and
            # after 100 s the e2e tokens (10 s, plus the stack's 30 s leeway) have expired.
            await client.list_tools()
            started = time.monotonic()
            result = await client.call_tool("countdown", arguments)
            results[mode] = (client.protocol_version, result, time.monotonic() - started)

    async def both() -> None:
        async with anyio.create_task_group() as tasks:
            for mode in ("auto", "legacy"):
                tasks.start_soon(call, mode)

    # when both eras call it through the local edge (CloudFront's 60 s between packets),
    anyio.run(both)
    # then each completes: the SDK's keep-alives kept the response alive past the read timeout.
    for mode, (protocol, result, elapsed) in results.items():
        assert (protocol == "2026-07-28") == (mode == "auto"), protocol
        assert not result.is_error, result.content
        assert result.structured_content == {"steps": 50, "message": "counted down 50 steps"}
        assert elapsed >= 100 > READ_TIMEOUT_S


def test_a_silent_70_second_answer_is_cut_with_a_504_at_the_read_timeout(cut_answer: CutAnswer) -> None:
    # (The request, a handshake-era JSON-only call answering after 70 s of silence, is sent
    # by the fixture: see cut_answer.)
    response, elapsed = cut_answer.result()
    # when it goes through the edge, then the edge answers 504 once the read timeout passes
    # without a packet, as CloudFront does (and does not retry the POST).
    assert response.status_code == 504, response.text
    assert response.headers["x-local-edge-error"] == "OriginReadTimeout"
    assert response.headers["x-cache"] == "Error from cloudfront"
    assert READ_TIMEOUT_S <= elapsed < 70
