"""Benchmark: evaluating the Pulumi program under mocks for 1, 4, 8 and 17 regions.

    .venv/bin/python -m bench.program_bench [--repeats 5] [--quick] [--json]

The whole program (``__main__.py``) runs through ``devkit.mock_program.run_program``
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
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from devkit.mock_program import run_program
from review.variants import regions_overrides

REGION_COUNTS = (1, 4, 8, 17)


@dataclass
class CountFigures:
    regions: int
    resources: int
    seconds: list[float]
    by_type: dict[str, int]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def evaluate(regions: int) -> tuple[float, Counter[str]]:
    """One mock run of the program; (seconds, resources registered by type)."""
    overrides = regions_overrides(regions)
    gc.collect()
    started = time.perf_counter()
    run = run_program("prod", config_overrides=overrides)
    elapsed = time.perf_counter() - started
    if sorted(run.outputs.get("regions", [])) != sorted(overrides["regions"]):
        raise RuntimeError(f"the {regions}-region run exported regions {run.outputs.get('regions')}")
    return elapsed, Counter(r.type for r in run.resources)


def measure(counts: Sequence[int] = REGION_COUNTS, repeats: int = 5) -> list[CountFigures]:
    figures = {}
    for count in counts:  # untimed: builds missing packages, warms imports
        _, by_type = evaluate(count)
        figures[count] = CountFigures(count, sum(by_type.values()), [], dict(sorted(by_type.items())))
    for _ in range(repeats):
        for count in counts:
            seconds, by_type = evaluate(count)
            if dict(sorted(by_type.items())) != figures[count].by_type:
                raise RuntimeError(f"{count} regions registered different resources from one run to the next")
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
    # A flat line (all y equal, up to rounding in the mean) is fitted exactly.
    flat = ss_tot <= 1e-12 * (mean_y**2 + 1) * len(ys)
    return LinearFit(intercept, slope, 1.0 if flat else 1 - ss_res / ss_tot)


def nonlinear_types(figures: list[CountFigures]) -> dict[str, list[int]]:
    """Resource types whose count is not a straight line in the number of regions
    (e.g. one resource per pair of regions), with their counts per region count."""
    types = sorted({t for f in figures for t in f.by_type})
    xs = [f.regions for f in figures]
    out = {}
    for typ in types:
        ys = [f.by_type.get(typ, 0) for f in figures]
        fit = linear_fit(xs, ys)
        if max(abs(y - (fit.intercept + fit.slope * x)) for x, y in zip(xs, ys, strict=True)) > 0.5:
            out[typ] = ys
    return out


def report(figures: list[CountFigures]) -> str:
    base = figures[0]
    fit = linear_fit([f.regions for f in figures], [f.median for f in figures])
    per_resource = linear_fit([f.resources for f in figures], [f.median for f in figures])
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
        f"- Time against regions: {fit.slope * 1000:.0f} ms per added region ({fit.slope / base.median:.2f} x the "
        f"1-region run), straight-line fit R^2 = {fit.r_squared:.4f}; marginal cost {'; '.join(steps)}.",
        f"- Time against resources: {per_resource.slope * 1000:.2f} ms per resource, straight-line fit "
        f"R^2 = {per_resource.r_squared:.4f}"
        + (": evaluation costs about the same for every resource the program creates."
           if per_resource.r_squared >= 0.98 else " (a poor fit: the machine was busy; rerun for clean figures)."),
        f"- Resources against regions: {resource_fit.slope:.1f} per region on a straight line, R^2 = "
        f"{resource_fit.r_squared:.4f}.",
    ]
    nonlinear = nonlinear_types(figures)
    if nonlinear:
        counts = ", ".join(str(f.regions) for f in figures)
        lines.append(
            f"- Resource types that grow faster than the number of regions (counts for {counts} regions): "
            + "; ".join(f"`{t}` {', '.join(map(str, ys))}" for t, ys in nonlinear.items())
            + ". The program's time follows its resource count, so these make it grow faster than linearly."
        )
    else:
        lines.append("- Every resource type grows linearly with the number of regions.")
    return "\n".join(lines)


def run(repeats: int = 5, counts: Sequence[int] = REGION_COUNTS, quick: bool = False) -> dict[str, Any]:
    """Measure and return the figures with their report (the ``bench`` runner's entry)."""
    figures = measure(counts, 3 if quick else repeats)
    fit = linear_fit([f.regions for f in figures], [f.median for f in figures])
    return {
        "title": "Program evaluation under mocks (1, 4, 8, 17 regions)",
        "markdown": report(figures),
        "data": {
            "counts": [asdict(f) | {"median_s": f.median} for f in figures],
            "ratios_to_1_region": {f.regions: f.median / figures[0].median for f in figures},
            "seconds_per_region": fit.slope,
            "nonlinear_types": nonlinear_types(figures),
            "fixed_seconds": fit.intercept,
            "r_squared": fit.r_squared,
            "repeats": repeats,
        },
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per region count (median taken)")
    parser.add_argument("--quick", action="store_true", help="3 timed runs per count")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    args = parser.parse_args(argv)
    result = run(repeats=3 if args.quick else args.repeats)
    if args.json:
        print(json.dumps(result["data"], indent=2))
    else:
        print(result["title"])
        print(result["markdown"])
    return result


if __name__ == "__main__":
    main()
