"""AWS WAF rules: the web ACL and its logging configuration, every value checked against
botocore's wafv2 model, plus what WAF documents but the model cannot say.

A web ACL's rules nest (and/or/not statements, scope-downs), so no fixed input path
reaches every value: ``model_problems`` walks the pulumi-aws inputs alongside the API
shape they become (``CreateWebACLRequest``, ``LoggingConfiguration``), member by member,
and checks each value with the model's own constraint (enum, range, length, pattern),
each structure's required members, and that every member the program sets exists in
the API (a misspelt member is a problem, not silently dropped). Where pulumi-aws spells
the API differently it is said once, in ``_RENAMED`` and the two list-for-map shapes.
"""

from __future__ import annotations

from typing import Any

import botocore.model

from review.contracts.constraints import (
    CheckResult,
    Constraint,
    service_model,
    shape_constraint,
)
from review.contracts.constraints import (
    rule as register_rule,
)
from review.contracts.iam import Graph
from review.contracts.resource_types import (
    DISTRIBUTION,
    LOG_GROUP,
)
from review.resources import plain

WEB_ACL = "aws:wafv2/webAcl:WebAcl"
WEB_ACL_LOGGING = "aws:wafv2/webAclLoggingConfiguration:WebAclLoggingConfiguration"
WAF_API = "https://docs.aws.amazon.com/waf/latest/APIReference/"
RATE_BASED = WAF_API + "API_RateBasedStatement.html"
WAF_LOGGING = "https://docs.aws.amazon.com/waf/latest/developerguide/logging-cw-logs.html"
CLOUDFRONT_WAF = "https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/distribution-web-awswaf.html"
# RateBasedStatement.EvaluationWindowSec is a bare long in the model; the API reference
# lists the values WAF accepts.
EVALUATION_WINDOWS = Constraint(source=RATE_BASED, kind="integer", enum=(60, 120, 300, 600))
# pulumi-aws input name -> the API member it becomes, where not the same name in another case.
_RENAMED = {"requestBodies": "RequestBody", "request_bodies": "RequestBody"}
# Inputs that are pulumi-aws's own, not the API's.
_PULUMI_ONLY = {"region", "name_prefix", "namePrefix", "tags", "tagsAll", "ruleJson"}


def _member(shape: botocore.model.StructureShape, key: str) -> str | None:
    """The API member a pulumi-aws input (camelCase) or a rendered rule's key (snake_case) becomes."""
    wanted = _RENAMED.get(key, key).replace("_", "").lower()
    return next((m for m in shape.members if m.lower() == wanted), None)


def to_api(shape: botocore.model.Shape, value: Any) -> Any:
    """``value`` (pulumi-aws or rendered snake_case names) as the API takes it, for calls such
    as CheckCapacity: member names from the model, integral floats as integers."""
    if isinstance(shape, botocore.model.StructureShape) and isinstance(value, dict):
        out = {}
        for key, item in value.items():
            member = _member(shape, key)
            if member is None:
                raise ValueError(f"{shape.name} has no member for {key!r}")
            out[member] = to_api(shape.members[member], item)
        return out
    if isinstance(shape, botocore.model.ListShape) and isinstance(value, list):
        return [to_api(shape.member, item) for item in value]
    if shape.type_name in ("integer", "long"):
        return plain_int(value)
    return value


def _scalar(shape: botocore.model.Shape, value: Any, source: str) -> list[str]:
    if shape.type_name == "blob":
        return [] if isinstance(value, str) else [f"must be a string, not {value!r}"]
    if shape.type_name in ("integer", "long") and isinstance(value, float) and value.is_integer():
        value = int(value)  # the engine's numbers are floats; the API gets the integer
    return shape_constraint(shape, source).problems(value)


def model_problems(shape: botocore.model.Shape, value: Any, where: str, source: str,
                   extra: dict[str, Constraint] | None = None) -> tuple[int, list[str]]:
    """(values checked, problems) of ``value`` (pulumi-aws wire names) as the API's ``shape``.
    ``extra``: documented constraints by API member name, tightening the model's."""
    extra = extra or {}
    if isinstance(shape, botocore.model.StructureShape):
        if not isinstance(value, dict):
            return 1, [f"{where}: must be an object ({shape.name}), not {value!r}"]
        count, problems = 0, []
        present = set()
        for key, item in value.items():
            if key in _PULUMI_ONLY or item is None:
                continue
            member = _member(shape, key)
            if member is None:
                problems.append(f"{where}.{key}: {shape.name} has no such member")
                continue
            present.add(member)
            n, found = model_problems(shape.members[member], item, f"{where}.{key}", source, extra)
            if member in extra:
                found += [f"{where}.{key}: {p}" for p in extra[member].problems(plain_int(item))]
            count, problems = count + n, problems + found
        problems += [f"{where}: {shape.name} requires {m}" for m in shape.required_members if m not in present]
        return count, problems
    if isinstance(shape, botocore.model.ListShape):
        if not isinstance(value, list):
            return 1, [f"{where}: must be a list ({shape.name}), not {value!r}"]
        count = 1
        problems = [f"{where} {p}" for p in Constraint(source=source, kind="list", min_length=shape.metadata.get("min"),
                                                        max_length=shape.metadata.get("max")).problems(value)]
        for i, item in enumerate(value):
            n, found = model_problems(shape.member, item, f"{where}[{i}]", source, extra)
            count, problems = count + n, problems + found
        return count, problems
    if isinstance(shape, botocore.model.MapShape):
        return _map_problems(shape, value, where, source, extra)
    return 1, [f"{where}: {p}" for p in _scalar(shape, value, source)]


def _map_problems(shape: botocore.model.MapShape, value: Any, where: str, source: str,
                  extra: dict[str, Constraint]) -> tuple[int, list[str]]:
    """pulumi-aws writes the API's two maps as lists: custom response bodies as
    ``[{key, content, contentType}]``, request bodies as ``[{cloudfront: {...}}]``."""
    if not isinstance(value, list):
        return 1, [f"{where}: must be a list (the API's {shape.name} map), not {value!r}"]
    count, problems = 0, []
    keys: list[Any] = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            problems.append(f"{where}[{i}]: must be an object, not {item!r}")
            continue
        if "key" in item:  # custom response bodies
            keys.append(item["key"])
            entries = [(item["key"], {k: v for k, v in item.items() if k != "key"})]
        else:  # request bodies: {resource type in lower case: config}
            entries = [(k.upper(), v) for k, v in item.items()]
            keys += [k for k, _ in entries]
        for key, entry in entries:
            found = _scalar(shape.key, key, source)
            n, deeper = model_problems(shape.value, entry, f"{where}[{i}]", source, extra)
            count, problems = count + 1 + n, problems + [f"{where}[{i}] key {p}" for p in found] + deeper
    problems += [f"{where}: {p}" for p in Constraint(source=source, kind="list", min_length=shape.metadata.get("min"),
                                                      max_length=shape.metadata.get("max")).problems(keys)]
    if len(set(map(str, keys))) != len(keys):
        problems.append(f"{where}: a key is used twice ({keys})")
    return count, problems


def plain_int(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _source(shape: str) -> str:
    return f"botocore wafv2 {service_model('wafv2').api_version} {shape}"


@register_rule("waf.web-acl-model",
               "every web ACL input is a member of CreateWebACLRequest with a value its model accepts; evaluation "
               "windows are 60, 120, 300 or 600 s",
               f"botocore wafv2 CreateWebACLRequest + {RATE_BASED}")
def _web_acl_model(graph: Graph, result: CheckResult) -> None:
    shape = service_model("wafv2").shape_for("CreateWebACLRequest")
    for acl in graph.run.of_type(WEB_ACL):
        result.resources += 1
        inputs = plain(acl.inputs)
        n, problems = model_problems(shape, inputs, acl.name, _source("CreateWebACLRequest"),
                                     {"EvaluationWindowSec": EVALUATION_WINDOWS})
        result.values += n
        result.problems += problems


@register_rule("waf.logging-model",
               "every logging configuration input is a member of LoggingConfiguration with a value its model accepts",
               "botocore wafv2 PutLoggingConfigurationRequest.LoggingConfiguration")
def _logging_model(graph: Graph, result: CheckResult) -> None:
    shape = service_model("wafv2").shape_for("LoggingConfiguration")
    for config in graph.run.of_type(WEB_ACL_LOGGING):
        result.resources += 1
        n, problems = model_problems(shape, plain(config.inputs), config.name, _source("LoggingConfiguration"))
        result.values += n
        result.problems += problems


@register_rule("waf.cloudfront",
               "a distribution's web ACL has scope CLOUDFRONT and is in us-east-1; it logs to a log group in "
               "us-east-1 named aws-waf-logs-*",
               f"{CLOUDFRONT_WAF} + {WAF_LOGGING}")
def _cloudfront_web_acl(graph: Graph, result: CheckResult) -> None:
    for distribution in graph.run.of_type(DISTRIBUTION):
        arn = plain(distribution.inputs.get("webAclId"))
        if not arn:
            continue
        result.resources += 1
        result.values += 1
        acl = graph.by_arn.get(arn)
        if acl is None or acl.type != WEB_ACL:
            result.problems.append(f"{distribution.name}: webAclId {arn} is no web ACL of the program")
            continue
        if plain(acl.inputs.get("scope")) != "CLOUDFRONT" or acl.region != "us-east-1":
            result.problems.append(f"{acl.name}: scope {plain(acl.inputs.get('scope'))} in {acl.region}: a "
                                   "distribution takes only a CLOUDFRONT web ACL, which lives in us-east-1")
    for config in graph.run.of_type(WEB_ACL_LOGGING):
        for destination in plain(config.inputs.get("logDestinationConfigs")) or []:
            result.values += 1
            group = graph.by_arn.get(destination)
            if group is None or group.type != LOG_GROUP:
                continue  # a Firehose stream or a bucket: not this program's
            name = str(plain(group.inputs.get("name")) or "")
            if not name.startswith("aws-waf-logs-") or group.region != config.region:
                result.problems.append(f"{config.name}: log group {name!r} in {group.region}: WAF logs only to a "
                                       f"group named aws-waf-logs-* in the web ACL's region ({config.region})")


WAF_QUOTAS = "https://docs.aws.amazon.com/waf/latest/developerguide/limits.html"
# WAF's fixed quotas per web ACL (WAF_QUOTAS) that the model does not carry.
MAX_RATE_BASED_RULES = 10
MAX_RESPONSE_BODIES = 50
MAX_RESPONSE_BODY_BYTES = 4 * 1024
MAX_RESPONSE_HEADERS = 10
MAX_TEXT_TRANSFORMATIONS = 10
MAX_SEARCH_STRING_CHARS = 200


def _statements(value: Any) -> list[dict[str, Any]]:
    """Every statement object nested in ``value`` (a rule's statement and its scope-downs)."""
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        if "byteMatchStatement" in value:
            found.append(value["byteMatchStatement"])
        for item in value.values():
            found += _statements(item)
    elif isinstance(value, list):
        for item in value:
            found += _statements(item)
    return found


@register_rule("waf.quotas",
               f"per web ACL at most {MAX_RATE_BASED_RULES} rate-based rules and {MAX_RESPONSE_BODIES} custom response "
               f"bodies of at most {MAX_RESPONSE_BODY_BYTES} bytes; per custom response at most {MAX_RESPONSE_HEADERS} "
               f"headers; per statement at most {MAX_TEXT_TRANSFORMATIONS} text transformations and a search string "
               f"of at most {MAX_SEARCH_STRING_CHARS} characters",
               WAF_QUOTAS)
def _quotas(graph: Graph, result: CheckResult) -> None:
    for acl in graph.run.of_type(WEB_ACL):
        result.resources += 1
        inputs = plain(acl.inputs)
        rules = inputs.get("rules") or []
        rate_based = [r["name"] for r in rules if "rateBasedStatement" in (r.get("statement") or {})]
        bodies = inputs.get("customResponseBodies") or []
        result.values += 2 + len(bodies)
        if len(rate_based) > MAX_RATE_BASED_RULES:
            result.problems.append(f"{acl.name}: {len(rate_based)} rate-based rules, WAF allows "
                                   f"{MAX_RATE_BASED_RULES} per web ACL")
        if len(bodies) > MAX_RESPONSE_BODIES:
            result.problems.append(f"{acl.name}: {len(bodies)} custom response bodies, WAF allows {MAX_RESPONSE_BODIES}")
        for body in bodies:
            size = len(str(body.get("content", "")).encode())
            if size > MAX_RESPONSE_BODY_BYTES:
                result.problems.append(f"{acl.name}: custom response body {body.get('key')!r} is {size} bytes, WAF "
                                       f"allows {MAX_RESPONSE_BODY_BYTES}")
        for rule_ in rules:
            custom = ((rule_.get("action") or {}).get("block") or {}).get("customResponse") or {}
            headers = custom.get("responseHeaders") or []
            result.values += 1
            if len(headers) > MAX_RESPONSE_HEADERS:
                result.problems.append(f"{acl.name}: rule {rule_.get('name')!r} sets {len(headers)} response "
                                       f"headers, WAF allows {MAX_RESPONSE_HEADERS}")
            for statement in _statements(rule_.get("statement")):
                result.values += 1
                transformations = statement.get("textTransformations") or []
                search = str(statement.get("searchString", ""))
                if len(transformations) > MAX_TEXT_TRANSFORMATIONS:
                    result.problems.append(f"{acl.name}: rule {rule_.get('name')!r} has a statement with "
                                           f"{len(transformations)} text transformations, WAF allows "
                                           f"{MAX_TEXT_TRANSFORMATIONS}")
                if len(search) > MAX_SEARCH_STRING_CHARS:
                    result.problems.append(f"{acl.name}: rule {rule_.get('name')!r} matches a search string of "
                                           f"{len(search)} characters, WAF allows {MAX_SEARCH_STRING_CHARS}")
