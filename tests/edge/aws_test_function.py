"""CloudFront's own runtime on the function this commit renders: ``aws cloudfront
test-function`` on the DEVELOPMENT stage, with the events of ``devkit/edge_cases.py``.

    python -m tests.edge.aws_test_function --stack prod [--max-compute-utilization 70]

Needs AWS credentials allowed to describe the stack's viewer function
(``<serverId>-<stack>-viewer-auth``), create, test and delete a CloudFront Function, and read
the stack's KeyValueStore; CI runs it only where those credentials are configured.

1. The code is rendered for the stack (``edge.viewer_function``; the tests prove it is
   what the program ships). A temporary function ``<serverId>-<stack>-viewer-auth-ci-<id>``
   gets it, with the runtime and the KeyValueStore association of the stack's own
   function, so the deployed function is never touched; it lives in the DEVELOPMENT
   stage only (never published) and is deleted at the end, whatever happened.
2. The store's current ``region-health`` value is read, and every event is first run
   locally (QuickJS, ``devkit.edge_runtimes.in_process``) with that value: what the local run decides is
   what CloudFront must decide.
3. Each event goes through ``aws cloudfront test-function --stage DEVELOPMENT``. It
   fails on a function error, another verdict (passed on, or the status of the
   response), another avoid header, or a compute utilization above the bound.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.edge import viewer_function_name
from devkit.edge_cases import events
from devkit.edge_runtimes.in_process import ViewerFunction
from edge.protocol import AVOID_REGIONS_HEADER
from edge.viewer_function import RUNTIME, render_viewer_function
from functions.contract import REGION_HEALTH_KEY
from stack_config.loading import load_from_stack_file

# CloudFront reports compute utilization 0-100 (100: the function's time limit).
DEFAULT_MAX_COMPUTE_UTILIZATION = 70

Aws = Callable[[Sequence[str]], Any]


def aws_cli(args: Sequence[str]) -> Any:
    """Run ``aws <args> --output json``; its parsed output (None when it printed nothing)."""
    done = subprocess.run(["aws", *args, "--output", "json"], capture_output=True, text=True)
    if done.returncode != 0:
        raise AwsError(" ".join(args[:2]), done.stderr.strip())
    return json.loads(done.stdout) if done.stdout.strip() else None


class AwsError(RuntimeError):
    def __init__(self, command: str, message: str):
        super().__init__(f"aws {command}: {message}")
        self.message = message


@dataclass(frozen=True)
class Verdict:
    """What a viewer-request function decided: a response's status, or the request passed
    on (status None) with the avoid header it carries."""

    status: int | None
    avoid: str | None

    @classmethod
    def of_result(cls, result: Mapping[str, Any]) -> Verdict:
        """From the handler's result as the local engine returns it."""
        if "statusCode" in result:
            return cls(int(result["statusCode"]), None)
        header = (result.get("headers") or {}).get(AVOID_REGIONS_HEADER)
        return cls(None, header.get("value") if header else None)

    @classmethod
    def of_test_output(cls, output: Mapping[str, Any]) -> Verdict:
        """From ``TestResult.FunctionOutput``: ``{"request": ...}`` or ``{"response": ...}``."""
        if "response" in output:
            return cls(int(output["response"]["statusCode"]), None)
        return cls.of_result(output["request"])


def judge(name: str, expected: Verdict, test_result: Mapping[str, Any], max_utilization: float) -> list[str]:
    """What is wrong with one ``TestResult`` (empty: nothing)."""
    problems = []
    error = test_result.get("FunctionErrorMessage")
    if error:
        problems.append(f"{name}: the function failed: {error}")
    utilization = float(test_result.get("ComputeUtilization") or 0)
    if utilization > max_utilization:
        problems.append(f"{name}: compute utilization {utilization:g} is above the bound {max_utilization:g}")
    if not error:
        got = Verdict.of_test_output(json.loads(test_result.get("FunctionOutput") or "{}"))
        if got != expected:
            problems.append(f"{name}: CloudFront decided {got}, the local run {expected}")
    return problems


def store_value(aws: Aws, kvs_arn: str | None) -> str | None:
    if kvs_arn is None:
        return None
    try:
        return str(aws(["cloudfront-keyvaluestore", "get-key", "--kvs-arn", kvs_arn, "--key", REGION_HEALTH_KEY])["Value"])
    except AwsError as exc:
        if "ResourceNotFound" in exc.message:
            return None
        raise


def run(stack: str, max_utilization: float, aws: Aws = aws_cli, out: Callable[[str], None] = print) -> list[str]:
    config = load_from_stack_file(stack)
    code = render_viewer_function(config.viewer_function_settings())
    deployed = viewer_function_name(config.server_id, config.stack)
    described = aws(["cloudfront", "describe-function", "--name", deployed, "--stage", "LIVE"])
    function_config = described["FunctionSummary"]["FunctionConfig"]
    associations = function_config.get("KeyValueStoreAssociations") or {"Quantity": 0}
    kvs_arns = [item["KeyValueStoreARN"] for item in associations.get("Items") or []]
    value = store_value(aws, kvs_arns[0] if kvs_arns else None)
    out(f"{deployed}: KeyValueStore {kvs_arns[0] if kvs_arns else '(none associated)'}, "
        f"{REGION_HEALTH_KEY} = {value!r}")
    named = events(config)
    local = ViewerFunction(code, kvs=(lambda key: value if key == REGION_HEALTH_KEY else None) if kvs_arns else None)
    try:
        expected = {name: Verdict.of_result(local(event)) for name, event in named.items()}
    finally:
        local.close()

    name = f"{deployed}-ci-{uuid.uuid4().hex[:8]}"[:64]
    new_config = {"Comment": "CI: test-function on the DEVELOPMENT stage, deleted after", "Runtime": RUNTIME,
                  "KeyValueStoreAssociations": associations}
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        code_file = Path(tmp) / "function.js"
        code_file.write_text(code, encoding="utf-8")
        created = aws(["cloudfront", "create-function", "--name", name, "--function-config", json.dumps(new_config),
                       "--function-code", f"fileb://{code_file}"])
        etag = created["ETag"]
        try:
            for case, event in named.items():
                event_file = Path(tmp) / "event.json"
                event_file.write_text(json.dumps(event), encoding="utf-8")
                result = aws(["cloudfront", "test-function", "--name", name, "--if-match", etag, "--stage", "DEVELOPMENT",
                              "--event-object", f"fileb://{event_file}"])["TestResult"]
                found = judge(case, expected[case], result, max_utilization)
                out(f"{'FAIL' if found else 'ok  '} {case}: compute utilization {result.get('ComputeUtilization')}")
                problems += found
        finally:
            etag = aws(["cloudfront", "describe-function", "--name", name, "--stage", "DEVELOPMENT"])["ETag"]
            aws(["cloudfront", "delete-function", "--name", name, "--if-match", etag])
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.edge.aws_test_function", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", default="prod")
    parser.add_argument("--max-compute-utilization", type=float, default=DEFAULT_MAX_COMPUTE_UTILIZATION,
                        help=f"fail above this (0-100; default {DEFAULT_MAX_COMPUTE_UTILIZATION})")
    args = parser.parse_args(argv)
    problems = run(args.stack, args.max_compute_utilization)
    for problem in problems:
        print(f"::error::{problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
