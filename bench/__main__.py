"""Run every benchmark and write docs/benchmarks.md.

    .venv/bin/python -m bench                  # all bench/*_bench.py, then write the document
    .venv/bin/python -m bench --only program   # one or more (comma-separated short names)
    .venv/bin/python -m bench --quick          # fewer repetitions where a benchmark offers it
    .venv/bin/python -m bench --no-write       # print only

Each ``bench/<name>_bench.py`` module is run in turn, in this process. A module may
expose ``run()`` (callable without arguments, returning a dict with ``title`` and
``markdown``, or any JSON-able dict) or ``main(argv)`` (run with no arguments; what it
returns, or else what it prints, is the result). A benchmark that is expected but not
in the checkout is listed as not run; a benchmark that fails is reported with its error
in the document, and the command exits 1: a failure is never hidden.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import inspect
import io
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
DOCUMENT = ROOT / "docs" / "benchmarks.md"
# The benchmarks the project's issue asks for, in the document's order; others found
# in bench/ follow.
EXPECTED = ("origin", "edge", "probe", "program", "local")
PACKAGES = ("pulumi", "pulumi-aws", "mcp", "uvicorn", "httpx", "aws-lambda-powertools", "quickjs-ng", "moto")


@dataclass
class Outcome:
    name: str  # short name: "program" for bench/program_bench.py
    status: str  # "ok", "failed", "missing"
    seconds: float = 0.0
    title: str = ""
    method: str = ""
    body: str = ""
    error: str = ""
    goals: list[dict[str, Any]] | None = None  # a benchmark's goals: goal, measured, met, note


def discover(bench_dir: Path = BENCH_DIR) -> list[str]:
    found = sorted(p.stem.removesuffix("_bench") for p in bench_dir.glob("*_bench.py"))
    return [n for n in EXPECTED if n in found] + [n for n in found if n not in EXPECTED]


def method_of(module: Any) -> tuple[str, str]:
    """(title, method) from the module docstring: its first line, then its prose minus
    usage lines (indented command lines)."""
    doc = inspect.getdoc(module) or ""
    paragraphs = [p for p in doc.split("\n\n") if p.strip()]
    title = paragraphs[0].strip().removeprefix("Benchmark:").strip().rstrip(".") if paragraphs else module.__name__
    title = title[:1].upper() + title[1:]
    prose = [p for p in paragraphs[1:] if not all(line.startswith("    ") for line in p.splitlines())]
    return title, "\n\n".join(prose)


class _Tee(io.TextIOBase):
    def __init__(self, *streams: TextIO):
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


def _entry(module: Any, quick: bool) -> Callable[[], Any]:
    """How to call the module: run() when it needs no arguments (with quick=True or
    repeats=2 when asked for and offered), else main([]) or main()."""
    run = getattr(module, "run", None)
    if callable(run):
        params = inspect.signature(run).parameters
        if all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params.values()):
            if quick and "quick" in params:
                return lambda: run(quick=True)
            if quick and "repeats" in params:
                return lambda: run(repeats=2)
            return run
    main = getattr(module, "main", None)
    if not callable(main):
        raise TypeError(f"{module.__name__} has neither run() nor main()")
    return (lambda: main([])) if inspect.signature(main).parameters else main


def run_bench(name: str, quick: bool = False, package: str = "bench", echo: TextIO | None = None) -> Outcome:
    module_name = f"{package}.{name}_bench"
    outcome = Outcome(name, "ok")
    started = time.perf_counter()
    printed = io.StringIO()
    saved_argv = sys.argv
    try:
        module = importlib.import_module(module_name)
        outcome.title, outcome.method = method_of(module)
        entry = _entry(module, quick)
        sys.argv = [module_name]  # a main() that parses sys.argv must not see ours
        stream = _Tee(printed, echo) if echo is not None else printed
        with contextlib.redirect_stdout(stream):
            result = entry()
        outcome.body = render_result(result, printed.getvalue())
        if isinstance(result, dict) and result.get("title"):
            outcome.title = str(result["title"])
        if isinstance(result, dict) and isinstance(result.get("goals"), list):
            outcome.goals = result["goals"]
    except Exception:  # any failure is reported in the document, with its traceback
        outcome.status = "failed"
        outcome.error = traceback.format_exc()
        outcome.body = printed.getvalue()
    finally:
        sys.argv = saved_argv
        outcome.seconds = time.perf_counter() - started
    return outcome


def render_result(result: Any, printed: str) -> str:
    if isinstance(result, dict) and isinstance(result.get("markdown"), str):
        return result["markdown"].strip()
    if isinstance(result, dict) and result:
        return "```json\n" + json.dumps(result, indent=2, sort_keys=True, default=str) + "\n```"
    text = printed.strip()
    if not text:
        raise RuntimeError("the benchmark returned nothing and printed nothing")
    return text


def machine() -> list[tuple[str, str]]:
    cpu = platform.processor() or platform.machine()
    memory = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    versions = []
    for package in PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions.append(f"{package} {metadata.version(package)}")
    return [
        ("CPU", f"{cpu} ({platform.machine()})"),
        ("cores available", str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())),
        ("memory", memory or "unknown"),
        ("OS", f"{platform.system()} {platform.release()}"),
        ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("packages", ", ".join(versions)),
    ]


def load_average() -> str:
    with contextlib.suppress(OSError, AttributeError):
        return ", ".join(f"{v:.2f}" for v in os.getloadavg())
    return ""


def render_goals(outcomes: Sequence[Outcome]) -> list[str]:
    """The goals the benchmarks check (ratios of this run), each met or not, and why not."""
    rows = [(o, g) for o in outcomes for g in (o.goals or [])]
    if not rows:
        return []
    lines = ["", "## Goals", "", "| goal | this run | met | |", "|---|---|---|---|"]
    for outcome, goal in rows:
        met = "**yes**" if goal.get("met") else "**no**"
        lines.append(f"| {goal['goal']} (`bench/{outcome.name}_bench.py`) | {goal['measured']} | {met} | "
                     f"{goal.get('note', '')} |")
    return lines


def render_document(outcomes: Sequence[Outcome], when: datetime.datetime, command: str,
                    load: tuple[str, str] = ("", "")) -> str:
    lines = [
        "# Benchmarks",
        "",
        f"Generated by `{command}` on {when:%Y-%m-%d %H:%M} UTC; rerun it to refresh this file (do not edit by hand).",
        "",
        "## Method",
        "",
        "- One command runs every benchmark module (`bench/*_bench.py`) in turn, on one machine, in one run.",
        "- Every figure is a **ratio against a baseline measured in the same run** (the bare SDK app, a plain",
        "  `httpx` request, the 1-region program, the origin without the edge proxy, ...). Absolute times depend",
        "  on the machine and are shown for context only; compare ratios across machines, not milliseconds.",
        "- Where a benchmark alternates the measured variants (A, B, A, B, ...) it does so to spread drift on the",
        "  machine evenly; medians (and p95 where shown) are over the repetitions each section states.",
        "- Network benchmarks use loopback only, with bounded request counts and time.",
        "- Each module can be run alone: `.venv/bin/python -m bench.<name>_bench` (see its `--help`).",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
    ]
    lines += [f"| {key} | {value} |" for key, value in machine()]
    if any(load):
        # The machine is shared: its load says how much the absolute figures are worth.
        lines.append(f"| load average (1, 5, 15 min) at start / at end | {load[0]} / {load[1]} |")
    lines += render_goals(outcomes)
    for outcome in outcomes:
        if outcome.status == "missing":
            continue
        lines += ["", f"## {outcome.title}", "", f"`bench/{outcome.name}_bench.py`, {outcome.seconds:.1f} s."]
        if outcome.method:
            lines += ["", outcome.method]
        if outcome.status == "failed":
            lines += ["", "**FAILED** in this run:", "", "```", outcome.error.strip(), "```"]
        if outcome.body:
            lines += ["", outcome.body]
    missing = [o for o in outcomes if o.status == "missing"]
    if missing:
        lines += ["", "## Not run", ""]
        lines += [f"- `bench/{o.name}_bench.py` is not in this checkout." for o in missing]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated short names, e.g. program,origin")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions where a benchmark offers it")
    parser.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks.md")
    parser.add_argument("--output", type=Path, default=DOCUMENT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    load_at_start = load_average()
    present = discover()
    wanted = [n.strip() for n in args.only.split(",") if n.strip()] or [*dict.fromkeys([*EXPECTED, *present])]
    outcomes = []
    for name in wanted:
        if name not in present:
            if args.only:
                parser.error(f"no bench/{name}_bench.py (present: {', '.join(present) or 'none'})")
            outcomes.append(Outcome(name, "missing"))
            print(f"==> {name}: bench/{name}_bench.py is not in this checkout", file=sys.stderr)
            continue
        print(f"==> {name}", file=sys.stderr)
        outcome = run_bench(name, args.quick, echo=sys.stderr)
        outcomes.append(outcome)
        print(f"==> {name}: {outcome.status} in {outcome.seconds:.1f} s", file=sys.stderr)
        if outcome.error:
            print(outcome.error, file=sys.stderr)

    command = "python -m bench" + (f" --only {args.only}" if args.only else "") + (" --quick" if args.quick else "")
    document = render_document(outcomes, datetime.datetime.now(datetime.UTC), command,
                               (load_at_start, load_average()))
    if args.no_write:
        sys.stdout.write(document)
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(document)
        print(f"wrote {args.output}", file=sys.stderr)
    failed = [o.name for o in outcomes if o.status == "failed"]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
