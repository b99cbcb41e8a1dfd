"""Regional Lambda functions in one place: every function outside us-east-1's Lambda@Edge
(origins, probes, results consumers) gets its own expiring log group, a role only Lambda
may assume, and one policy that starts with writing that log group."""

import json

from hypothesis import given
from hypothesis import strategies as st

from components import regional_function
from components.regional_function import LOG_WRITE_ACTIONS, execution_policy
from tests.harness import ProgramRun

FUNCTION = "aws:lambda/function:Function"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"

arns = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789:/-_*", min_size=1, max_size=40)
statements = st.lists(st.tuples(st.lists(arns, min_size=1, max_size=3), st.lists(arns, min_size=1, max_size=3)),
                      max_size=5)


@given(arns, statements)
def test_the_policy_writes_its_own_log_streams_then_exactly_the_functions_statements(log_group_arn, extra):
    document = json.loads(execution_policy(log_group_arn, extra))
    first, *rest = document["Statement"]
    assert first == {"Effect": "Allow", "Action": list(LOG_WRITE_ACTIONS), "Resource": [f"{log_group_arn}:*"]}
    assert [(s["Action"], s["Resource"]) for s in rest] == [(list(a), list(r)) for a, r in extra]
    assert all(s["Effect"] == "Allow" for s in rest)


def regional_functions(run: ProgramRun) -> list:
    return [f for f in run.of_type(FUNCTION) if f["architectures"] == [regional_function.ARCHITECTURE]]


def test_every_regional_function_has_its_log_group_role_and_policy_in_its_region(prod: ProgramRun):
    functions = regional_functions(prod)
    # one origin per region, a probe and a consumer per probe region
    origins = [f for f in functions if f.name.startswith("acme-mcp-origin-")]
    probes = [f for f in functions if f.name.endswith("-probe-function")]
    consumers = [f for f in functions if f.name.endswith("-consumer-function")]
    assert origins and probes and len(probes) == len(consumers)
    assert len(functions) == len(origins) + len(probes) + len(consumers)
    for function in functions:
        base = function.name.removesuffix("-function")
        (log_group,) = [g for g in prod.of_type("aws:cloudwatch/logGroup:LogGroup") if g.name == f"{base}-logs"]
        assert log_group.region == function.region
        assert log_group["name"] == f"/aws/lambda/{function['name']}" and log_group["retentionInDays"] > 0
        assert function["loggingConfig"]["logGroup"] == log_group["name"]

        (role,) = [r for r in prod.of_type("aws:iam/role:Role") if r["arn"] == function["role"]]
        assert role.name == f"{base}-role"
        (trust,) = json.loads(role["assumeRolePolicy"])["Statement"]
        assert trust["Principal"] == {"Service": "lambda.amazonaws.com"}

        # (a probe's role also has its policy to invoke the origins, origin.invoke_origins_policy)
        (policy,) = [p for p in prod.of_type(ROLE_POLICY) if p["role"] == role.id
                     and not p.name.endswith("-probe-origins")]
        first = json.loads(policy["policy"])["Statement"][0]
        assert first["Action"] == list(LOG_WRITE_ACTIONS) and first["Resource"] == [f"{log_group['arn']}:*"]
        # created after its log group and the permission to write it
        assert {log_group.urn, policy.urn} <= set(function.options["dependencies"])
        assert function["runtime"] == regional_function.RUNTIME or function.get("packageType") == "Image"
