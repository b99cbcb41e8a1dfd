"""The official MCP conformance suite run twice against one local topology's server: straight at
the origin (the server process as the local Function URL's adapter runs it) and through the local
edge (with a bearer token from the dev issuer), compared check by check. The edge is meant to be
transparent: no check does worse through the edge than at the server, and the edge enforces what
the server behind it cannot (``EDGE_EXPECTATIONS``).

    python -m local.conformance [--stack STACK] [--requirements 2025-11-25 ...] [--scenario NAME ...]

(``scripts/conformance`` runs it.) Prints a verdict table per requirement set and every difference;
exits 1 when the edge differs from the server where it should not, or misses an expectation.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from devkit import conformance
from devkit.conformance import Difference, SuiteRun
from local.plan import LocalPlan, Options, Ports, build_plan, token_for
from local.topology import Topology
from stack_config.loading import load_from_stack_file, resolve_stack_file, stack_name_of

# Checks whose status at the edge is fixed whatever the server does: the edge enforces them.
# The MCP transport spec says a server MUST validate Origin (and a local server Host) against DNS
# rebinding; behind the edge the server sees the edge's Host, not the viewer's, so refusing a
# rebinding request (Host and Origin evil.example.com) is the edge's job. Every other check,
# including the same scenario's request naming the edge itself (Host and Origin the edge's own,
# which must be served), has the status it has at the server.
EDGE_EXPECTATIONS: dict[tuple[str, str], str] = {
    ("dns-rebinding-protection", "localhost-host-rebinding-rejected"): "SUCCESS",
}


@dataclass(frozen=True)
class Comparison:
    """One requirement set (or scenario list) run direct and through the edge."""

    label: str
    direct: SuiteRun
    edge: SuiteRun

    @property
    def differences(self) -> list[Difference]:
        return conformance.differences(self.direct.results, self.edge.results)

    def unexpected(self) -> list[str]:
        """What breaks the edge's promise: a check that does worse through the edge than at the
        server (outside ``EDGE_EXPECTATIONS``), or an expectation the edge misses. A check that
        does better through the edge is listed by ``report`` but breaks nothing the server relies on."""
        problems = [d.describe() for d in self.differences
                    if d.worse_at_edge and (d.scenario, d.check) not in EDGE_EXPECTATIONS]
        for (scenario, check_id), status in EDGE_EXPECTATIONS.items():
            result = self.edge.results.get(scenario)
            check = result.checks.get(check_id) if result is not None else None
            if result is not None and (check is None or check.status != status):
                got = f"{check.status} ({check.message})" if check else "absent"
                problems.append(f"{scenario} / {check_id}: expected {status} at the edge, got {got}")
        return problems

    def table(self) -> str:
        return conformance.verdict_table({"direct": self.direct.results, "edge": self.edge.results})


def direct_url(plan: LocalPlan, region: str | None = None) -> str:
    """The MCP URL of one region's origin process itself (no Function URL, no edge)."""
    origin = next((o for o in plan.origins if region in (None, o.region)), None)
    if origin is None:
        raise ValueError(f"region {region!r}: the plan's origins are {[o.region for o in plan.origins]}")
    return origin.url + str(plan.server.get("path") or plan.mcp_path)


def compare(plan: LocalPlan, work_dir: Path, *, requirement_sets: Iterable[str] = (),
            scenarios: Sequence[str] = ()) -> list[Comparison]:
    """Run the suite against a running topology's first origin and its edge; one comparison per
    requirement set, or one for ``scenarios`` (the suite's default set when both are empty)."""
    selections: list[tuple[str, str | None, Sequence[str]]] = [(r, r, ()) for r in requirement_sets]
    if scenarios or not selections:
        selections.append(("scenarios" if scenarios else "default", None, scenarios))
    comparisons = []
    for label, requirements, names in selections:
        direct = conformance.run_suite(direct_url(plan), work_dir / label / "direct", requirements=requirements,
                                       scenarios=names)
        # A fresh token per run: the topology's tokens may be short-lived.
        edge = conformance.run_suite(plan.mcp_url, work_dir / label / "edge", requirements=requirements,
                                     scenarios=names, headers={"Authorization": f"Bearer {token_for(plan)}"})
        comparisons.append(Comparison(label, direct, edge))
    return comparisons


def start_topology(stack: str, run_dir: Path) -> Topology:
    """A topology of ``stack`` on free ports with probes once at start (nothing else calls tools meanwhile)."""
    from devkit.mock_program import run_program

    stack_file = resolve_stack_file(stack)
    config = load_from_stack_file(stack_file)
    name = stack_name_of(stack_file)
    plan = build_plan(Options(stack=str(stack_file), ports=Ports.free(config.regions), probe_interval_s=3600,
                              run_dir=run_dir), run=run_program(name, stack_file=stack_file))
    topology = Topology(plan)
    topology.start()
    return topology


def report(comparisons: Sequence[Comparison]) -> tuple[str, list[str]]:
    lines: list[str] = []
    problems: list[str] = []
    for c in comparisons:
        lines += [f"== {c.label}: direct {c.direct.url}  edge {c.edge.url}", c.table()]
        diffs = c.differences
        lines.append("differences: " + ("none" if not diffs else ""))
        lines += [f"  {d.describe()}" + ("  [the edge enforces it]" if (d.scenario, d.check) in EDGE_EXPECTATIONS
                                          else "  [worse at the edge]" if d.worse_at_edge else "  [better at the edge]")
                  for d in diffs]
        problems += [f"{c.label}: {p}" for p in c.unexpected()]
    return "\n".join(lines), problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", default="prod", help="a stack name or a stack file (default: prod)")
    parser.add_argument("--requirements", nargs="*", choices=conformance.REQUIREMENT_SETS, default=None,
                        help="requirement sets to run (default: all the suite ships)")
    parser.add_argument("--scenario", action="append", default=[], help="run these scenarios instead")
    parser.add_argument("--work-dir", type=Path, default=None, help="where the results go (default: a temporary folder)")
    args = parser.parse_args(argv)
    requirement_sets = (() if args.scenario else conformance.REQUIREMENT_SETS) if args.requirements is None \
        else tuple(args.requirements)
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="conformance-"))
    try:
        conformance.install_suite()
    except conformance.ConformanceUnavailableError as exc:
        print(f"cannot run the conformance suite: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    topology = start_topology(args.stack, work_dir / "run")
    try:
        print(f"topology of {args.stack} up in {time.monotonic() - started:.0f} s", file=sys.stderr)
        comparisons = compare(topology.plan, work_dir, requirement_sets=requirement_sets, scenarios=args.scenario)
    finally:
        topology.stop()
    text, problems = report(comparisons)
    print(text)
    print(f"results: {work_dir}")
    if problems:
        print("the edge is not transparent:\n" + "\n".join(f"  {p}" for p in problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
