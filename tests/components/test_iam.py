"""The shared IAM documents: valid JSON of the shape IAM accepts, for any principals."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.iam import allow_policy, trust_policy

services = st.from_regex(r"[a-z][a-z0-9-]{0,20}\.amazonaws\.com", fullmatch=True)


@given(st.lists(services, min_size=1, max_size=4, unique=True))
def test_trust_policy_lets_exactly_the_named_services_assume_the_role(names: list[str]):
    document = json.loads(trust_policy(*names))
    assert document["Version"] == "2012-10-17"
    (statement,) = document["Statement"]
    assert (statement["Effect"], statement["Action"]) == ("Allow", "sts:AssumeRole")
    principal = statement["Principal"]["Service"]
    assert (principal if isinstance(principal, list) else [principal]) == names
    assert "Condition" not in statement


def test_trust_policy_carries_a_condition_when_given():
    condition = {"StringEquals": {"aws:SourceAccount": "123456789012"}}
    (statement,) = json.loads(trust_policy("scheduler.amazonaws.com", condition=condition))["Statement"]
    assert statement["Condition"] == condition
    assert statement["Principal"] == {"Service": "scheduler.amazonaws.com"}


def test_trust_policy_without_a_principal_is_refused():
    with pytest.raises(ValueError, match="at least one service principal"):
        trust_policy()


@given(st.lists(st.tuples(st.lists(st.text(min_size=1), min_size=1), st.lists(st.text(min_size=1), min_size=1)),
                max_size=5))
def test_allow_policy_has_one_allow_statement_per_pair(pairs):
    document = json.loads(allow_policy(pairs))
    assert [(s["Action"], s["Resource"]) for s in document["Statement"]] == [(list(a), list(r)) for a, r in pairs]
    assert all(s["Effect"] == "Allow" for s in document["Statement"])
