"""IAM evaluation: the resource graph of one run (functions, roles and their policies) and
whether a role's identity policies allow an action on a resource, whom a role trusts."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable
from typing import Any

from devkit.mock_program import ProgramRun, Resource
from review.contracts.resource_types import (
    ATTACHMENT,
    LAMBDA,
    ROLE,
    ROLE_POLICY,
)
from review.resources import output, plain

# --- the resource graph, for rules that span resources --------------------------------


def parse_lambda_ref(ref: str, default_region: str) -> tuple[str, str, str | None]:
    """(region, function name, qualifier) of a function name, partial or full ARN."""
    if ref.startswith("arn:"):
        parts = ref.split(":")
        if len(parts) < 7 or parts[5] != "function":
            return default_region, ref, None
        return parts[3], parts[6], parts[7] if len(parts) > 7 else None
    name, _, qualifier = ref.partition(":")
    return default_region, name, qualifier or None


class Graph:
    """Indexes of one run: functions by name, queues and roles by ARN, role policies."""

    def __init__(self, run: ProgramRun):
        self.run = run
        self.functions = {(r.region, output(r, "name")): r for r in run.of_type(LAMBDA)}
        self.by_arn: dict[str, Resource] = {}
        for r in run.resources:
            arn = output(r, "arn")
            if isinstance(arn, str):
                self.by_arn[arn] = r
        self.roles = run.of_type(ROLE)

    def function(self, ref: Any, region: str) -> tuple[Resource | None, str | None]:
        if not isinstance(ref, str):
            return None, None
        fn_region, name, qualifier = parse_lambda_ref(ref, region)
        return self.functions.get((fn_region, name)), qualifier

    def role_of(self, function: Resource) -> Resource | None:
        arn = plain(function.inputs.get("role"))
        found = self.by_arn.get(arn) if isinstance(arn, str) else None
        return found if found is not None and found.type == ROLE else None

    def statements(self, role: Resource) -> list[dict[str, Any]]:
        """Identity-policy statements of a role: inline, attached and role-level."""
        documents: list[Any] = []
        names = {output(role, "name"), role.id, output(role, "arn")}
        for policy in self.run.of_type(ROLE_POLICY):
            if plain(policy.inputs.get("role")) in names:
                documents.append(plain(policy.inputs.get("policy")))
        for attachment in self.run.of_type(ATTACHMENT):
            if plain(attachment.inputs.get("role")) in names:
                documents.append(self._policy_document(plain(attachment.inputs.get("policyArn"))))
        for inline in plain(role.inputs.get("inlinePolicies")) or []:
            documents.append(inline.get("policy"))
        for arn in plain(role.inputs.get("managedPolicyArns")) or []:
            documents.append(self._policy_document(arn))
        return [s for d in documents for s in _statements(d)]

    def _policy_document(self, arn: Any) -> Any:
        if arn in MANAGED_POLICIES:
            return MANAGED_POLICIES[arn]
        policy = self.by_arn.get(arn) if isinstance(arn, str) else None
        return plain(policy.inputs.get("policy")) if policy is not None else None


# AWS managed policies the program may attach, with the statements that matter here.
MANAGED_POLICIES: dict[str, dict[str, Any]] = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole": {"Statement": [
        {"Effect": "Allow", "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": "*"}]},
    "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole": {"Statement": [
        {"Effect": "Allow", "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
                                       "logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": "*"}]},
}


def _statements(document: Any) -> list[dict[str, Any]]:
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError:
            return []
    if not isinstance(document, dict):
        return []
    statements = document.get("Statement") or []
    return [s for s in (statements if isinstance(statements, list) else [statements]) if isinstance(s, dict)]


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _matches(patterns: Any, value: str, *, case: bool) -> bool:
    for pattern in _as_list(patterns):
        if not isinstance(pattern, str):
            continue
        if fnmatch.fnmatchcase(value if case else value.lower(), pattern if case else pattern.lower()):
            return True
    return False


def allows(statements: Iterable[dict[str, Any]], action: str, resource: str) -> bool:
    """Whether identity statements allow ``action`` on ``resource`` (explicit Deny wins;
    NotAction/NotResource statements grant nothing here; conditions are assumed met)."""
    allowed = False
    for statement in statements:
        if "NotAction" in statement or "NotResource" in statement:
            continue
        hit = _matches(statement.get("Action"), action, case=False) and _matches(
            statement.get("Resource"), resource, case=True
        )
        if hit and statement.get("Effect") == "Deny":
            return False
        allowed = allowed or (hit and statement.get("Effect") == "Allow")
    return allowed


def trusted_services(role: Resource) -> set[str]:
    """Service principals the role's trust policy lets assume it."""
    services: set[str] = set()
    for statement in _statements(plain(role.inputs.get("assumeRolePolicy"))):
        if statement.get("Effect") != "Allow" or not _matches(statement.get("Action"), "sts:AssumeRole", case=False):
            continue
        principal = statement.get("Principal")
        if isinstance(principal, dict):
            services.update(str(s) for s in _as_list(principal.get("Service")))
    return services


