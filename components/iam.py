"""IAM policy documents the components share: who may assume a role, and what a
role may do. Plain functions returning JSON, so every component writes the same
shape and a test can read them without Pulumi."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

POLICY_VERSION = "2012-10-17"


def trust_policy(*services: str, condition: dict[str, Any] | None = None) -> str:
    """A role's trust policy for one or more AWS service principals."""
    if not services:
        raise ValueError("a trust policy needs at least one service principal")
    principal: str | list[str] = services[0] if len(services) == 1 else list(services)
    statement: dict[str, Any] = {"Effect": "Allow", "Principal": {"Service": principal}, "Action": "sts:AssumeRole"}
    if condition:
        statement["Condition"] = condition
    return json.dumps({"Version": POLICY_VERSION, "Statement": [statement]})


Statement = tuple[Sequence[str], Sequence[str]] | tuple[Sequence[str], Sequence[str], Mapping[str, Any]]
"""(actions, resources), or (actions, resources, condition) for a statement with a Condition block."""


def allow_policy(statements: Sequence[Statement]) -> str:
    """An identity policy: one Allow statement per (actions, resources[, condition])."""
    out: list[dict[str, Any]] = []
    for actions, resources, *condition in statements:
        statement: dict[str, Any] = {"Effect": "Allow", "Action": list(actions), "Resource": list(resources)}
        if condition:
            statement["Condition"] = dict(condition[0])
        out.append(statement)
    return json.dumps({"Version": POLICY_VERSION, "Statement": out})
