"""The mock harness cannot pass vacuously: a failing assertion inside an apply fails
the test, a check whose Output never resolves fails, and the program's computed
attributes really come back from the mocks."""

from __future__ import annotations

import textwrap

import pulumi
import pytest

from tests.harness import ProgramRun, check_output, run_program

FAILING_APPLY_PROGRAM = textwrap.dedent(
    """
    import pulumi
    import pulumi_aws as aws

    queue = aws.sqs.Queue("q", region="eu-west-1")

    def must_be_in_us(url):
        assert "us-east-1" in url, f"queue url {url} is not in us-east-1"
        return url

    pulumi.export("url", queue.url.apply(must_be_in_us))
    """
)


def test_program_whose_apply_asserts_falsely_fails_the_run(tmp_path):
    program = tmp_path / "__main__.py"
    program.write_text(FAILING_APPLY_PROGRAM)
    with pytest.raises(AssertionError, match="is not in us-east-1"):
        run_program("prod", program=program)


def test_failing_check_inside_apply_fails():
    def wrong(value: int) -> None:
        assert value == 2, "one is not two"

    with pytest.raises(AssertionError, match="one is not two"):
        check_output(pulumi.Output.from_input(1), wrong)


def test_check_on_an_output_that_never_resolves_is_reported_as_vacuous():
    unknown = pulumi.Output.from_input(1).apply(lambda _: pulumi.UNKNOWN)  # type: ignore[attr-defined]
    never_known = pulumi.Output(set(), unknown.future(), pulumi.Output.from_input(False).future())  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="vacuous"):
        check_output(never_known, lambda _: None)


def test_runs_with_preview_false_and_resolves_computed_attributes(prod: ProgramRun):
    assert pulumi.runtime.is_dry_run() is False
    arns = prod.outputs["alertTopicArns"]
    assert set(arns) == set(prod.outputs["regions"])
    for region, arn in arns.items():
        # The ARN is computed by the mocks from the resource's region input.
        assert arn.startswith(f"arn:aws:sns:{region}:123456789012:")


def test_records_parents_and_regions(prod: ProgramRun):
    component = prod.one("mcpedge:index:AlertTopic", name_contains="eu-west-1")
    children = prod.children_of(component)
    assert {c.type for c in children} >= {"aws:sns/topic:Topic"}
    assert all(c.region == "eu-west-1" for c in children)


def test_config_errors_surface_before_any_resource(tmp_path):
    with pytest.raises(Exception, match="mcp-edge:regions is empty"):
        run_program("prod", config_overrides={"regions": []})
