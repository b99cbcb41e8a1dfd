"""OriginSecret under Pulumi mocks: the origin secret in Secrets Manager (one secret in
every region that reads it), and no secret value in any Lambda function's environment,
in the program run and in the plan, whichever way the secret is given or rotated."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pulumi.runtime import rpc

from components.secrets import origin_secret_name
from review.plan import render_plan
from stack_config.loading import load_from_stack_file
from tests.harness import ProgramRun, run_program

CONFIG = load_from_stack_file("prod")
READERS = list(dict.fromkeys([*CONFIG.regions, *CONFIG.probes.regions]))
SECRET = "aws:secretsmanager/secret:Secret"
VERSION = "aws:secretsmanager/secretVersion:SecretVersion"
FUNCTION = "aws:lambda/function:Function"
CONFIGURED = "c" * 40
CONFIGURED_PREVIOUS = "p" * 40
ROTATION_STEP_1 = {"originSecretRotation": "2027-01", "originSecretPreviousRotation": "2026-11"}


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig


def plain(value: Any) -> Any:
    return value["value"] if is_secret(value) else value


def passwords(run: ProgramRun) -> dict[str, str]:
    return {p.name.rsplit("-origin-secret-", 1)[1]: p.outputs["result"]
            for p in run.of_type("random:index/randomPassword:RandomPassword")}


def stored(run: ProgramRun, region: str) -> dict[str, Any]:
    version = run.one(VERSION, name_contains=f"-origin-secret-{region}-value")
    assert is_secret(version.inputs["secretString"]), "the value is a secret in the state"
    assert version["secretId"] == run.one(SECRET, name_contains=f"-origin-secret-{region}")["arn"]
    return dict(json.loads(plain(version.inputs["secretString"])))


def secret_versions(run: ProgramRun) -> dict[str, str | None]:
    """Function -> the origin secret version in its environment."""
    return {f.name: (f.inputs.get("environment") or {}).get("variables", {}).get("ORIGIN_SECRET_VERSION")
            for f in run.of_type(FUNCTION)}


@pytest.fixture(scope="module")
def configured() -> ProgramRun:
    return run_program("prod", config_overrides={"originSecret": CONFIGURED, "originSecretPrevious": CONFIGURED_PREVIOUS})


@pytest.fixture(scope="module")
def rotating() -> ProgramRun:
    return run_program("prod", config_overrides=ROTATION_STEP_1)


def test_one_origin_secret_in_every_origin_and_probe_region_holding_the_generated_value(prod: ProgramRun):
    secrets = prod.of_type(SECRET)
    origin_secrets = [s for s in secrets if "-origin-secret-" in s.name]
    assert sorted(s.region for s in origin_secrets) == sorted(READERS)
    # One name in every region, holding the stack's name (two stacks in one account share none).
    assert {s["name"] for s in origin_secrets} == {origin_secret_name(CONFIG.server_id, "prod")}
    assert origin_secret_name(CONFIG.server_id, "prod") == "acme-mcp-prod-origin-secret"
    generated = passwords(prod)
    for region in READERS:
        assert stored(prod, region) == {"current": generated[CONFIG.origin_secret_rotation]}


def test_a_rotation_stores_both_values_and_gives_every_reader_a_new_version(prod: ProgramRun, rotating: ProgramRun):
    values = passwords(rotating)
    for region in READERS:
        assert stored(rotating, region) == {"current": values["2027-01"], "previous": values["2026-11"]}
    before, after = secret_versions(prod), secret_versions(rotating)
    readers = [name for name, version in before.items() if version]
    assert len(readers) == len(CONFIG.regions) + len(CONFIG.probes.regions)  # every origin and every probe
    for name in readers:
        assert after[name] and after[name] != before[name], f"{name} would keep the old pair in warm environments"


def test_a_rotations_second_step_stores_the_new_value_alone(prod: ProgramRun):
    step2 = run_program("prod", config_overrides={"originSecretRotation": "2027-01"})
    values = passwords(step2)
    assert list(values) == ["2027-01"]
    for region in READERS:
        assert stored(step2, region) == {"current": values["2027-01"]}


def test_a_configured_secret_and_its_previous_are_stored(configured: ProgramRun):
    assert not configured.of_type("random:index/randomPassword:RandomPassword")
    for region in READERS:
        assert stored(configured, region) == {"current": CONFIGURED, "previous": CONFIGURED_PREVIOUS}


@pytest.mark.parametrize("variant", ["generated", "configured", "rotating"])
def test_no_lambda_environment_holds_a_secret_value_in_the_run_or_the_plan(
        variant: str, prod: ProgramRun, configured: ProgramRun, rotating: ProgramRun):
    run = {"generated": prod, "configured": configured, "rotating": rotating}[variant]
    values = [*passwords(run).values(), CONFIGURED, CONFIGURED_PREVIOUS]
    functions = run.of_type(FUNCTION)
    assert len(functions) > len(CONFIG.regions)
    for fn in functions:
        environment = fn.inputs.get("environment")
        if environment is None:
            continue  # the Lambda@Edge router has none
        assert not is_secret(environment), f"{fn.name}: its environment is secret, so something in it is"
        text = json.dumps(environment)
        assert not any(v in text for v in values), f"{fn.name} holds the origin secret in its environment"
    plan = render_plan(run)
    assert "environment: (secret input" not in plan
    assert not [line for line in plan.splitlines() if "environment.variables." in line and "[secret]" in line]


@pytest.mark.parametrize("region", CONFIG.regions)
def test_the_origin_role_may_read_its_regions_origin_secret_and_no_other(prod: ProgramRun, region: str):
    fn = prod.one(FUNCTION, region=region, name_contains=f"-origin-{region}-function")
    role = prod.one("aws:iam/role:Role", name_contains=f"-origin-{region}-role")
    assert fn["role"] == role["arn"]
    statements = [s for p in prod.of_type("aws:iam/rolePolicy:RolePolicy") if p["role"] in (role.id, role["name"])
                  for s in json.loads(p["policy"])["Statement"]]
    reads = [s for s in statements if any(a.startswith("secretsmanager:") for a in s["Action"])]
    assert reads == [{"Effect": "Allow", "Action": ["secretsmanager:GetSecretValue"],
                      "Resource": [prod.one(SECRET, name_contains=f"-origin-secret-{region}")["arn"]]}]


def test_cloudfront_still_sends_the_value_as_the_origin_custom_header(prod: ProgramRun):
    distribution = prod.one("aws:cloudfront/distribution:Distribution")
    headers = [h for o in plain(distribution.inputs["origins"]) for h in o.get("customHeaders", [])]
    assert {h["value"] for h in headers} == {passwords(prod)[CONFIG.origin_secret_rotation]}
