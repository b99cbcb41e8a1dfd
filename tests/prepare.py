"""Build and install, ahead of the tests, what the tests would otherwise build at their start:

    .venv/bin/python -m tests.prepare

- the Lambda packages the program builds (``components/lambda_package``, cached under
  ``.build/packages``), by running the program under mocks for prod and every end-to-end
  stack file: every worker's first program run would build them at once, each its own copy;
- each stack's origin package for the local topology (``local/origins.build_package_dir``):
  prod's demo and the end-to-end stack files' servers (FastMCP, TypeScript);
- the example servers' own dependencies (``devkit/example_envs``: FastMCP's virtualenv,
  the TypeScript example's ``node_modules``);
- the MCP conformance suite (``devkit/conformance.install_suite``).

``scripts/check`` runs it in the background beside ruff and mypy (mostly downloads and
unpacking) and waits for it before the tests start: the end-to-end tests run in order on
one worker, so whatever they installed first was on the whole run's critical path, and
the workers' first program runs each built the same packages. Every build and install is
skipped when already done (by content), so a warm ``.build/`` makes this a second. A failure is
printed and left to the tests that need the install: they try again and report (or skip,
when a registry is out of reach) as they always did.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from devkit import conformance, example_envs
from local.origins import build_package_dir, server_spec
from stack_config.loading import PROJECT_ROOT, load_from_stack_file, stack_name_of

E2E_STACKS = PROJECT_ROOT / "tests" / "e2e" / "stacks"
BYO_STACKS = PROJECT_ROOT / "tests" / "byo" / "stacks"  # tests/byo: servers written as their SDKs' docs write them


def stack_files() -> list[str | Path]:
    return ["prod", *sorted(E2E_STACKS.glob("Pulumi.*.yaml")), *sorted(BYO_STACKS.glob("Pulumi.*.yaml"))]


Job = tuple[str, Callable[[], object]]


def program_runs() -> list[Job]:
    """The Lambda packages: the program under mocks, mostly CPU (bytecode, zips)."""
    return [(f"Lambda packages of {Path(stack).name}", functools.partial(_program_run, stack))
            for stack in stack_files()]


def installs() -> list[Job]:
    """The local origin packages and the examples' and the suite's dependencies: mostly downloads."""
    found: list[Job] = []
    seen: set[tuple[str, str]] = set()
    for stack in stack_files():
        server = server_spec(load_from_stack_file(stack))
        key = (str(server.source), server.command)
        if key not in seen:
            seen.add(key)
            found.append((f"local origin package of {Path(server.source).name}",
                          functools.partial(build_package_dir, server)))
    found.append(("FastMCP example's virtualenv", lambda: example_envs.python_env("fastmcp")))
    found.append(("TypeScript example's node_modules", lambda: example_envs.node_modules("typescript")))
    found.append(("MCP conformance suite", conformance.install_suite))
    return found


def _program_run(stack: str | Path) -> None:
    from devkit.mock_program import run_program

    if isinstance(stack, Path):
        run_program(stack_name_of(stack), stack_file=stack)
    else:
        run_program(stack)


def run_all(lane: list[Job]) -> None:
    for what, job in lane:
        began = time.monotonic()
        try:
            job()
        except Exception as exc:  # the tests that need it try again and report
            print(f"prepare: {what}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        print(f"prepare: {what}: ready in {time.monotonic() - began:.1f} s", file=sys.stderr)


def main() -> int:
    # Two lanes: the downloads wait on the network while the program runs use a core.
    downloads = threading.Thread(target=run_all, args=(installs(),), name="installs")
    downloads.start()
    run_all(program_runs())
    downloads.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
