"""A/B of the local edge: this checkout's edge against another revision's, beside one origin.

    .venv/bin/python -m bench.edge_ab --base HEAD~3 [--rounds 36] [--round-size 20] [--json]

``bench/local_bench.py``'s ratio (edge / origin) moves with the machine's state by more than
most changes to the edge move it (the same code read 1.46-1.59 in one round's runs and
1.68-1.93 in another's), so a change to the edge is weighed against the edge before it in
the same run instead: the prod stack's local topology is started as ``local_bench`` starts
it (dev issuer, the us-east-1 origin, this checkout's edge), then a second edge from
``--base`` (checked out into a temporary git worktree, started with the same settings file
on a port of its own). Each round sends ``--round-size`` sequential ``tools/list`` (after
``local_bench.WARM_UP`` unmeasured ones, ``local_bench.sequential``) through each of the three paths, the rounds taking
the six orders of the three in turn (where a path stands in its round moves it); the figures
are medians over rounds of each round's ratio (``bench.ratios``): this edge / the base
edge, and each edge / the origin.

Not part of ``python -m bench`` (it needs a revision to compare with), and not a goal: a
tool for deciding whether a change to the edge path is worth keeping.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.local_bench import Figures, Target, sequential, start, targets
from bench.processes import terminate, wait_for_port
from bench.ratios import median_of_round_ratios
from local.client import token_for
from local.supervisor import free_ports

ROOT = Path(__file__).resolve().parent.parent
THIS, BASE, ORIGIN = "edge (this checkout)", "edge (base)", "origin"


@contextmanager
def worktree(revision: str) -> Iterator[Path]:
    """``revision`` checked out (detached) in a temporary git worktree, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="edge-ab-") as tmp:
        path = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(path), revision],
                       check=True)
        try:
            yield path
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False)


@contextmanager
def base_edge(spec: Any, source: Path, log: Path) -> Iterator[int]:
    """The edge's service spec run from ``source`` on a free port (its own imports, the same settings)."""
    port = free_ports(1)[0]
    argv = list(spec.argv)
    argv[argv.index("--port") + 1] = str(port)
    env = {**os.environ, **spec.env, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(source)}
    with log.open("ab") as output:
        process = subprocess.Popen([sys.executable, "-m", "local.launch", *argv], cwd=source, env=env,
                                   stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_port(port, process)
        yield port
    finally:
        terminate(process)


def measure(paths: list[Target], rounds: int, round_size: int) -> dict[str, list[float]]:
    """Each path's median per round, in ms: ``local_bench.sequential``'s rounds (every order
    of the paths in turn, ``rounds`` rounded up to whole sets of them); any request not
    answered with the tool list fails the comparison."""
    measured = Figures()
    sequential(measured, paths, rounds * round_size, round_size)
    if measured.errors:
        raise RuntimeError(f"requests not answered with the tool list, by path: {measured.errors}")
    return measured.round_medians


def figures(medians: dict[str, list[float]]) -> dict[str, float]:
    return {
        "this / base": median_of_round_ratios(medians[THIS], medians[BASE]),
        "this / origin": median_of_round_ratios(medians[THIS], medians[ORIGIN]),
        "base / origin": median_of_round_ratios(medians[BASE], medians[ORIGIN]),
        **{f"{name} median of round medians (ms)": statistics.median(values) for name, values in medians.items()},
    }


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--base", required=True, help="the git revision whose edge this checkout's is weighed against")
    parser.add_argument("--rounds", type=int, default=36,
                        help="rounds (each sends through all three paths; rounded up to a multiple of their 6 orders)")
    parser.add_argument("--round-size", type=int, default=20, help="measured requests per path and round")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with worktree(args.base) as source, tempfile.TemporaryDirectory(prefix="edge-ab-run-") as tmp:
        supervisor, plan = start(Path(tmp))
        try:
            with base_edge(supervisor.services["edge"].spec, source, Path(tmp) / "base-edge.log") as port:
                edge, origin = targets(plan, token_for(plan))
                paths = [Target(THIS, edge.url, edge.headers),
                         Target(BASE, edge.url.replace(f":{plan.ports.edge}/", f":{port}/"), edge.headers),
                         Target(ORIGIN, origin.url, origin.headers)]
                result = figures(measure(paths, args.rounds, args.round_size))
        finally:
            supervisor.stop_all()
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"this checkout's edge against {args.base}'s, beside one origin ({args.rounds} rounds of "
              f"{args.round_size} sequential tools/list per path):")
        for name, value in result.items():
            print(f"  {name}: {value:.3f}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
