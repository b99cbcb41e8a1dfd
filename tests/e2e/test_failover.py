"""Regional failover on the local topology: a failed origin's viewers move to the next-nearest
region once a quorum of probe regions sees it fail, and come back once they see it recover.
The origin is failed and restored as ``scripts/run-local fail``/``restore`` do it (the
topology's fault injector, which the control socket drives).

The loop under test is the deployed one: probes in every probe region -> destinations ->
each region's consumer (streaks, votes, quorum) -> the KeyValueStore API (emulated, SigV4A)
-> the store the local edge reads -> the shipped CloudFront Function (avoid header) -> the
shipped router (nearest healthy region)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from components.probe_rounds import failover_times
from edge.countries import COUNTRIES
from edge.geo import regions_by_distance
from functions.contract import SERVED_REGION_HEADER
from local.client import token_for
from local.plan import LocalPlan, plan_file_in
from local.topology import Topology
from stack_config.loading import load_from_stack_file
from tests.e2e.conftest import PROBE_INTERVAL_S, TOKEN_LIFETIME_S, SessionTopology, avoided_regions, wait_for
from tests.e2e.test_run_command import RUN_LOCAL, _port_block, _processes_mentioning

pytestmark = pytest.mark.e2e

CONFIG = load_from_stack_file("prod")
COUNTRY = "DE"
VICTIM = regions_by_distance(COUNTRIES[COUNTRY], CONFIG.regions)[0]
FALLBACK = regions_by_distance(COUNTRIES[COUNTRY], CONFIG.regions)[1]
FAILOVER_BOUND_S = (CONFIG.failover.failure_threshold + 2) * PROBE_INTERVAL_S
RECOVERY_BOUND_S = (CONFIG.failover.recovery_threshold + 2) * PROBE_INTERVAL_S
# After convergence every request must succeed for this long.
STEADY_S = 2 * PROBE_INTERVAL_S
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "e2e-failover", "version": "1"}}}


@dataclass
class Viewer:
    """A viewer in COUNTRY sending one MCP request after another, recording every answer."""

    plan: LocalPlan
    answers: list[tuple[float, int, str]] = field(default_factory=list)
    _token: str = ""
    _token_at: float = 0.0

    def token(self) -> str:
        # The session's issuer hands out short-lived tokens: a real client renews its own.
        if time.monotonic() - self._token_at > TOKEN_LIFETIME_S / 2:
            self._token, self._token_at = token_for(self.plan), time.monotonic()
        return self._token

    def ask(self) -> tuple[int, str]:
        try:
            response = httpx.post(self.plan.mcp_url, json=INITIALIZE, timeout=30, headers={
                "authorization": f"Bearer {self.token()}", "accept": "application/json, text/event-stream",
                "cloudfront-viewer-country": COUNTRY})
            answer = (response.status_code, response.headers.get(SERVED_REGION_HEADER, ""))
        except httpx.HTTPError as exc:
            answer = (0, type(exc).__name__)
        self.answers.append((time.monotonic(), *answer))
        return answer

    def until_served_by(self, region: str, bound_s: float, what: str) -> float:
        """Ask until a 200 from ``region``; the seconds it took."""
        start = time.monotonic()
        wait_for(lambda: self.ask() == (200, region), bound_s, what, interval_s=0.25)
        return time.monotonic() - start

    def steadily_served_by(self, region: str, seconds: float) -> None:
        end, start = time.monotonic() + seconds, len(self.answers)
        while time.monotonic() < end:
            self.ask()
            time.sleep(0.2)
        wrong = [a for a in self.answers[start:] if a[1:] != (200, region)]
        assert not wrong, f"after convergence, answers not 200 from {region}: {wrong[:10]}"


def test_a_failed_origin_fails_its_viewers_over_to_the_next_nearest_region_and_back(
    topology: Topology, plan: LocalPlan
) -> None:
    assert plan.health_store is not None, "the program deploys a region-health store"
    assert (VICTIM, FALLBACK) == ("eu-west-1", "us-east-1")
    viewer = Viewer(plan)
    # Given a topology whose probes see every region up.
    viewer.until_served_by(VICTIM, RECOVERY_BOUND_S, f"{COUNTRY} viewers served by {VICTIM} before the kill")
    wait_for(lambda: not avoided_regions(plan), RECOVERY_BOUND_S, "no region avoided before the kill")

    # When the origin process stops (scripts/run-local fail)...
    topology.faults.fail(VICTIM, "stop")
    killed_at = time.monotonic()
    try:
        failover_s = viewer.until_served_by(
            FALLBACK, FAILOVER_BOUND_S, f"{COUNTRY} viewers failed over to {FALLBACK} "
            f"(within {CONFIG.failover.failure_threshold} + 2 probe intervals)")
        assert avoided_regions(plan) == [VICTIM]
        # The status page says so first: the avoided region and since when.
        status = httpx.get(plan.status_url + "status.json", timeout=30).json()
        routing = status["routing"]
        assert [a["region"] for a in routing["avoided"]] == [VICTIM] and routing["avoided"][0]["since"]
        # ...and the alerts that went out, as one outage.
        outages = [e for e in status["active"] if e["kind"] == "outage"]
        assert [e["subject"] for e in outages] == [VICTIM] and "region avoided" in outages[0]["alerts"]
        # ...then every request is answered by the next-nearest region, without a failure.
        viewer.steadily_served_by(FALLBACK, STEADY_S)
    finally:
        topology.faults.restore(VICTIM)  # scripts/run-local restore: the supervisor starts it again
    restarted_at = time.monotonic()
    # When it comes back, its viewers are served by it again, and nothing fails meanwhile.
    recovery_s = viewer.until_served_by(
        VICTIM, RECOVERY_BOUND_S, f"{COUNTRY} viewers back on {VICTIM} "
        f"(within {CONFIG.failover.recovery_threshold} + 2 probe intervals)")
    during = [a for a in viewer.answers if a[0] >= restarted_at]
    assert all(status == 200 for _, status, _ in during), f"failed while recovering: {during}"
    assert avoided_regions(plan) == []
    viewer.steadily_served_by(VICTIM, STEADY_S)
    print(f"\nfailover: {failover_s:.1f} s after the kill (bound {FAILOVER_BOUND_S:.0f} s); "
          f"recovery: {recovery_s:.1f} s after the restart (bound {RECOVERY_BOUND_S:.0f} s); "
          f"probe interval {PROBE_INTERVAL_S:.0f} s, {len(viewer.answers)} requests, "
          f"{sum(1 for a in viewer.answers if a[0] > killed_at and a[1] != 200)} failed before convergence")


# --- the stack's own interval, through scripts/run-local ------------------------------------------

# What docs/architecture.md gives for the stack's defaults (prod sets them).
DOCUMENTED = failover_times(CONFIG.probes.interval_s, CONFIG.failover.failure_threshold,
                            CONFIG.failover.recovery_threshold, CONFIG.probes.deadline_s)
FAILOVER_GOAL_S = 45


def test_run_local_fail_moves_de_viewers_within_the_documented_time_at_the_stacks_own_interval(
    session_topology: SessionTopology, tmp_path: Path
) -> None:
    session_topology.stop()  # two topologies at once on a 2-core machine only slow each other down
    assert DOCUMENTED.dead <= FAILOVER_GOAL_S
    regions = len(CONFIG.regions)
    base = _port_block(10 + regions + 1)
    run_dir = tmp_path / "run"
    # No --probe-interval: the probes run at the stack's own rounds (probeIntervalSeconds).
    process = subprocess.Popen(
        [str(RUN_LOCAL), "--edge-port", str(base + 10 + regions), "--base-port", str(base), "--run-dir", str(run_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 600
        for line in process.stdout:
            if "Ctrl-C stops everything" in line or time.monotonic() > deadline:
                break
        plan = LocalPlan.read(plan_file_in(run_dir))
        intervals = {s.interval_s for fn in plan.functions for s in fn.schedules}
        assert intervals == {float(CONFIG.probes.interval_s)}, intervals
        viewer = Viewer(plan)
        viewer.until_served_by(VICTIM, 120, f"{COUNTRY} viewers served by {VICTIM} before the failure")
        wait_for(lambda: not avoided_regions(plan), 120, "no region avoided before the failure")

        failed = subprocess.run([str(RUN_LOCAL), "fail", VICTIM, "--run-dir", str(run_dir)],
                                capture_output=True, text=True, timeout=60)
        killed_at = time.monotonic()
        assert failed.returncode == 0, failed
        failover_s = viewer.until_served_by(
            FALLBACK, DOCUMENTED.dead, f"{COUNTRY} viewers served by {FALLBACK} within the documented "
            f"{DOCUMENTED.dead} s")
        failed_requests = sum(1 for a in viewer.answers if a[0] >= killed_at and a[1] != 200)
        asked = sum(1 for a in viewer.answers if a[0] >= killed_at)
        assert avoided_regions(plan) == [VICTIM]
        viewer.steadily_served_by(FALLBACK, CONFIG.probes.interval_s)

        restored = subprocess.run([str(RUN_LOCAL), "restore", VICTIM, "--run-dir", str(run_dir)],
                                  capture_output=True, text=True, timeout=150)
        assert restored.returncode == 0, restored
        restored_at = time.monotonic()
        recovery_s = viewer.until_served_by(
            VICTIM, DOCUMENTED.recovery, f"{COUNTRY} viewers back on {VICTIM} within the documented "
            f"{DOCUMENTED.recovery} s")
        during = [a for a in viewer.answers if a[0] >= restored_at]
        assert all(status == 200 for _, status, _ in during), f"failed while recovering: {during}"
        print(f"\nprobe interval {CONFIG.probes.interval_s} s (the stack's own): DE viewers on {FALLBACK} "
              f"{failover_s:.1f} s after `run-local fail {VICTIM}` (documented {DOCUMENTED.dead} s, goal "
              f"{FAILOVER_GOAL_S} s); {failed_requests} of {asked} requests failed meanwhile; back on {VICTIM} "
              f"{recovery_s:.1f} s after `restore` (documented {DOCUMENTED.recovery} s)")
    finally:
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C
        rest, _ = process.communicate(timeout=90)
    assert process.returncode == 0, rest
    assert _processes_mentioning(str(run_dir)) == []
