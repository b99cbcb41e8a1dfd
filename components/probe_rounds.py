"""Probe rounds: the Step Functions Express workflow that fans each minute out into rounds,
and the failover and recovery times the probe settings give (pure: no Pulumi, no AWS).

EventBridge Scheduler fires at most once a minute. A probe that looped inside one invocation
would deliver its outcomes only when it ended, and a probe that sent its own messages would
bypass Lambda Destinations; so a round stays one asynchronous invocation of the stateless
probe per target, and something must start the rounds within the minute. Per probe region,
one schedule a minute starts one Express execution that, for each offset of the minute
(0, interval, 2 x interval, ...), waits until that offset and then invokes the probe
(``InvocationType: Event``) once per target. Costs, per probe region and month (43,200
minutes, the figures of ``review/prices.toml``):

- Step Functions Express, one execution a minute: 43,200 requests ($1.00 per million, so
  $0.04) plus its duration (the last offset, at most 50 s, billed at 64 MB: about 3 GB-s an
  execution, $0.00001667 a GB-s, so about $2.2): about $2.3;
- Step Functions Standard, the same workflow: a state transition per Wait, Map iteration and
  invoke, about 6 x (3 + targets) a minute, at $25 per million: $50-80 for 4-8 targets;
- a looping Lambda that invokes the probe every interval: 60 s a minute at 128 MB arm64
  ($0.0000133334 a GB-s), about $4.3, and a second function to build, deploy and watch;
- several schedules with offsets: Scheduler's finest rate is a minute and its expressions
  have no seconds, so they cannot offset rounds below a minute.

Express is the cheapest, and its limits fit: 5 minutes an execution (a round's execution lasts
under a minute) and request-response service calls only (an asynchronous invoke is one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Seconds between rounds that divide the minute evenly (the rounds of one minute and the
# next are as far apart as any two), from 10 (the probe's cost grows with 60 / interval) to 60.
INTERVALS = tuple(s for s in range(10, 61) if 60 % s == 0)

LAMBDA_INVOKE = "arn:aws:states:::lambda:invoke"
# Step Functions bills an Express execution's duration in 64 MB steps; a round's state is small.
EXPRESS_BILLED_MB = 64
# What the invoke retries: Lambda's throttling and transient service errors, a round's worth at most.
_RETRIED_ERRORS = ["Lambda.ServiceException", "Lambda.AWSLambdaException", "Lambda.SdkClientException",
                   "Lambda.TooManyRequestsException"]


def round_offsets(interval_s: int) -> list[int]:
    """Seconds after the schedule's start at which each round of the minute starts."""
    if interval_s not in INTERVALS:
        raise ValueError(f"probe interval {interval_s!r}: must be one of {', '.join(map(str, INTERVALS))} seconds")
    return list(range(0, 60, interval_s))


def rounds_definition(probe_function_arn: str, events: Sequence[Mapping[str, Any]], interval_s: int) -> dict[str, Any]:
    """The Amazon States Language definition of one minute's rounds: a Pass state holding the
    offsets and the targets' probe events, a Map over the offsets (all at once) whose
    iterations wait their offset, then a Map over the events invoking the probe
    asynchronously with each. A failed invoke is retried briefly, then caught, so one target
    never cancels the other targets' or the later rounds (the outcome is missing: the
    consumer's freshness rules treat it as no evidence)."""
    invoke = {
        "Type": "Task",
        "Resource": LAMBDA_INVOKE,
        "Parameters": {"FunctionName": probe_function_arn, "InvocationType": "Event", "Payload.$": "$"},
        "Retry": [{"ErrorEquals": _RETRIED_ERRORS, "IntervalSeconds": 1, "MaxAttempts": 2, "BackoffRate": 2}],
        "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "NotInvoked"}],
        "ResultPath": None,
        "End": True,
    }
    each_target = {
        "Type": "Map",
        "ItemsPath": "$.events",
        "MaxConcurrency": 0,
        "ItemProcessor": {
            "ProcessorConfig": {"Mode": "INLINE"},
            "StartAt": "InvokeProbe",
            "States": {"InvokeProbe": invoke,
                       "NotInvoked": {"Type": "Pass", "Comment": "Logged at ERROR; the next round probes again",
                                      "End": True}},
        },
        "ResultPath": None,
        "End": True,
    }
    return {
        "Comment": f"Probe rounds every {interval_s} s within the minute: one asynchronous probe invocation per "
                   "target and round",
        "StartAt": "Rounds",
        "States": {
            "Rounds": {"Type": "Pass", "Result": {"offsets": round_offsets(interval_s), "events": list(events)},
                       "Next": "EachRound"},
            "EachRound": {
                "Type": "Map",
                "ItemsPath": "$.offsets",
                "MaxConcurrency": 0,
                "ItemSelector": {"offset.$": "$$.Map.Item.Value", "events.$": "$.events"},
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "INLINE"},
                    "StartAt": "WaitForOffset",
                    "States": {
                        "WaitForOffset": {"Type": "Wait", "SecondsPath": "$.offset", "Next": "EachTarget"},
                        "EachTarget": each_target,
                    },
                },
                "ResultPath": None,
                "End": True,
            },
        },
    }


@dataclass(frozen=True)
class Invocation:
    """One asynchronous probe invocation the workflow makes: when, of what, with which event."""

    at_s: int
    function_arn: str
    payload: Mapping[str, Any]


def _select(path: str, data: Any, context: Mapping[str, Any]) -> Any:
    """The few JSONPath forms the definition uses: ``$``, ``$.a.b``, ``$$.a.b``."""
    root, rest = (context, path[2:]) if path.startswith("$$") else (data, path[1:])
    value = root
    for part in filter(None, rest.split(".")):
        value = value[part]
    return value


def _parameters(template: Mapping[str, Any], data: Any, context: Mapping[str, Any]) -> dict[str, Any]:
    return {(k[:-2] if k.endswith(".$") else k): (_select(v, data, context) if k.endswith(".$") else v)
            for k, v in template.items()}


def run_definition(definition: Mapping[str, Any], execution_input: Any = None) -> list[Invocation]:
    """Execute a rounds definition as Step Functions would (the state types and fields
    ``rounds_definition`` uses; anything else raises ``ValueError``), with Wait states
    advancing a clock instead of sleeping: every probe invocation it makes, in time order."""
    invocations: list[Invocation] = []

    def run(machine: Mapping[str, Any], data: Any, clock: int, context: Mapping[str, Any]) -> None:
        states = machine["States"]
        name = machine["StartAt"]
        while True:
            state = states[name]
            kind = state["Type"]
            output = data
            if kind == "Pass":
                output = state.get("Result", data)
            elif kind == "Wait":
                seconds = state["Seconds"] if "Seconds" in state else _select(state["SecondsPath"], data, context)
                if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 0:
                    raise ValueError(f"state {name}: wait of {seconds!r} seconds")
                clock += seconds
            elif kind == "Map":
                items = _select(state.get("ItemsPath", "$"), data, context)
                processor = state.get("ItemProcessor") or state.get("Iterator")
                for index, item in enumerate(items):
                    item_context = {**context, "Map": {"Item": {"Index": index, "Value": item}}}
                    selector = state.get("ItemSelector")
                    run(processor, _parameters(selector, data, item_context) if selector else item, clock,
                        item_context)
            elif kind == "Task" and state["Resource"] == LAMBDA_INVOKE:
                params = _parameters(state["Parameters"], data, context)
                if params.get("InvocationType") != "Event":
                    raise ValueError(f"state {name}: the probe must be invoked asynchronously (InvocationType Event)")
                invocations.append(Invocation(clock, params["FunctionName"], params["Payload"]))
            else:
                raise ValueError(f"state {name}: {kind} is not a state a rounds definition uses")
            if "ResultPath" in state and state["ResultPath"] is None:
                output = data
            if state.get("End"):
                return
            name = state["Next"]
            data = output

    run(definition, execution_input if execution_input is not None else {}, 0, {})
    return sorted(invocations, key=lambda i: i.at_s)


def interval_of(definition: Mapping[str, Any]) -> int:
    """Seconds between the rounds a definition makes (60: one round a minute)."""
    times = sorted({i.at_s for i in run_definition(definition)})
    if not times:
        raise ValueError("the rounds definition invokes nothing")
    gaps = {b - a for a, b in zip(times, [*times[1:], times[0] + 60], strict=True)}
    if len(gaps) != 1:
        raise ValueError(f"rounds at {times} s are not evenly spaced over the minute")
    return gaps.pop()


# --- how long a failover and a recovery take -------------------------------------------------

# What AWS adds between a probe's end and the edge's new routing, seconds, each an upper estimate:
# Scheduler starting the minute's execution late (flexible window off), Lambda Destinations
# putting the outcome on the queue, the event source mapping's batching window (1 s) and poll,
# the consumer deciding and writing the KeyValueStore, the store reaching the edge locations.
SCHEDULE_START_S = 2
DESTINATION_S = 1
BATCHING_S = 2
CONSUMER_S = 2
STORE_PROPAGATION_S = 5
# A dead origin (refused, 5xx) fails a probe this fast: the edge answers 502 at once.
FAILED_PROBE_S = 2


@dataclass(frozen=True)
class FailoverTimes:
    """Worst cases, seconds, from a region's failure (or recovery) to the edge routing accordingly."""

    dead: int  # refused connections or 5xx: the probe fails at once
    hanging: int  # accepted and never answered: each probe fails at its deadline
    recovery: int  # from the region answering again to the edge using it


def failover_times(interval_s: int, failure_rounds: int, recovery_rounds: int, deadline_s: int) -> FailoverTimes:
    """The failure lands just after a round (or the last round of a minute), so the first
    failed round starts up to ``interval_s`` (plus the schedule's start) later and the
    ``failure_rounds``-th one ``failure_rounds x interval_s`` after the failure; every probe
    region is on the same clock, so the quorum-th vote is no later. Then the probe fails (at
    once, or at its deadline) and the outcome goes through Destinations, SQS and the consumer
    to the KeyValueStore and the edge. Recovery likewise after ``recovery_rounds`` good rounds."""
    pipeline = SCHEDULE_START_S + DESTINATION_S + BATCHING_S + CONSUMER_S + STORE_PROPAGATION_S
    rounds_to_fail = failure_rounds * interval_s
    return FailoverTimes(
        dead=rounds_to_fail + FAILED_PROBE_S + pipeline,
        hanging=rounds_to_fail + deadline_s + pipeline,
        recovery=recovery_rounds * interval_s + FAILED_PROBE_S + pipeline,
    )


def rounds_a_minute(interval_s: int) -> int:
    return math.ceil(60 / interval_s)
