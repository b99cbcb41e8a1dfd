"""The probe event (the schedule's input): valid targets parse, anything else fails
with a ProbeInputError naming every problem."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from functions.probe.errors import ProbeInputError
from functions.probe.event import ProbeTarget, parse_event

EDGE = {"endpoint": "https://mcp.acme.example/mcp", "serverId": "acme-mcp", "target": "edge",
        "targetRegion": "eu-west-1", "pinRegion": "eu-west-1", "signed": False}
ORIGIN = {"endpoint": "https://abc.lambda-url.ap-southeast-1.on.aws/mcp", "serverId": "acme-mcp", "target": "origin",
          "targetRegion": "ap-southeast-1", "pinRegion": None, "signed": True}


def test_edge_and_origin_events_parse():
    assert parse_event(EDGE) == ProbeTarget("https://mcp.acme.example/mcp", "acme-mcp", "edge", "eu-west-1",
                                            "eu-west-1", False)
    origin = parse_event(ORIGIN)
    assert origin.signed and origin.pin_region is None and origin.label == "origin@ap-southeast-1"


def test_optional_keys_default_to_no_pin_and_no_secret():
    minimal = {k: EDGE[k] for k in ("endpoint", "serverId", "target", "targetRegion")}
    parsed = parse_event(minimal)
    assert parsed.pin_region is None and parsed.signed is False


def test_plain_http_is_accepted_on_loopback_only():
    assert parse_event({**ORIGIN, "endpoint": "http://127.0.0.1:8080/mcp"}).endpoint.startswith("http://")
    assert parse_event({**ORIGIN, "endpoint": "http://localhost:8080/mcp"})
    with pytest.raises(ProbeInputError, match="must be an https:// URL"):
        parse_event({**ORIGIN, "endpoint": "http://mcp.acme.example/mcp"})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"endpoint": None}, "endpoint must be a non-empty URL"),
        ({"endpoint": "ftp://x/mcp"}, "https://"),
        ({"endpoint": "https://user:pw@x.example/mcp"}, "must not carry credentials"),
        ({"endpoint": "https://x.example:99999/mcp"}, "not a valid URL"),
        ({"endpoint": "https://x.example/mcp#frag"}, "fragment"),
        ({"serverId": ""}, "serverId"),
        ({"target": "cdn"}, "target must be one of edge, origin"),
        ({"targetRegion": "Europe"}, "targetRegion must be an AWS region code"),
        ({"pinRegion": "us-east-1"}, "differs from targetRegion"),
        ({"signed": "yes"}, "signed must be true or false"),
        ({"originSecret": "leaked"}, "unknown key"),
    ],
)
def test_each_bad_field_is_named(change, message):
    with pytest.raises(ProbeInputError, match=message):
        parse_event({**EDGE, **change})


def test_every_problem_is_reported_at_once():
    with pytest.raises(ProbeInputError) as err:
        parse_event({"target": "cdn", "extra": 1})
    text = str(err.value)
    assert "missing required key(s): endpoint, serverId, targetRegion" in text
    assert "unknown key(s): extra" in text and "target must be one of" in text


@pytest.mark.parametrize("event", [None, [], "edge", 42])
def test_non_object_event_is_rejected(event):
    with pytest.raises(ProbeInputError, match="must be a JSON object"):
        parse_event(event)


@given(st.dictionaries(st.sampled_from(list(EDGE) + ["x"]), st.none() | st.booleans() | st.text(max_size=30) | st.integers()))
@settings(max_examples=200, deadline=None)
def test_arbitrary_events_parse_or_raise_probe_input_error(event):
    with contextlib.suppress(ProbeInputError):
        parse_event(event)
