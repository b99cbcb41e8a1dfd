"""Running the checks on a program run, the report, and the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from devkit.mock_program import ProgramRun, run_program
from review.contracts.constraints import RULES, CheckResult, Rule
from review.contracts.iam import Graph
from review.contracts.inputs import INPUT_CONTRACTS, check_input
from review.errors import add_debug_flag, run_reporting_errors
from review.variants import VARIANTS
from stack_config.loading import resolve_stack_file, stack_name_of

# --- running ------------------------------------------------------------------------


@dataclass
class ContractReport:
    label: str
    results: list[CheckResult]

    @property
    def problems(self) -> list[str]:
        return [f"[{r.id}] {p}" for r in self.results for p in r.problems]

    def result(self, check_id: str) -> CheckResult:
        return next(r for r in self.results if r.id == check_id)

    def format(self) -> str:
        width = max(len(r.id) for r in self.results)
        lines = [f"Contract checks: {self.label}", ""]
        lines.append(f"{'check':<{width}}  {'status':<11} {'resources':>9} {'values':>6}")
        for r in self.results:
            lines.append(f"{r.id:<{width}}  {r.status:<11} {r.resources:>9} {r.values:>6}")
        ran = [r for r in self.results if r.values]
        lines += ["", f"{len(ran)} of {len(self.results)} checks ran on {sum(r.values for r in ran)} values; "
                      f"{len(self.problems)} problems"]
        lines += [f"  {p}" for p in self.problems]
        notes = [n for r in self.results for n in r.notes]
        if notes:
            lines += ["notes:"] + [f"  {n}" for n in notes]
        return "\n".join(lines) + "\n"


def run_rule(rule_: Rule, graph: Graph) -> CheckResult:
    result = CheckResult(rule_.id, rule_.kind, rule_.description, rule_.source)
    rule_.check(graph, result)
    return result


def check_run(run: ProgramRun, label: str = "") -> ContractReport:
    graph = Graph(run)
    results = [check_input(c, run) for c in INPUT_CONTRACTS] + [run_rule(r, graph) for r in RULES]
    return ContractReport(label or run.stack, results)


def main(argv: Sequence[str] | None = None, run: Callable[..., ProgramRun] = run_program) -> int:
    import review.contracts as package  # its docstring describes the command

    parser = argparse.ArgumentParser(prog="python -m review.contracts", description=(package.__doc__ or "").split("\n\n")[0])
    parser.add_argument("--stack", default="prod",
                        help="stack name (reads Pulumi.<stack>.yaml) or a stack file's path (default: prod)")
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="prod",
                        help="config overrides applied to the stack file (review/variants.py)")
    parser.add_argument("--all-variants", action="store_true", help="check every variant")
    add_debug_flag(parser)
    args = parser.parse_args(argv)
    names = sorted(VARIANTS) if args.all_variants else [args.variant]

    def work() -> int:
        path = resolve_stack_file(args.stack)
        stack = stack_name_of(path)
        failed = False
        for name in names:
            program_run = run(stack, stack_file=path, config_overrides=VARIANTS[name])
            report = check_run(program_run, f"stack {stack}, variant {name}")
            sys.stdout.write(report.format() + "\n")
            failed = failed or bool(report.problems)
        return 1 if failed else 0

    return run_reporting_errors("review.contracts", work, debug=args.debug)
