"""Checking component args: every problem at once, named by field and value; integral
numbers that other languages send as floats become ints in int fields."""

from typing import Any, NotRequired, TypedDict

import pulumi
import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.validation import ArgChecks, ComponentArgsError, is_known, with_integers
from edge.regions import AWS_REGIONS


class InnerArgs(TypedDict):
    count: int
    ratio: NotRequired[float]


class OuterArgs(TypedDict):
    size: NotRequired[int]
    name: str
    inner: NotRequired[InnerArgs]
    secret: NotRequired[pulumi.Input[str]]


@given(size=st.integers(-10**9, 10**9), count=st.integers(-10**9, 10**9),
       ratio=st.floats(allow_nan=False, allow_infinity=False))
def test_integral_floats_become_ints_in_int_fields_only_at_every_depth(size: int, count: int, ratio: float):
    args: dict[str, Any] = {"size": float(size), "name": "n", "inner": {"count": float(count), "ratio": ratio}}
    out = with_integers(args, OuterArgs)
    assert out["size"] == size and type(out["size"]) is int
    assert out["inner"]["count"] == count and type(out["inner"]["count"]) is int
    assert out["inner"]["ratio"] is ratio  # a float field keeps its float
    assert out["name"] == "n"


@given(value=st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: not v.is_integer()))
def test_a_fractional_number_in_an_int_field_is_left_for_the_check_to_refuse(value: float):
    out = with_integers({"size": value, "name": "n"}, OuterArgs)  # type: ignore[typeddict-item]
    checks = ArgChecks("C", "c")
    checks.integer("size", out["size"], -10**12, 10**12)
    assert checks.problems == [f"size = {value!r}: must be an integer from {-10**12} to {10**12}"]


@given(value=st.integers(), low=st.integers(-1000, 1000), span=st.integers(0, 1000))
def test_an_integer_passes_exactly_when_it_is_in_range(value: int, low: int, span: int):
    checks = ArgChecks("C", "c")
    checks.integer("n", value, low, low + span)
    assert (not checks.problems) == (low <= value <= low + span)


@given(region=st.text(max_size=20))
def test_a_region_passes_exactly_when_aws_has_it(region: str):
    checks = ArgChecks("C", "c")
    checks.region("region", region)
    assert (not checks.problems) == (region in AWS_REGIONS)


def test_every_problem_is_reported_at_once_with_the_component_and_its_name():
    checks = ArgChecks("McpOrigin", "origin-eu")
    checks.required({"a": 1}, "a", "b")
    checks.https_url("jwks_url", "http://x")
    checks.regions("regions", ["eu-west-1", "eu-west-1"])
    with pytest.raises(ComponentArgsError) as error:
        checks.done()
    assert error.value.problems == [
        "b is required", "jwks_url = 'http://x': must be an https:// URL",
        "regions = ['eu-west-1', 'eu-west-1']: lists a region twice: each region at most once"]
    assert str(error.value).startswith("McpOrigin 'origin-eu': invalid args:\n  - b is required")


def test_outputs_are_not_known_at_construction():
    assert is_known("x") and is_known(None)
    assert not is_known(pulumi.Output.from_input("x"))
