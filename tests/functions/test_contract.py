"""The contract between the program and its functions (functions/contract.py) is written
once, standard library only, shipped inside every function package, and it is what the
program sets: environment variable names, probe event keys, table keys, headers."""

import ast
import json
import zipfile
from pathlib import Path

import pytest

from functions import contract
from stack_config.loading import PROJECT_ROOT
from tests.harness import ProgramRun

CONTRACT = PROJECT_ROOT / "functions" / "contract.py"
# Our own functions' packages (the origin runs the stack's server, which knows no contract of ours).
PACKAGES = {"probe": "probe.handler.handler", "results": "results.handler.handler"}
ORIGIN_HANDLER = "run.sh"
# Variables set for the runtime's own components, not read by our code.
RUNTIME_VARIABLES = {"AWS_LAMBDA_EXEC_WRAPPER", "AWS_LWA_INVOKE_MODE", "AWS_LWA_PORT", "AWS_LWA_READINESS_CHECK_PATH",
                     "POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_LOG_LEVEL"}


def names_of(cls: type) -> set[str]:
    return {v for k, v in vars(cls).items() if not k.startswith("_")}


def test_the_contract_imports_nothing():
    tree = ast.parse(CONTRACT.read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_every_function_package_has_the_one_contract(package: str):
    own = PROJECT_ROOT / "functions" / package / "contract.py"
    assert own.resolve() == CONTRACT.resolve(), f"{own} must link to functions/contract.py, not copy it"


def _environment(fn) -> dict[str, str]:
    env = fn["environment"]
    env = env.get("value", env) if isinstance(env, dict) else env
    return env["variables"]


def test_the_program_sets_exactly_the_contract_variables_of_each_function(prod: ProgramRun):
    expected = {ORIGIN_HANDLER: names_of(contract.OriginEnv),
                PACKAGES["probe"]: names_of(contract.ProbeEnv), PACKAGES["results"]: names_of(contract.ConsumerEnv)}
    functions = [f for f in prod.of_type("aws:lambda/function:Function") if f["handler"] in expected]
    assert {f["handler"] for f in functions} == set(expected)
    for fn in functions:
        assert set(_environment(fn)) - RUNTIME_VARIABLES == expected[fn["handler"]], fn.name


def test_every_probe_invocation_of_the_rounds_workflows_has_the_contract_event_keys(prod: ProgramRun):
    from components.probe_rounds import run_definition

    machines = prod.of_type("aws:sfn/stateMachine:StateMachine")
    assert machines, "every probe region runs its rounds workflow"
    for machine in machines:
        invocations = run_definition(json.loads(machine["definition"]))
        assert invocations, machine.name
        for invocation in invocations:
            event = dict(invocation.payload)
            assert set(event) == names_of(contract.ProbeEvent) and event["target"] in contract.TARGET_KINDS


def test_the_results_table_has_the_contract_keys(prod: ProgramRun):
    table = prod.one("aws:dynamodb/table:Table")
    assert (table["hashKey"], table["rangeKey"], table["ttl"]["attributeName"]) == (
        contract.TABLE_HASH_KEY, contract.TABLE_RANGE_KEY, contract.TABLE_TTL_ATTRIBUTE)


def test_every_shipped_package_holds_the_contract_as_its_own_module(prod: ProgramRun):
    shipped = {}
    for fn in prod.of_type("aws:lambda/function:Function"):
        for package, handler in PACKAGES.items():
            if fn["handler"] == handler:
                shipped[package] = Path(fn["code"].path)
    assert set(shipped) == set(PACKAGES)
    for package, path in shipped.items():
        with zipfile.ZipFile(path) as zf:
            assert zf.read(f"{package}/contract.py") == CONTRACT.read_bytes(), package


def test_the_consumer_and_the_edge_share_the_contract_region_health_key():
    from functions.results import health

    assert (health.REGION_HEALTH_KEY, health.REGION_HEALTH_VERSION) == (
        contract.REGION_HEALTH_KEY, contract.REGION_HEALTH_VERSION)


def test_the_function_url_and_the_origin_app_answer_cors_with_the_contract_policy(prod: ProgramRun):
    """One CORS policy: what the Function URL is configured with is what the app answers."""
    import asyncio

    import httpx

    from examples.demo.demo_server.app import create_app
    from examples.demo.demo_server.settings import Settings

    for url in prod.of_type("aws:lambda/functionUrl:FunctionUrl"):
        cors = url["cors"]
        assert (tuple(cors["allowMethods"]), tuple(cors["allowHeaders"]), cors["maxAge"]) == (
            contract.CORS_ALLOW_METHODS, contract.CORS_ALLOW_HEADERS, contract.CORS_MAX_AGE_S)
        assert tuple(cors["exposeHeaders"]) == contract.CORS_EXPOSE_HEADERS

    app = create_app(Settings.from_env({
        "AUTH_ISSUER": "https://auth.acme.example", "AUTH_AUDIENCE": "https://mcp.acme.example/mcp",
        "AUTH_JWKS_URL": "https://auth.acme.example/jwks", "ORIGIN_SECRET": "s" * 40}))

    async def preflight() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client:
            return await client.options("/mcp", headers={
                "origin": "https://app.example", "access-control-request-method": "POST",
                "access-control-request-headers": ", ".join(contract.CORS_ALLOW_HEADERS)})

    response = asyncio.run(preflight())
    assert response.status_code == 200
    methods = {m.strip() for m in response.headers["access-control-allow-methods"].split(",")}
    assert methods == set(contract.CORS_ALLOW_METHODS)
    assert response.headers["access-control-max-age"] == str(contract.CORS_MAX_AGE_S)
