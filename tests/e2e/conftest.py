"""One local topology of the prod stack for the whole end-to-end session: real processes
on loopback, free ports chosen at run time, everything stopped at the end."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from devkit.mock_program import ProgramRun, run_program
from local.aws.resources import client
from local.plan import LocalPlan, Options, Ports, build_plan
from local.supervisor import group_alive, port_is_free
from local.topology import Topology
from stack_config.loading import load_from_stack_file
from tests.cimd import LocalCA, make_test_ca

# Fast enough that probe checks take seconds; slow enough for 2 cores to keep up.
PROBE_INTERVAL_S = 5.0
DEFAULT_COUNTRY = "JP"
# Short enough that the OAuth tests see clients refresh; the edge and origins accept a
# token for the stack's leeway (30 s) past its expiry.
TOKEN_LIFETIME_S = 10
T = TypeVar("T")


class SessionTopology:
    """The session's topology, started on first use; a test that needs the machine to itself
    (the run command starts a second topology) may stop it, and the next user starts it again."""

    def __init__(self, plan: LocalPlan):
        self.plan = plan
        self.running: Topology | None = None
        self.pids: list[int] = []

    def get(self) -> Topology:
        if self.running is None:
            topology = Topology(self.plan)
            topology.start()
            topology.started_at = time.monotonic()  # type: ignore[attr-defined]
            self.running = topology
        return self.running

    def stop(self) -> None:
        if self.running is not None:
            self.pids += self.running.supervisor.pids()
            self.running.stop()
            self.running = None


# The session's topology once created: a module running a stack of its own stops it without
# having to create it (which would run the prod program for nothing).
_SESSIONS: list[SessionTopology] = []


def stop_session_topology() -> None:
    """Stop the session's topology if it runs (two topologies on 2 cores slow each other); the
    next test that needs it starts it again."""
    for session in _SESSIONS:
        session.stop()


@contextmanager
def own_topology(stack_file: Path, name: str, run_dir: Path) -> Iterator[LocalPlan]:
    """A stack file's own topology for one module: the session's is stopped first (two on 2 cores
    slow each other), probes run once at start only (the tests count what reaches the origins),
    and everything it started is stopped at the end, a failed start included."""
    stop_session_topology()
    config = load_from_stack_file(stack_file)
    plan = build_plan(Options(stack=str(stack_file), ports=Ports.free(config.regions), probe_interval_s=3600,
                              run_dir=run_dir), run=run_program(name, stack_file=stack_file))
    topology = Topology(plan)
    try:
        topology.start()
        yield plan
    finally:
        topology.stop()


@pytest.fixture(scope="session")
def local_ca(tmp_path_factory: pytest.TempPathFactory) -> LocalCA:
    """The CA of the https client ID metadata documents the OAuth tests publish; the dev issuer trusts it."""
    return make_test_ca(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def session_topology(tmp_path_factory: pytest.TempPathFactory, prod: ProgramRun,
                     local_ca: LocalCA) -> Iterator[SessionTopology]:
    ports = Ports.free(load_from_stack_file("prod").regions)
    plan = build_plan(Options(stack="prod", ports=ports, probe_interval_s=PROBE_INTERVAL_S,
                              default_country=DEFAULT_COUNTRY, retry_delay_s=1.0,
                              run_dir=tmp_path_factory.mktemp("local-run"), token_lifetime_s=TOKEN_LIFETIME_S,
                              trusted_ca_file=str(local_ca.ca_file)), run=prod)
    session = SessionTopology(plan)
    _SESSIONS.append(session)
    try:
        yield session
    finally:
        _SESSIONS.remove(session)
        session.stop()
        # Nothing left behind: every port free, no process of any child's group alive.
        leftovers = [p for p in session.pids if group_alive(p)]
        busy = [p for p in [*ports.all(), *(p for o in plan.origins for p in o.extra_ports)]
                if not port_is_free(p)]
        assert not leftovers and not busy, f"left behind: groups {leftovers}, ports {busy}"


@pytest.fixture
def topology(session_topology: SessionTopology) -> Topology:
    return session_topology.get()


@pytest.fixture
def plan(topology: Topology) -> LocalPlan:
    return topology.plan


def wait_for(check: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = 1.0) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"{what}: not within {timeout_s:.0f} s (last: {last!r:.500})")


def query_items(plan: LocalPlan, pk: str, region: str) -> list[dict[str, Any]]:
    """Every item of one partition of the results table's copy in ``region``. Queries,
    never scans: the emulator serves one request at a time."""
    table = plan.tables[0]
    ddb = client(plan, "dynamodb", region)
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table.name, "KeyConditionExpression": "pk = :pk",
                              "ExpressionAttributeValues": {":pk": {"S": pk}}}
    while True:
        page = ddb.query(**kwargs)
        items.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def latest_items(plan: LocalPlan) -> list[dict[str, Any]]:
    """The latest state of every target, as each probe region's consumer wrote it (in its region's copy)."""
    return [item for probe in plan.probe_regions
            for item in query_items(plan, f"LATEST#{plan.server_id}", probe)
            if item["sk"]["S"].startswith(f"TARGET#{probe}#")]


def history_items(plan: LocalPlan) -> list[dict[str, Any]]:
    """Every probe outcome recorded, all probe regions and targets."""
    return [item for probe in plan.probe_regions for region in plan.regions for kind in ("edge", "origin")
            for item in query_items(plan, f"HISTORY#{plan.server_id}#{probe}#{kind}@{region}", probe)]


def ledger(plan: LocalPlan) -> list[dict[str, Any]]:
    """Every destination record the probe workers sent (one JSON line each)."""
    records: list[dict[str, Any]] = []
    for path in sorted((Path(plan.run_dir) / "ledger").glob("*.jsonl")):
        records.extend(json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return records


def avoided_regions(plan: LocalPlan) -> list[str]:
    """The regions the edge routes around: the region-health document as the local edge reads it."""
    from functions.contract import REGION_HEALTH_KEY
    from local.cloudfront.key_value_store import StoreReader

    assert plan.health_store is not None, "the program deploys a region-health store"
    raw = StoreReader(Path(plan.health_store.file)).get(REGION_HEALTH_KEY)
    return list(json.loads(raw)["avoid"]) if raw else []


def wait_until_no_region_avoided(plan: LocalPlan, timeout_s: float) -> None:
    """After a test stopped an origin: the probes see it recover and the edge uses it again,
    so the next test meets a topology that routes every viewer to its nearest region."""
    wait_for(lambda: not avoided_regions(plan), timeout_s, "every region used by the edge again")
