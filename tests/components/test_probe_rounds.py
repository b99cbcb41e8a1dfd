"""The probe rounds workflow's definition, executed, and the failover figures the settings give."""

from __future__ import annotations

import json

import botocore.session
import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.probe_rounds import (
    INTERVALS,
    LAMBDA_INVOKE,
    failover_times,
    interval_of,
    round_offsets,
    rounds_definition,
    run_definition,
)
from components.settings import HEALTH_FAILURE_THRESHOLD, HEALTH_RECOVERY_THRESHOLD, PROBE_DEADLINE_S, PROBE_INTERVAL_S

PROBE = "arn:aws:lambda:eu-west-1:123456789012:function:acme-prod-probe"
events_st = st.lists(st.fixed_dictionaries({"target": st.sampled_from(["edge", "origin"]),
                                            "targetRegion": st.sampled_from(["eu-west-1", "us-east-1", "ap-south-1"]),
                                            "endpoint": st.just("https://d111.cloudfront.net/mcp")}),
                     min_size=1, max_size=12)


def test_the_intervals_are_the_divisors_of_the_minute_from_10_to_60() -> None:
    assert INTERVALS == (10, 12, 15, 20, 30, 60)
    assert PROBE_INTERVAL_S.choices == INTERVALS and PROBE_INTERVAL_S.default in INTERVALS


@given(interval=st.sampled_from(INTERVALS), events=events_st)
def test_the_rounds_cover_the_minute_at_the_interval_each_invoking_every_target_asynchronously(interval, events):
    definition = json.loads(json.dumps(rounds_definition(PROBE, events, interval)))  # as shipped: JSON
    invocations = run_definition(definition, {})
    times = sorted({i.at_s for i in invocations})
    # Evenly spaced, the first at the start, the last an interval before the next minute's first.
    assert times == round_offsets(interval) == list(range(0, 60, interval))
    assert times[-1] + interval == 60
    assert interval_of(definition) == interval
    for at in times:
        assert [dict(i.payload) for i in invocations if i.at_s == at] == events
    assert {i.function_arn for i in invocations} == {PROBE}


@pytest.mark.parametrize("interval", [0, 7, 25, 45, 61, 120])
def test_an_interval_that_does_not_divide_the_minute_is_refused(interval: int) -> None:
    with pytest.raises(ValueError, match="must be one of 10, 12, 15, 20, 30, 60"):
        rounds_definition(PROBE, [{"target": "edge"}], interval)


def _states(machine: dict) -> list[tuple[str, dict]]:
    found = []
    for name, state in machine["States"].items():
        found.append((name, state))
        processor = state.get("ItemProcessor")
        if processor:
            found.extend(_states(processor))
    return found


@pytest.mark.parametrize("interval", INTERVALS)
def test_the_definition_is_well_formed_amazon_states_language(interval: int) -> None:
    machine = rounds_definition(PROBE, [{"target": "edge", "targetRegion": "eu-west-1"}], interval)
    text = json.dumps(machine)
    # CreateStateMachine's own limit on a definition (botocore's stepfunctions model).
    shape = botocore.session.get_session().get_service_model("stepfunctions").shape_for("Definition")
    assert len(text) <= shape.metadata["max"]

    def check(m: dict) -> None:
        assert m["StartAt"] in m["States"]
        for name, state in m["States"].items():
            assert len(name) <= 80
            assert state["Type"] in {"Pass", "Wait", "Map", "Task"}
            assert ("Next" in state) != bool(state.get("End")), name  # exactly one way on
            if "Next" in state:
                assert state["Next"] in m["States"], name
            for catcher in state.get("Catch", []):
                assert catcher["Next"] in m["States"]
            if state["Type"] == "Map":
                check(state["ItemProcessor"])
                assert state["ItemProcessor"]["ProcessorConfig"] == {"Mode": "INLINE"}
    check(machine)
    tasks = [s for _, s in _states(machine) if s["Type"] == "Task"]
    # Request-response only (what Express allows): an asynchronous invoke of the probe, nothing else.
    assert [t["Resource"] for t in tasks] == [LAMBDA_INVOKE]
    assert tasks[0]["Parameters"]["InvocationType"] == "Event" and tasks[0]["Parameters"]["FunctionName"] == PROBE


def test_a_definition_invoking_synchronously_is_refused_when_run() -> None:
    machine = rounds_definition(PROBE, [{"target": "edge"}], 30)
    invoke = machine["States"]["EachRound"]["ItemProcessor"]["States"]["EachTarget"]["ItemProcessor"]["States"]
    invoke["InvokeProbe"]["Parameters"]["InvocationType"] = "RequestResponse"
    with pytest.raises(ValueError, match="asynchronously"):
        run_definition(machine)


@given(interval=st.sampled_from(INTERVALS), failures=st.integers(1, 5), recoveries=st.integers(1, 5),
       deadline=st.integers(1, 60))
def test_failover_takes_the_failed_rounds_plus_what_aws_adds_and_grows_with_the_interval(
        interval, failures, recoveries, deadline):
    times = failover_times(interval, failures, recoveries, deadline)
    assert times.dead >= failures * interval and times.recovery >= recoveries * interval
    assert times.hanging - times.dead == deadline - 2  # a hanging probe fails at its deadline, a dead one at once
    slower = failover_times(interval * 2, failures, recoveries, deadline)
    assert slower.dead - times.dead == failures * interval


def test_on_the_defaults_a_dead_regions_viewers_move_within_45_seconds() -> None:
    times = failover_times(PROBE_INTERVAL_S.default, HEALTH_FAILURE_THRESHOLD.default,
                           HEALTH_RECOVERY_THRESHOLD.default, PROBE_DEADLINE_S.default)
    assert times.dead <= 45
