"""The CI step that runs CloudFront's ``test-function``, against a fake ``aws`` that
answers as CloudFront does (running the submitted code locally): it tests this
commit's code in a temporary function with the stack's KeyValueStore association,
compares every verdict and the compute utilization, and always deletes what it made."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from components.edge import viewer_function_name
from devkit.edge_cases import health
from devkit.edge_runtimes.in_process import ViewerFunction
from edge.protocol import AVOID_REGIONS_HEADER
from stack_config.loading import load_from_stack_file
from tests.edge.aws_test_function import AwsError, Verdict, judge, run

CONFIG = load_from_stack_file("prod")
DEPLOYED = viewer_function_name(CONFIG.server_id, CONFIG.stack)
KVS_ARN = "arn:aws:cloudfront::123456789012:key-value-store/0a1b2c3d"


class FakeCloudFront:
    """``aws`` for the calls the step makes; test-function runs the created code in QuickJS."""

    def __init__(self, value: str | None, utilization: str = "12", tamper: bool = False, fail_test: bool = False):
        self.value, self.utilization, self.tamper, self.fail_test = value, utilization, tamper, fail_test
        self.calls: list[list[str]] = []
        self.functions: dict[str, ViewerFunction] = {}

    def __call__(self, args: Sequence[str]) -> Any:
        self.calls.append(list(args))
        command = tuple(args[:2])
        opts = dict(zip(args[2::2], args[3::2], strict=False))
        if command == ("cloudfront", "describe-function"):
            associations = {"Quantity": 1, "Items": [{"KeyValueStoreARN": KVS_ARN}]}
            return {"ETag": "E-" + opts["--name"], "FunctionSummary": {"FunctionConfig": {
                "Runtime": "cloudfront-js-2.0", "KeyValueStoreAssociations": associations}}}
        if command == ("cloudfront-keyvaluestore", "get-key"):
            if self.value is None:
                raise AwsError("cloudfront-keyvaluestore get-key", "ResourceNotFoundException: key not found")
            return {"Key": opts["--key"], "Value": self.value}
        if command == ("cloudfront", "create-function"):
            config = json.loads(opts["--function-config"])
            assert config["KeyValueStoreAssociations"]["Items"][0]["KeyValueStoreARN"] == KVS_ARN
            code = Path(opts["--function-code"].removeprefix("fileb://")).read_text()
            value = self.value
            self.functions[opts["--name"]] = ViewerFunction(code, kvs=lambda key: value)
            return {"ETag": "E1"}
        if command == ("cloudfront", "test-function"):
            assert opts["--stage"] == "DEVELOPMENT" and opts["--if-match"] == "E1"
            event = json.loads(Path(opts["--event-object"].removeprefix("fileb://")).read_text())
            if self.fail_test:
                raise AwsError("cloudfront test-function", "throttled")
            result = self.functions[opts["--name"]](event)
            output = {"response": result} if "statusCode" in result else {"request": result}
            if self.tamper and "request" in output:
                output["request"]["headers"][AVOID_REGIONS_HEADER] = {"value": "us-east-1"}
            return {"TestResult": {"ComputeUtilization": self.utilization, "FunctionErrorMessage": "",
                                   "FunctionOutput": json.dumps(output)}}
        if command == ("cloudfront", "delete-function"):
            self.functions.pop(opts["--name"]).close()
            return None
        raise AssertionError(f"unexpected aws call {args}")


def test_the_step_passes_when_cloudfront_decides_as_the_local_run():
    aws = FakeCloudFront(health("eu-west-1"))
    assert run("prod", 70, aws=aws, out=lambda line: None) == []
    tested = {c[c.index("--name") + 1] for c in aws.calls if c[:2] == ["cloudfront", "test-function"]}
    [name] = tested
    assert name.startswith(DEPLOYED + "-ci-") and name != DEPLOYED
    assert not aws.functions, "the temporary function is deleted"
    touched = {c[c.index("--name") + 1] for c in aws.calls if c[1] in ("update-function", "publish-function",
                                                                           "delete-function", "create-function")}
    assert DEPLOYED not in touched, "the stack's own function is never changed"


def test_another_avoid_header_or_a_high_utilization_fails_the_step():
    assert run("prod", 70, aws=FakeCloudFront(health("eu-west-1"), tamper=True), out=lambda line: None)
    problems = run("prod", 70, aws=FakeCloudFront(None, utilization="83"), out=lambda line: None)
    assert problems and all("above the bound 70" in p for p in problems)


def test_the_temporary_function_is_deleted_even_when_a_test_fails():
    aws = FakeCloudFront(None, fail_test=True)
    with pytest.raises(AwsError, match="throttled"):
        run("prod", 70, aws=aws, out=lambda line: None)
    assert not aws.functions and aws.calls[-1][:2] == ["cloudfront", "delete-function"]


@pytest.mark.parametrize(("output", "expected"), [
    ({"response": {"statusCode": 401}}, Verdict(401, None)),
    ({"request": {"headers": {}}}, Verdict(None, None)),
    ({"request": {"headers": {AVOID_REGIONS_HEADER: {"value": "eu-west-1"}}}}, Verdict(None, "eu-west-1")),
])
def test_a_test_result_is_read_as_cloudfront_reports_it(output, expected):
    assert Verdict.of_test_output(output) == expected
    result = {"ComputeUtilization": "9", "FunctionErrorMessage": "", "FunctionOutput": json.dumps(output)}
    assert judge("case", expected, result, 70) == []
    assert judge("case", Verdict(200, None), result, 70)


def test_a_function_error_is_a_failure():
    assert judge("case", Verdict(None, None), {"FunctionErrorMessage": "TypeError", "ComputeUtilization": "1"}, 70) == [
        "case: the function failed: TypeError"]
