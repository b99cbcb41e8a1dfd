"""Several stacks in one account: every explicit physical name carries the stack, within
each service's length limit (components/naming.py), and a staging stack with prod's
settings collides with prod on no name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components import naming
from components.naming import physical_name, stack_token
from edge.regions import AWS_REGIONS
from stack_config.loading import PROJECT_ROOT
from tests.harness import ProgramRun, run_program

# Every resource type the program gives an explicit physical name (its `name` input), which must carry the stack.
NAMED_TYPES = {
    "aws:cloudfront/function:Function",
    "aws:cloudfront/originRequestPolicy:OriginRequestPolicy",
    "aws:cloudfront/responseHeadersPolicy:ResponseHeadersPolicy",
    "aws:cloudfront/keyValueStore:KeyValueStore",
    "aws:lambda/function:Function",
    "aws:cloudwatch/logGroup:LogGroup",
    "aws:sqs/queue:Queue",
    "aws:sns/topic:Topic",
    "aws:dynamodb/table:Table",
    "aws:scheduler/schedule:Schedule",
    "aws:scheduler/scheduleGroup:ScheduleGroup",
    "aws:sfn/stateMachine:StateMachine",
    "aws:kms/alias:Alias",
    "aws:cloudwatch/metricAlarm:MetricAlarm",
    "aws:secretsmanager/secret:Secret",
    "aws:wafv2/webAcl:WebAcl",  # unique per account in us-east-1 for CloudFront
}
# Names that exist once per account (CloudFront), the others once per region.
GLOBAL_TYPES = {t for t in NAMED_TYPES if t.startswith("aws:cloudfront/")}


def physical_names(run: ProgramRun) -> set[tuple[str, str, str]]:
    """(type, scope, name) of every resource that sets its name explicitly."""
    out = set()
    for resource in run.resources:
        name = resource.inputs.get("name")
        if resource.custom and resource.type.startswith("aws:") and isinstance(name, str):
            scope = "account" if resource.type in GLOBAL_TYPES else resource.region
            # Schedules are named within their group, aliases within their function.
            within = resource.inputs.get("groupName") or resource.inputs.get("functionName") or ""
            out.add((resource.type, f"{scope}/{within}", name))
    return out


STAGING_DOMAIN = {"customDomain": "mcp-staging.acme.example"}


@pytest.fixture(scope="module")
def staging(tmp_path_factory: pytest.TempPathFactory) -> ProgramRun:
    """A `staging` stack file with prod's settings but a custom domain of its own (CloudFront gives
    a domain to one distribution only), in the same account."""
    folder: Path = tmp_path_factory.mktemp("stacks")
    shutil.copy(PROJECT_ROOT / "Pulumi.prod.yaml", folder / "Pulumi.staging.yaml")
    return run_program("staging", stack_file=folder / "Pulumi.staging.yaml", config_overrides=STAGING_DOMAIN)


def test_a_staging_stack_with_prods_settings_shares_no_physical_name_with_prod(prod: ProgramRun, staging: ProgramRun):
    # Given prod and staging with the same settings in one account
    prod_names, staging_names = physical_names(prod), physical_names(staging)
    # Then every kind of named resource is there, the two stacks have as many names ...
    # (prod creates no secret: its probes read a client secret that exists already)
    assert {t for t, _, _ in prod_names} == NAMED_TYPES - {"aws:secretsmanager/secret:Secret"} | {"aws:lambda/alias:Alias"}
    assert len(prod_names) == len(staging_names)
    # ... and not one of them is shared (within the scope where AWS requires uniqueness)
    assert prod_names.isdisjoint(staging_names), sorted(prod_names & staging_names)[:10]
    assert all("-staging-" in name for t, _, name in staging_names if t in NAMED_TYPES), sorted(staging_names)[:5]


def test_resources_nobody_finds_by_name_stay_auto_named(prod: ProgramRun):
    # IAM names are account-wide: roles and their inline policies are auto-named by Pulumi.
    for typ in ("aws:iam/role:Role", "aws:iam/rolePolicy:RolePolicy"):
        assert all(not r.inputs.get("name") for r in prod.of_type(typ)), typ


def test_names_read_server_stack_purpose():
    assert physical_name("acme-mcp", "origin-eu-west-1", limit=64, stack="prod") == "acme-mcp-prod-origin-eu-west-1"
    assert physical_name("acme-mcp", "alerts", limit=256, stack="prod", prefix="alias/") == "alias/acme-mcp-prod-alerts"


def test_a_stack_name_the_services_refuse_or_that_differs_only_in_case_gets_a_digest():
    assert stack_token("team.dev") != stack_token("team-dev")
    assert stack_token("Prod") != stack_token("prod") == "prod"
    assert stack_token("team.dev").startswith("team-dev-")


SERVER_IDS = st.from_regex(r"[a-z0-9][a-z0-9-]{0,30}", fullmatch=True)
STACKS = st.from_regex(r"[A-Za-z0-9_.-]{1,100}", fullmatch=True)  # what Pulumi accepts as a stack name
REGIONS = st.sampled_from(sorted(AWS_REGIONS))
# (suffix template, limit): every name the components build.
SUFFIXES = st.sampled_from([
    ("origin-{region}", naming.LAMBDA_FUNCTION), ("edge-router", naming.LAMBDA_FUNCTION),
    ("probe", naming.LAMBDA_FUNCTION), ("probe-consumer", naming.LAMBDA_FUNCTION),
    ("viewer-auth", naming.CLOUDFRONT_FUNCTION), ("region-health", naming.KEY_VALUE_STORE),
    ("mcp-origin-request", naming.ORIGIN_REQUEST_POLICY), ("mcp-response-headers", naming.RESPONSE_HEADERS_POLICY),
    ("probe-quarantine-{region}", naming.SQS_QUEUE),
    ("alerts-{region}", naming.SNS_TOPIC), ("probe-results", naming.DYNAMODB_TABLE),
    ("origin-{region}", naming.SCHEDULE), ("probes", naming.SCHEDULE_GROUP),
    ("probes-{region}-schedules-dropped", naming.ALARM), ("origin-secret", naming.SECRETS_MANAGER_SECRET),
    ("probe-client-secret", naming.SECRETS_MANAGER_SECRET),
])
NAME_CHARACTERS = set("abcdefghijklmnopqrstuvwxyz0123456789-")


@given(SERVER_IDS, STACKS, STACKS, REGIONS, SUFFIXES)
def test_every_name_fits_its_limit_and_two_stacks_never_share_one(server_id, stack_a, stack_b, region, suffix):
    template, limit = suffix
    a = physical_name(server_id, template.format(region=region), limit=limit, stack=stack_a)
    b = physical_name(server_id, template.format(region=region), limit=limit, stack=stack_b)
    assert len(a) <= limit and set(a) <= NAME_CHARACTERS
    assert a.startswith(f"{server_id}-") and a.endswith(template.format(region=region))
    assert (a == b) == (stack_a == stack_b)


def test_client_secrets_two_stacks_create_have_names_of_their_own(tmp_path: Path):
    # Given prod and staging, each creating the probes' client secret from its config
    shutil.copy(PROJECT_ROOT / "Pulumi.prod.yaml", tmp_path / "Pulumi.staging.yaml")
    overrides = {"probeClientSecret": "c" * 40, "probeClientSecretName": None}
    runs = [run_program("prod", config_overrides=overrides),
            run_program("staging", stack_file=tmp_path / "Pulumi.staging.yaml",
                        config_overrides={**overrides, **STAGING_DOMAIN})]
    # Then their client secrets (one per probe region) share no name
    names = [{(s.region, s["name"]) for s in run.of_type("aws:secretsmanager/secret:Secret")} for run in runs]
    assert len(names[0]) == len(names[1]) == len(runs[0].outputs["probeQueues"])
    assert names[0].isdisjoint(names[1])
