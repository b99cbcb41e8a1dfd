"""Lambda@Edge rules in one place: components/edge_function.py creates the router by them,
the contract checks import them, and edge/ (renderers and runtime code) never imports
back into components/."""

import ast

import pytest

import review.contracts.edge as contracts
from components import edge_function
from components.edge_function import EVENT_LIMITS, check_edge_function, replica_logs_policy
from stack_config.loading import PROJECT_ROOT
from tests.harness import ProgramRun


def test_edge_code_does_not_import_components():
    for path in sorted((PROJECT_ROOT / "edge").glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert not {m for m in imported if m.split(".")[0] == "components"}, path.name


def test_the_contract_checks_use_the_same_rules():
    for name in ("EDGE_REGION", "ARCHITECTURE", "RUNTIME_PATTERN", "TRUSTED_SERVICES", "EVENT_LIMITS",
                 "MAX_EPHEMERAL_STORAGE_MB"):
        assert getattr(contracts, name) is getattr(edge_function, name), name


def test_the_router_follows_every_rule(prod: ProgramRun):
    (router,) = [f for f in prod.of_type("aws:lambda/function:Function") if f.region == edge_function.EDGE_REGION
                 and f["architectures"] == [edge_function.ARCHITECTURE]]
    assert router["publish"] is True and router.options.get("retainOnDelete") in (None, False)
    assert router["skipDestroy"] is True and not router.get("environment") and not router.get("layers")
    limits = EVENT_LIMITS["origin-request"]
    assert router["timeout"] <= limits.timeout_s and router["memorySize"] <= limits.memory_mb
    assert edge_function.RUNTIME_PATTERN.fullmatch(router["runtime"])


@pytest.mark.parametrize(("kw", "message"), [
    ({"runtime": "java21"}, "runtime 'java21' is not a Python 3 or Node.js managed runtime"),
    ({"timeout_s": 6, "event_type": "viewer-request"}, "timeout 6 s is outside 1-5 s (viewer-request)"),
    ({"memory_mb": 20000}, "memory 20000 MB is outside 128-10240 MB (origin-request)"),
    ({"event_type": "origin-whatever"}, "event type 'origin-whatever' is none of"),
])
def test_a_function_lambda_at_edge_would_refuse_is_refused_by_name(kw, message):
    args = {"runtime": "python3.13", "event_type": "origin-request", "memory_mb": 128, "timeout_s": 5, **kw}
    with pytest.raises(ValueError, match="Lambda@Edge function r: ") as error:
        check_edge_function("r", **args)
    assert message in str(error.value)


def test_replica_logs_may_be_written_in_every_region_under_the_replica_name():
    import json

    (statement,) = json.loads(replica_logs_policy("123456789012", "r"))["Statement"]
    assert "arn:aws:logs:*:123456789012:log-group:/aws/lambda/us-east-1.r:*" in statement["Resource"]
