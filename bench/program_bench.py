"""Benchmark: evaluating the Pulumi program under mocks for 1, 4, 8 and 17 regions.

    .venv/bin/python -m bench.program_bench [--repeats 5] [--quick] [--json]

The whole program (``__main__.py``) runs through ``mcpedge.mock_program.run_program``
with the prod stack file and ``config_overrides`` that set the region list (the first
N of ``review.variants.SPREAD_REGIONS``; probes in every origin region). What is timed
is evaluation: config validation, every component's constructor, resource registration
with the mock monitor, and resolution of every Output.

Packages are cached, so they are not what is measured: each region count first runs
once untimed, which builds any Lambda package missing from ``.build/packages`` (later
runs get the cached zip from ``build_package`` by input hash) and warms imports. The
timed runs then alternate between the counts (1, 4, 8, 17, 1, 4, ...) so that drift on
the machine hits every count alike; each figure is the median.

Figures are ratios to the 1-region run measured in the same process, plus the
least-squares cost per added region and how well a straight line fits (R^2): the
program should cost a fixed part plus the same amount per region.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from mcpedge.mock_program import run_program
from review.variants import regions_overrides

REGION_COUNTS = (1, 4, 8, 17)


@dataclass
class CountFigures:
    regions: int
    resources: int
    seconds: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def evaluate(regions: int) -> tuple[float, int]:
    """One mock run of the program; (seconds, number of resources registered)."""
    overrides = regions_overrides(regions)
    gc.collect()
    started = time.perf_counter()
    run = run_program("prod", config_overrides=overrides)
    elapsed = time.perf_counter() - started
    if sorted(run.outputs.get("regions", [])) != sorted(overrides["regions"]):
        raise RuntimeError(f"the {regions}-region run exported regions {run.outputs.get('regions')}")
    return elapsed, len(run.resources)


def measure(counts: Sequence[int] = REGION_COUNTS, repeats: int = 5) -> list[CountFigures]:
    figures = {}
    for count in counts:  # untimed: builds missing packages, warms imports
        _, resources = evaluate(count)
        figures[count] = CountFigures(count, resources, [])
    for _ in range(repeats):
        for count in counts:
            seconds, resources = evaluate(count)
            if resources != figures[count].resources:
                raise RuntimeError(f"{count} regions registered {resources} resources, then {figures[count].resources}")
            figures[count].seconds.append(seconds)
    return [figures[c] for c in counts]


@dataclass(frozen=True)
class LinearFit:
    intercept: float
    slope: float
    r_squared: float


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> LinearFit:
    """Least squares y = intercept + slope * x."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError("a fit needs at least two points")
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("a fit needs two different x values")
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = mean_y - slope * mean_x
    ss_tot = sum((y - mean_y) ** 2 for y in ys)
    ss_res = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys, strict=True))
    return LinearFit(intercept, slope, 1.0 if ss_tot == 0 else 1 - ss_res / ss_tot)


def report(figures: list[CountFigures]) -> str:
    base = figures[0]
    fit = linear_fit([f.regions for f in figures], [f.median for f in figures])
    resource_fit = linear_fit([f.regions for f in figures], [f.resources for f in figures])
    lines = [
        f"| regions | resources | ratio to {base.regions} region | ratio of resources | median (ms) | ms per resource |",
        "|---|---|---|---|---|---|",
    ]
    for f in figures:
        lines.append(
            f"| {f.regions} | {f.resources} | {f.median / base.median:.2f} | {f.resources / base.resources:.2f} "
            f"| {f.median * 1000:.0f} | {f.median * 1000 / f.resources:.2f} |"
        )
    steps = [
        f"{a.regions}->{b.regions}: {(b.median - a.median) * 1000 / (b.regions - a.regions):.0f} ms/region"
        for a, b in zip(figures, figures[1:], strict=False)
    ]
    lines += [
        "",
        f"Per added region: {fit.slope * 1000:.0f} ms ({fit.slope / base.median:.2f} x the 1-region run), "
        f"fixed part {fit.intercept * 1000:.0f} ms; straight-line fit R^2 = {fit.r_squared:.4f}.",
        f"Marginal cost between counts: {'; '.join(steps)}.",
        f"Resources per region: {resource_fit.slope:.1f} (fit R^2 = {resource_fit.r_squared:.4f}).",
    ]
    return "\n".join(lines)


def run(repeats: int = 5, counts: Sequence[int] = REGION_COUNTS) -> dict[str, Any]:
    """Measure and return the figures with their report (the ``bench`` runner's entry)."""
    figures = measure(counts, repeats)
    fit = linear_fit([f.regions for f in figures], [f.median for f in figures])
    return {
        "title": "Program evaluation under mocks (1, 4, 8, 17 regions)",
        "markdown": report(figures),
        "data": {
            "counts": [asdict(f) | {"median_s": f.median} for f in figures],
            "ratios_to_1_region": {f.regions: f.median / figures[0].median for f in figures},
            "seconds_per_region": fit.slope,
            "fixed_seconds": fit.intercept,
            "r_squared": fit.r_squared,
            "repeats": repeats,
        },
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per region count (median taken)")
    parser.add_argument("--quick", action="store_true", help="2 timed runs per count")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    args = parser.parse_args(argv)
    result = run(repeats=2 if args.quick else args.repeats)
    if args.json:
        print(json.dumps(result["data"], indent=2))
    else:
        print(result["title"])
        print(result["markdown"])
    return result


if __name__ == "__main__":
    main()
