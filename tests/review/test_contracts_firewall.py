"""The web ACL's contracts: the program's web ACL and logging configuration pass botocore's
wafv2 model value by value, and a value the model (or WAF's documentation) refuses, deep in
a nested statement or in pulumi-aws's list-for-map spellings, is reported by where it is."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from devkit.mock_program import ProgramRun
from review.contracts import check_run

WEB_ACL = "aws:wafv2/webAcl:WebAcl"


@pytest.fixture(scope="module")
def report(prod: ProgramRun):
    return check_run(prod)


def test_the_programs_web_acl_passes_the_model_with_every_nested_value_checked(report):
    for check_id in ("waf.web-acl-model", "waf.logging-model", "waf.cloudfront"):
        result = report.result(check_id)
        assert result.status == "ok", (check_id, result.problems)
    # Every rule's statement, action and visibility: far more values than the top level has.
    assert report.result("waf.web-acl-model").values > 100


def _rate(rule: dict[str, Any]) -> dict[str, Any]:
    return rule["statement"]["rateBasedStatement"]



def _token_rule(inputs: dict[str, Any]) -> dict[str, Any]:
    return next(r for r in inputs["rules"] if r["name"] == "token-limit")


@pytest.mark.parametrize(("change", "message"), [
    (lambda i: _rate(_token_rule(i)).update(limit=5.0), "limit: 5 is below the minimum 10"),
    (lambda i: _rate(_token_rule(i)).update(evaluationWindowSec=30.0), "evaluationWindowSec: 30 is not one of"),
    (lambda i: _rate(_token_rule(i)).update(aggregateKeyType="TOKEN"), "'TOKEN' is not one of"),
    (lambda i: _rate(_token_rule(i))["scopeDownStatement"]["byteMatchStatement"].update(
        positionalConstraint="BEGINS"), "positionalConstraint: 'BEGINS' is not one of"),
    (lambda i: _rate(_token_rule(i))["scopeDownStatement"]["byteMatchStatement"]["textTransformations"][0].update(
        type="URL_DECODE_TWICE"), "type: 'URL_DECODE_TWICE' is not one of"),
    (lambda i: _token_rule(i)["action"]["block"]["customResponse"].update(responseCode=99.0),
     "responseCode: 99 is below the minimum 200"),
    (lambda i: _token_rule(i).update(name="token limit"), "does not match the pattern"),
    (lambda i: _token_rule(i)["visibilityConfig"].pop("metricName"), "VisibilityConfig requires MetricName"),
    (lambda i: _token_rule(i).update(overideAction={"none": {}}), "overideAction: Rule has no such member"),
    (lambda i: i["customResponseBodies"][0].update(contentType="APPLICATION_XML"), "'APPLICATION_XML' is not one of"),
    (lambda i: i["customResponseBodies"][1].update(key=i["customResponseBodies"][0]["key"]), "a key is used twice"),
    (lambda i: i["associationConfig"]["requestBodies"][0]["cloudfront"].update(defaultSizeInspectionLimit="KB_128"),
     "'KB_128' is not one of"),
    (lambda i: i.update(scope="GLOBAL"), "'GLOBAL' is not one of"),
])
def test_a_value_the_model_refuses_is_reported_where_it_is(prod: ProgramRun, change, message):
    run = copy.deepcopy(prod)
    acl = run.one(WEB_ACL)
    change(acl.inputs)
    problems = check_run(run).result("waf.web-acl-model").problems
    assert any(message in p and p.startswith(acl.name) for p in problems), problems


def test_a_web_acl_cloudfront_cannot_use_or_a_log_group_waf_cannot_write_is_reported(prod: ProgramRun):
    run = copy.deepcopy(prod)
    run.one(WEB_ACL).inputs["scope"] = "REGIONAL"
    group = next(g for g in run.of_type("aws:cloudwatch/logGroup:LogGroup") if g["name"].startswith("aws-waf-logs-"))
    group.inputs["name"] = "waf-logs"
    problems = check_run(run).result("waf.cloudfront").problems
    assert any("a distribution takes only a CLOUDFRONT web ACL" in p for p in problems), problems
    assert any("'waf-logs'" in p and "aws-waf-logs-*" in p for p in problems), problems


def test_wafs_fixed_quotas_hold_for_the_program_and_a_web_acl_past_them_is_reported(prod: ProgramRun, report):
    assert report.result("waf.quotas").status == "ok", report.result("waf.quotas").problems
    run = copy.deepcopy(prod)
    acl = run.one(WEB_ACL)
    token = _token_rule(acl.inputs)
    acl.inputs["rules"] += [{**copy.deepcopy(token), "name": f"extra-{i}"} for i in range(9)]
    acl.inputs["customResponseBodies"][0]["content"] = "x" * 5000
    _rate(token)["scopeDownStatement"]["byteMatchStatement"]["searchString"] = "/" + "m" * 200
    problems = check_run(run).result("waf.quotas").problems
    assert any("13 rate-based rules, WAF allows 10" in p for p in problems), problems  # prod's 4, and 9 more
    assert any("is 5000 bytes, WAF allows 4096" in p for p in problems), problems
    assert any("search string of 201 characters" in p for p in problems), problems
