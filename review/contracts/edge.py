"""Edge rules: Lambda@Edge and CloudFront Function restrictions that the API accepts but
CloudFront rejects at association (the Lambda@Edge rules come from components/edge_function.py),
and the distribution's methods and certificate."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.edge_function import (
    ARCHITECTURE,
    EDGE_REGION,
    EVENT_LIMITS,
    MAX_EPHEMERAL_STORAGE_MB,
    RUNTIME_PATTERN,
    TRUSTED_SERVICES,
)
from devkit.mock_program import Resource
from review.contracts.constraints import (
    ALLOWED_METHODS,
    CFF_MAX_CODE_BYTES,
    CFF_RESTRICTIONS,
    CUSTOM_DOMAIN,
    EDGE_QUOTAS,
    EDGE_RESTRICTIONS,
    RULES,
    CheckResult,
    Rule,
    rule,
)
from review.contracts.iam import Graph, parse_lambda_ref, trusted_services
from review.contracts.resource_types import (
    CF_FUNCTION,
    DISTRIBUTION,
    LAMBDA,
    PROVISIONED_CONFIG,
)
from review.resources import output, plain
from stack_config.loading import PROJECT_ROOT


@dataclass(frozen=True)
class EdgeAssociation:
    distribution: Resource
    where: str
    event_type: str
    arn: str


def _behaviours(distribution: Resource) -> list[tuple[str, dict[str, Any]]]:
    inputs = plain(distribution.inputs)
    found = []
    if isinstance(inputs.get("defaultCacheBehavior"), dict):
        found.append(("defaultCacheBehavior", inputs["defaultCacheBehavior"]))
    for i, behaviour in enumerate(inputs.get("orderedCacheBehaviors") or []):
        found.append((f"orderedCacheBehaviors[{i}]", behaviour))
    return found


def lambda_associations(graph: Graph) -> list[EdgeAssociation]:
    return [
        EdgeAssociation(d, f"{where}.lambdaFunctionAssociations[{i}]", str(a.get("eventType")), str(a.get("lambdaArn")))
        for d in graph.run.of_type(DISTRIBUTION)
        for where, behaviour in _behaviours(d)
        for i, a in enumerate(behaviour.get("lambdaFunctionAssociations") or [])
    ]


def function_associations(graph: Graph) -> list[EdgeAssociation]:
    return [
        EdgeAssociation(d, f"{where}.functionAssociations[{i}]", str(a.get("eventType")), str(a.get("functionArn")))
        for d in graph.run.of_type(DISTRIBUTION)
        for where, behaviour in _behaviours(d)
        for i, a in enumerate(behaviour.get("functionAssociations") or [])
    ]


def edge_functions(graph: Graph, result: CheckResult) -> list[tuple[EdgeAssociation, Resource]]:
    """Each Lambda@Edge association with the program's function it names. An association
    whose function the program does not create cannot be verified: that is a problem."""
    out = []
    for association in lambda_associations(graph):
        result.resources += 1
        _, name, _ = parse_lambda_ref(association.arn, EDGE_REGION)
        function = next((f for f in graph.run.of_type(LAMBDA) if output(f, "name") == name), None)
        if function is None:
            result.problems.append(
                f"{association.distribution.name}: {association.where} names {association.arn}, "
                f"a function this program does not create: its restrictions cannot be verified"
            )
            continue
        out.append((association, function))
    return out


def _edge_rule(rule_id: str, description: str, source: str = EDGE_RESTRICTIONS) -> Callable[
    [Callable[[EdgeAssociation, Resource, Graph], list[str]]], Callable[[EdgeAssociation, Resource, Graph], list[str]]
]:
    """A rule over every Lambda@Edge association: the function returns its problems."""

    def register(
        fn: Callable[[EdgeAssociation, Resource, Graph], list[str]],
    ) -> Callable[[EdgeAssociation, Resource, Graph], list[str]]:
        def check(graph: Graph, result: CheckResult) -> None:
            for association, function in edge_functions(graph, result):
                result.values += 1
                result.problems += [f"{function.name} ({association.event_type}): {p}" for p in fn(association, function, graph)]

        RULES.append(Rule(rule_id, "edge", description, source, check))
        return fn

    return register


@_edge_rule("edge.lambda-region", "Lambda@Edge functions are created in us-east-1 (explicit region=)")
def _edge_region(association: EdgeAssociation, function: Resource, graph: Graph) -> list[str]:
    region = plain(function.inputs.get("region"))
    if region is None:
        return [f"has no region=; it would follow the provider's default region instead of {EDGE_REGION}"]
    return [] if region == EDGE_REGION else [f"is in {region}; Lambda@Edge functions must be in {EDGE_REGION}"]


@_edge_rule("edge.lambda-numbered-version",
            "the distribution references a published, numbered version (qualified ARN), never $LATEST or an alias")
def _edge_version(association: EdgeAssociation, function: Resource, graph: Graph) -> list[str]:
    problems = []
    if plain(function.inputs.get("publish")) is not True:
        problems.append("publish is not true: there is no numbered version to associate")
    if not re.fullmatch(r"arn:aws[a-zA-Z-]*:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]+:\d+", association.arn):
        problems.append(f"{association.where} references {association.arn}, not a numbered version")
    elif association.arn != output(function, "qualifiedArn"):
        problems.append(f"{association.where} references {association.arn}, not the function's qualifiedArn")
    return problems


@_edge_rule("edge.lambda-architecture", f"Lambda@Edge supports {ARCHITECTURE} only")
def _edge_arch(association: EdgeAssociation, function: Resource, graph: Graph) -> list[str]:
    architectures = plain(function.inputs.get("architectures")) or ["x86_64"]  # Lambda's default
    return [] if architectures == [ARCHITECTURE] else [f"architectures {architectures}: Lambda@Edge needs {ARCHITECTURE}"]


@_edge_rule("edge.lambda-unsupported-features",
            "no environment variables, layers, VPC, provisioned concurrency, container image, or ephemeral storage "
            f"above {MAX_EPHEMERAL_STORAGE_MB} MB")
def _edge_features(association: EdgeAssociation, function: Resource, graph: Graph) -> list[str]:
    inputs = plain(function.inputs)
    problems = []
    if (inputs.get("environment") or {}).get("variables"):
        problems.append("has environment variables (render configuration into the code instead)")
    if inputs.get("layers"):
        problems.append("has layers")
    if (inputs.get("vpcConfig") or {}).get("subnetIds"):
        problems.append("has a VPC configuration")
    if inputs.get("packageType") == "Image" or inputs.get("imageUri"):
        problems.append("is a container image")
    if ((inputs.get("ephemeralStorage") or {}).get("size") or 512) > MAX_EPHEMERAL_STORAGE_MB:  # 512: Lambda's default
        problems.append(f"has ephemeral storage above {MAX_EPHEMERAL_STORAGE_MB} MB")
    name = output(function, "name")
    for config in graph.run.of_type(PROVISIONED_CONFIG):
        if parse_lambda_ref(str(plain(config.inputs.get("functionName"))), function.region)[1] == name:
            problems.append(f"has provisioned concurrency ({config.name})")
    return problems


@_edge_rule("edge.lambda-runtime", "Lambda@Edge runs Python 3 and Node.js managed runtimes")
def _edge_runtime(association: EdgeAssociation, function: Resource, graph: Graph) -> list[str]:
    runtime = str(plain(function.inputs.get("runtime")))
    ok = RUNTIME_PATTERN.fullmatch(runtime) is not None
    return [] if ok else [f"runtime {runtime} is not a Python 3 or Node.js runtime"]


@_edge_rule("edge.lambda-trust", f"the execution role trusts {' and '.join(TRUSTED_SERVICES)}")
def _edge_trust(association: EdgeAssociation, function: Resource, graph: Graph) -> list[str]:
    role = graph.role_of(function)
    if role is None:
        return [f"role {plain(function.inputs.get('role'))} is not a role this program creates: trust unverifiable"]
    missing = set(TRUSTED_SERVICES) - trusted_services(role)
    return [f"role {role.name} does not trust {', '.join(sorted(missing))}"] if missing else []


@_edge_rule("edge.lambda-limits", "timeout, memory and package size within the event type's Lambda@Edge quotas",
            EDGE_QUOTAS)
def _edge_limits(association: EdgeAssociation, function: Resource, graph: Graph) -> list[str]:
    limits = EVENT_LIMITS.get(association.event_type)
    if limits is None:
        return [f"event type {association.event_type} is not a CloudFront event"]
    timeout_limit, memory_limit, size_limit = limits.timeout_s, limits.memory_mb, limits.package_bytes
    problems = []
    timeout = plain(function.inputs.get("timeout")) or 3
    memory = plain(function.inputs.get("memorySize")) or 128
    if timeout > timeout_limit:
        problems.append(f"timeout {timeout} s is above {timeout_limit} s")
    if memory > memory_limit:
        problems.append(f"memory {memory} MB is above {memory_limit} MB")
    path = getattr(function.inputs.get("code"), "path", None)
    if path:
        # The program runs from the project root, so relative package paths start there.
        full = Path(path) if Path(path).is_absolute() else PROJECT_ROOT / path
        if not full.is_file():
            problems.append(f"package {path} does not exist: its size cannot be checked")
        elif full.stat().st_size > size_limit:
            problems.append(f"package is {full.stat().st_size} bytes, above {size_limit}")
    return problems


@rule("edge.cloudfront-function-association",
      "CloudFront Functions: viewer events only, a published function this program creates, code within 10 KB",
      CFF_RESTRICTIONS)
def _cff_associations(graph: Graph, result: CheckResult) -> None:
    functions = {output(f, "arn"): f for f in graph.run.of_type(CF_FUNCTION)}
    for association in function_associations(graph):
        result.resources += 1
        result.values += 1
        where = f"{association.distribution.name}: {association.where}"
        if association.event_type not in ("viewer-request", "viewer-response"):
            result.problems.append(f"{where} is {association.event_type}; CloudFront Functions run on viewer events")
        function = functions.get(association.arn)
        if function is None:
            result.problems.append(f"{where} names {association.arn}, a function this program does not create")
            continue
        if plain(function.inputs.get("publish")) is False:
            result.problems.append(f"{where}: {function.name} is not published (only LIVE functions associate)")
        code = plain(function.inputs.get("code"))
        if not isinstance(code, str) or not 0 < len(code.encode()) <= CFF_MAX_CODE_BYTES:
            result.problems.append(f"{where}: {function.name} code is missing or above 10 KB")


@rule("cloudfront.allowed-methods",
      "allowed methods are one of AWS's three sets; cached methods are GET,HEAD or GET,HEAD,OPTIONS within them",
      ALLOWED_METHODS)
def _allowed_methods(graph: Graph, result: CheckResult) -> None:
    sets = ({"GET", "HEAD"}, {"GET", "HEAD", "OPTIONS"}, {"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE"})
    for distribution in graph.run.of_type(DISTRIBUTION):
        result.resources += 1
        for where, behaviour in _behaviours(distribution):
            allowed = set(behaviour.get("allowedMethods") or [])
            cached = set(behaviour.get("cachedMethods") or [])
            result.values += 1
            if allowed not in sets:
                result.problems.append(f"{distribution.name}: {where}.allowedMethods {sorted(allowed)} is not an AWS set")
            if cached not in sets[:2] or not cached <= allowed:
                result.problems.append(f"{distribution.name}: {where}.cachedMethods {sorted(cached)} is not allowed")


@rule("cloudfront.custom-domain-certificate",
      "aliases need an ACM certificate in us-east-1 served with SNI, not the default certificate", CUSTOM_DOMAIN)
def _custom_domain(graph: Graph, result: CheckResult) -> None:
    for distribution in graph.run.of_type(DISTRIBUTION):
        result.resources += 1
        aliases = plain(distribution.inputs.get("aliases")) or []
        if not aliases:
            continue
        result.values += 1
        certificate = plain(distribution.inputs.get("viewerCertificate")) or {}
        arn = str(certificate.get("acmCertificateArn") or "")
        if not arn.startswith(f"arn:aws:acm:{EDGE_REGION}:"):
            result.problems.append(f"{distribution.name}: aliases {aliases} need an ACM certificate in {EDGE_REGION}")
        if certificate.get("cloudfrontDefaultCertificate"):
            result.problems.append(f"{distribution.name}: aliases cannot use the default CloudFront certificate")
        if certificate.get("sslSupportMethod") != "sni-only":
            result.problems.append(f"{distribution.name}: sslSupportMethod should be sni-only (vip costs extra)")

