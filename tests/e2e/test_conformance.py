"""The official MCP conformance suite (devkit/conformance.py) through the local edge against the
same server run directly: the edge is transparent, check for check, in both requirement sets the
suite ships, except where the edge itself enforces what the server would (local/conformance.py,
``EDGE_EXPECTATIONS``: the edge refuses a DNS-rebinding request).

No run sets ``server.getStream``: no scenario these servers are held to needs a GET stream.
The edge answers GET and DELETE on the MCP path with 405, which the suite's SDK client takes
as "no standalone stream" and ``server-session-lifecycle`` reports as SKIPPED; the scenarios
that GET or DELETE at all (``server-sse-polling``, not scored, and ``server-session-lifecycle``)
do so only with an ``MCP-Session-Id``, which stateless servers never issue; the suite's
readiness wait takes any answer to its GET. A stack whose server streams on GET would set
``getStream: true`` in its ``mcp-edge:server`` for its run, and say why here."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devkit import conformance
from local.conformance import EDGE_EXPECTATIONS, Comparison, compare, direct_url
from local.plan import LocalPlan
from tests.e2e.conftest import SessionTopology, own_topology

pytestmark = pytest.mark.e2e

TYPESCRIPT_STACK = Path(__file__).with_name("stacks") / "Pulumi.conformance-typescript.yaml"


@pytest.fixture(scope="module")
def suite() -> Path:
    try:
        return conformance.install_suite()
    except conformance.ConformanceUnavailableError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def typescript_topology(suite: Path, session_topology: SessionTopology,
                        tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlan]:
    """examples/typescript (official TypeScript SDK) in a one-region topology of its own; the
    session's is stopped meanwhile (two on 2 cores slow each other), so the tests on the
    session's topology come first in this module."""
    with own_topology(TYPESCRIPT_STACK, "conformance-typescript", tmp_path_factory.mktemp("conformance-ts-run")) as plan:
        yield plan


def assert_transparent(comparisons: list[Comparison]) -> None:
    report = "\n\n".join(f"{c.label}:\n{c.table()}" for c in comparisons)
    problems = [f"{c.label}: {p}" for c in comparisons for p in c.unexpected()]
    assert not problems, "the edge is not transparent:\n" + "\n".join(problems) + "\n\n" + report


def assert_both_runs_exercised_the_server(comparisons: list[Comparison]) -> None:
    """Every requirement set ran its scenarios both ways, and some passed (a run refused at
    the door, say a 401 for every request, would fail everything alike)."""
    for c in comparisons:
        assert set(c.direct.results) == set(c.edge.results), c.label
        assert any(r.passed for s, r in c.edge.results.items() if s not in {s for s, _ in EDGE_EXPECTATIONS}), c.table()


def test_demo_server_gets_the_same_verdicts_through_the_edge(suite: Path, session_topology: SessionTopology,
                                                             tmp_path: Path) -> None:
    plan = session_topology.get().plan
    comparisons = compare(plan, tmp_path, requirement_sets=conformance.REQUIREMENT_SETS)
    assert_both_runs_exercised_the_server(comparisons)
    assert_transparent(comparisons)


def test_direct_url_is_the_origin_process_on_the_server_path(session_topology: SessionTopology) -> None:
    plan = session_topology.get().plan
    assert direct_url(plan) == f"{plan.origins[0].url}{plan.server.get('path') or plan.mcp_path}"
    assert direct_url(plan) != plan.mcp_url


def test_typescript_sdk_server_gets_the_same_verdicts_through_the_edge(typescript_topology: LocalPlan,
                                                                       tmp_path: Path) -> None:
    comparisons = compare(typescript_topology, tmp_path, requirement_sets=conformance.REQUIREMENT_SETS)
    assert_both_runs_exercised_the_server(comparisons)
    assert_transparent(comparisons)


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[dict[str, list[str]]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        type(self).seen.append({name: self.headers.get_all(name) or [] for name in ("host", "origin", "authorization")})
        self.send_response(400)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_the_header_hook_adds_headers_to_every_request_but_keeps_the_suites_own(suite: Path, tmp_path: Path) -> None:
    """Every way the suite sends (its SDK client's fetch; undici's request for DNS rebinding;
    node:http for header validation) carries the injected Authorization, once; an injected header
    the suite sets itself (Origin, in its DNS-rebinding requests) stays as the suite set it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    _Recorder.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        run = conformance.run_suite(url, tmp_path, scenarios=["dns-rebinding-protection", "tools-list", "http-header-validation"],
                                    headers={"Authorization": "Bearer injected", "Origin": "https://injected.example"},
                                    timeout_s=120)
    finally:
        server.shutdown()
        thread.join()
    assert set(run.results) == {"dns-rebinding-protection", "tools-list", "http-header-validation"}
    seen = _Recorder.seen
    assert seen, "the suite sent nothing"
    assert all(h["authorization"] == ["Bearer injected"] for h in seen), json.dumps(seen)
    assert all(len(h["origin"]) == 1 for h in seen), json.dumps(seen)
    rebinding = [h for h in seen if h["host"] == ["evil.example.com"]]
    assert rebinding and all(h["origin"] == ["http://evil.example.com"] for h in rebinding), json.dumps(seen)
    assert any(h["origin"] == ["https://injected.example"] for h in seen), json.dumps(seen)


def test_node_used_is_new_enough() -> None:
    try:
        node = conformance.node_binary()
    except conformance.ConformanceUnavailableError as exc:
        pytest.skip(str(exc))
    version = subprocess.run([str(node), "--version"], capture_output=True, text=True, check=True).stdout
    assert int(version.strip().lstrip("v").split(".")[0]) >= conformance.MIN_NODE_MAJOR
