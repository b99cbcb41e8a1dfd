"""Config problems that help: a mistyped key, region or choice is named with the one it
most likely means, and each problem is reported once, at the key the user wrote."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stack_config.checks import ConfigError, build_stack_config
from stack_config.loading import load_from_stack_file, read_stack_file, stack_file_path

PROD = read_stack_file(stack_file_path("prod"))
PROD_TEXT = stack_file_path("prod").read_text()


def problems_of(**changes: Any) -> list[str]:
    values = {**PROD, **changes}
    with pytest.raises(ConfigError) as refused:
        build_stack_config(values.get, "help")
    return refused.value.problems


def only(problems: list[str], containing: str) -> str:
    matching = [p for p in problems if containing in p]
    assert len(matching) == 1, problems
    return matching[0]


# --- did you mean ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"regions": ["us-east-1", "eu-wset-1"]}, "mcp-edge:regions contains 'eu-wset-1'"),
        ({"probeRegions": ["us-east-1", "eu-wset-1"]}, "mcp-edge:probeRegions contains 'eu-wset-1'"),
        ({"defaultRegion": "eu-wset-1"}, "mcp-edge:defaultRegion = 'eu-wset-1'"),
        ({"resultsTableHomeRegion": "eu-wset-1"}, "mcp-edge:resultsTableHomeRegion = 'eu-wset-1'"),
        ({"originOverrides": ["eu-wset-1:memoryMb=2048"]}, "region 'eu-wset-1' is not in mcp-edge:regions"),
    ],
)
def test_a_mistyped_region_is_named_with_the_region_it_most_likely_means_wherever_a_region_is_named(changes, key):
    # the suggestion, then (where the key takes any AWS region) every region allowed
    assert "; did you mean eu-west-1?" in only(problems_of(**changes), key)


def test_a_region_nothing_resembles_lists_the_known_regions_instead():
    problem = only(problems_of(regions=["us-east-1", "moon-1"], originOverrides=[]), "moon-1")
    assert "did you mean" not in problem and "(allowed: af-south-1, " in problem


def test_a_region_named_but_not_deployed_is_matched_against_the_stacks_regions():
    # eu-west-2 is an AWS region, but the stack's defaultRegion must be one of its regions.
    assert only(problems_of(defaultRegion="eu-west-2"), "defaultRegion").endswith("; did you mean eu-west-1?")


@pytest.mark.parametrize(
    ("changes", "suggestion"),
    [
        ({"originOverrides": ["eu-west-1:memory=2048"]}, "; did you mean memoryMb?"),
        ({"originOverrides": ["eu-west-1:timeoutseconds=60"]}, "; did you mean timeoutSeconds?"),
        ({"edgePriceClass": "PriceClass_10"}, "; did you mean PriceClass_100?"),
        ({"originColdStart": "snapStart"}, "; did you mean snapstart?"),
        ({"originColdStart": "provisoned"}, "; did you mean provisioned?"),
    ],
)
def test_a_mistyped_choice_is_named_with_the_choice_it_most_likely_means(changes, suggestion):
    (problem,) = [p for p in problems_of(**changes) if p.endswith(suggestion)]
    assert next(iter(changes)) in problem


def test_a_mistyped_key_in_the_stack_file_is_named_with_the_key_it_most_likely_means(tmp_path):
    path = tmp_path / "Pulumi.typo.yaml"
    path.write_text(PROD_TEXT.replace("mcp-edge:originMemoryMb:", "mcp-edge:originMemoryMB:"))
    with pytest.raises(ConfigError) as refused:
        read_stack_file(path)
    assert refused.value.problems == [
        "mcp-edge:originMemoryMB is not a key of this project; did you mean mcp-edge:originMemoryMb?"]


def test_a_key_nothing_resembles_lists_the_known_keys_instead(tmp_path):
    path = tmp_path / "Pulumi.typo.yaml"
    path.write_text(PROD_TEXT + "  mcp-edge:colour: blue\n")
    with pytest.raises(ConfigError, match=r"mcp-edge:colour is not a key of this project \(known: server, regions, "):
        read_stack_file(path)


def test_a_mistyped_key_is_reported_with_every_other_problem_of_the_stack_file(tmp_path):
    # The typo leaves authAudience unset: both are said at once, the typo with its fix.
    path = tmp_path / "Pulumi.typo.yaml"
    path.write_text(PROD_TEXT.replace("mcp-edge:authAudience:", "mcp-edge:authAudiance:")
                    .replace("mcp-edge:edgePriceClass: PriceClass_All", "mcp-edge:edgePriceClass: PriceClass_Al"))
    with pytest.raises(ConfigError) as refused:
        load_from_stack_file(path)
    problems = refused.value.problems
    assert problems[0] == "mcp-edge:authAudiance is not a key of this project; did you mean mcp-edge:authAudience?"
    assert any(p.startswith("mcp-edge:authAudience is required") for p in problems)


# --- no blame on entries the user did not write ------------------------------------------


def test_a_bad_stack_value_is_blamed_once_at_its_key_not_at_overrides_that_inherit_it():
    # prod's ap-northeast-1 entry sets only provisioned concurrency: its memory is the stack's.
    problems = problems_of(originMemoryMb=64)
    assert problems == ["mcp-edge:originMemoryMb = 64: must be between 128 and 10240 MB (Lambda's memory limits)"]


def test_an_override_is_blamed_for_what_its_entry_writes():
    problem = only(problems_of(originOverrides=["eu-west-1:memoryMb=64"]), "64")
    assert problem.startswith("mcp-edge:originOverrides[eu-west-1].memoryMb = 64: must be between 128")


def test_a_written_value_against_an_inherited_one_names_the_inherited_one_by_its_stack_key():
    # prod: originProvisionedMax 20, originReservedConcurrency 200.
    assert problems_of(originOverrides=["eu-west-1:provisionedMin=30"]) == [
        "mcp-edge:originOverrides[eu-west-1].provisionedMin = 30: must not exceed originProvisionedMax = 20"]
    assert problems_of(originOverrides=["eu-west-1:reservedConcurrency=10"]) == [
        "mcp-edge:originOverrides[eu-west-1].reservedConcurrency = 10: must be at least originProvisionedMax = 20 "
        "(Lambda refuses provisioned concurrency above reserved concurrency)"]


def test_a_bad_stack_pair_is_blamed_once_though_every_override_inherits_it():
    problems = problems_of(originProvisionedMin=30, originOverrides=["eu-west-1:memoryMb=2048"])
    assert problems == ["mcp-edge:originProvisionedMin = 30: must not exceed originProvisionedMax = 20"]


@given(
    key=st.sampled_from(["originMemoryMb", "originTimeoutSeconds", "originReservedConcurrency"]),
    value=st.one_of(st.integers(-10_000, -1), st.integers(100_000, 10**6)),
    entries=st.lists(st.tuples(st.sampled_from(["us-east-1", "eu-west-1", "ap-southeast-1", "ap-northeast-1"]),
                               st.sampled_from(["provisionedMin=0", "provisionedMax=5"])),
                     unique_by=lambda e: e[0], max_size=4),
)
def test_an_out_of_range_stack_value_is_never_blamed_on_an_override_that_does_not_set_it(key, value, entries):
    problems = problems_of(**{key: value, "originOverrides": [f"{r}:{item}" for r, item in entries]})
    assert any(p.startswith(f"mcp-edge:{key} = {value}") for p in problems), problems
    assert not any("originOverrides" in p for p in problems), problems
