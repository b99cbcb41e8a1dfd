"""The construct path: what a TypeScript, Go, C# or YAML program sends the component package.
Raw inputs are checked against the package schema before anything is registered: a key the
schema does not declare, a value of the wrong type or a non-finite number is refused with one
ComponentArgsError naming the input; any JSON value for any input either constructs or is
refused that way, never with another error."""

from __future__ import annotations

import json
import re
from typing import Any

import pulumi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.provider import component_provider, inferred_schema
from components.type_tokens import PACKAGE
from components.validation import ComponentArgsError, schema_input_problems
from tests.harness import ACCOUNT_ID, run_program

HOST = "abc.lambda-url.eu-west-1.on.aws"
AUTH = {"issuer": "https://auth.acme.example", "audience": "https://mcp.acme.example/mcp"}
FUNCTION = f"arn:aws:lambda:eu-west-1:{ACCOUNT_ID}:function:acme-prod-origin"
# An image a pipeline pushed: no package to build, so an origin constructs in milliseconds.
SERVER = {"imageDigest": "sha256:" + "c" * 64}
TOPICS = {r: f"arn:aws:sns:{r}:{ACCOUNT_ID}:acme-alerts-{r}" for r in ("us-east-1", "eu-west-1")}

# Minimal valid camelCase inputs of each component.
MINIMAL: dict[str, dict[str, Any]] = {
    "AlertTopic": {"region": "eu-west-1", "serverId": "acme"},
    "ProbeResults": {"serverId": "acme", "regions": ["eu-west-1"]},
    "McpOrigin": {"region": "eu-west-1", "serverId": "acme", "server": SERVER, "coldStart": "none"},
    "EdgeFirewall": {"serverId": "acme", "mcpPath": "/mcp"},
    "OperationsDashboard": {
        "serverId": "acme", "homeRegion": "eu-west-1", "originFunctionNames": {"eu-west-1": "acme-prod-origin"},
        "distributionId": "E2QWRUHAPOMQZL", "edgeFunctionName": "acme-prod-edge-gate", "alertTopicArns": TOPICS,
        "probeRegions": ["eu-west-1"]},
    "EdgeLayer": {"serverId": "acme", "originHosts": {"eu-west-1": HOST}, "defaultRegion": "eu-west-1",
                  "originFunctionArns": {"eu-west-1": FUNCTION}, "jwksUrl": "https://auth.acme.example/jwks",
                  "auth": AUTH},
    "ProbeFleet": {"region": "eu-west-1", "serverId": "acme", "edgeMcpUrl": "https://mcp.acme.example/mcp",
                   "originUrls": {"eu-west-1": f"https://{HOST}/"}, "originFunctionArns": {"eu-west-1": FUNCTION},
                   "originAliasArns": {"eu-west-1": f"{FUNCTION}:live"}, "tableName": "t",
                   "tableArn": f"arn:aws:dynamodb:eu-west-1:{ACCOUNT_ID}:table/t",
                   "alertTopicArn": TOPICS["eu-west-1"], "alertKeyArn": f"arn:aws:kms:eu-west-1:{ACCOUNT_ID}:key/k",
                   "credentials": {"tokenUrl": "https://auth.acme.example/oauth/token", "clientId": "probe",
                                   "clientSecretName": "probe-secret", "audience": AUTH["audience"]}},
}


def construct(class_name: str, inputs: dict[str, Any]) -> Exception | None:
    """Construct one component through the provider in a fresh program; the error it raised, if any."""
    errors: list[Exception] = []
    provider = component_provider()

    def program() -> None:
        try:
            provider.construct("it", f"{PACKAGE}:index:{class_name}", inputs, None)
        except Exception as error:
            errors.append(error)

    run = run_program("prod", program=program)
    if errors:
        assert not run.resources, "refused after something was registered"
    return errors[0] if errors else None


def test_every_component_constructs_from_its_minimal_inputs():
    assert set(MINIMAL) == {token.rsplit(":", 1)[-1] for token in inferred_schema()["resources"]}
    for class_name, inputs in MINIMAL.items():
        assert construct(class_name, inputs) is None, class_name


@pytest.mark.parametrize(("class_name", "changes", "expected"), [
    # An undeclared key used to be dropped: the origin deployed 1024 MB instead of 4096.
    ("McpOrigin", {"sizing": {"memoryMB": 4096}},
     "sizing.memoryMB is not an input of sizing; did you mean memoryMb?"),
    # A list where an object goes used to read as absent: the defaults deployed.
    ("McpOrigin", {"sizing": [4096]}, "sizing = [4096]: must be an object with memoryMb"),
    ("McpOrigin", {"sizing": {"memoryMb": float("inf")}}, "sizing.memoryMb = inf: must be a whole number"),
    ("McpOrigin", {"lwaLayerVersion": float("nan")}, "lwaLayerVersion = nan: must be a whole number"),
    ("McpOrigin", {"region": ["eu-west-1"]}, "region = ['eu-west-1']: must be a string"),
    ("EdgeLayer", {"originHosts": {"eu-west-1": [HOST]}}, "originHosts['eu-west-1'] = ['abc.lambda-url"),
    ("EdgeLayer", {"auth": {**AUTH, "leeway": 10}}, "auth.leeway is not an input of auth; did you mean"),
    ("EdgeLayer", {"priceClass": {"PriceClass_All": True}}, "priceClass = {'PriceClass_All': True}: must be a string"),
    ("ProbeFleet", {"credentials": "probe-secret"}, "credentials = 'probe-secret': must be an object with audience"),
    ("OperationsDashboard", {"edge5xxRatePercent": float("inf")}, "edge5xxRatePercent = inf: must be a finite number"),
    ("EdgeFirewall", {"toolLimits": {"search": 1.5}}, "toolLimits['search'] = 1.5: must be a whole number"),
    ("AlertTopic", {"serverID": "acme"}, "serverID is not an input; did you mean serverId?"),
])
def test_inputs_the_schema_does_not_allow_are_refused_naming_the_input_before_anything_is_registered(
        class_name, changes, expected):
    error = construct(class_name, {**MINIMAL[class_name], **changes})
    assert isinstance(error, ComponentArgsError), error
    assert f"{class_name} 'it'" in str(error) and expected in str(error)


def test_an_input_that_resolves_at_deployment_is_not_checked_at_construction():
    schema = inferred_schema()
    resource = schema["resources"][f"{PACKAGE}:index:EdgeLayer"]
    inputs = {**MINIMAL["EdgeLayer"], "originHosts": {"eu-west-1": pulumi.Output.from_input(HOST)}}
    assert schema_input_problems(inputs, resource["inputProperties"], resource["requiredInputs"], schema["types"]) == []


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=6,
)


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def named(error: Exception, name: str) -> bool:
    """The error names the input, as the schema spells it or as the component's Python field."""
    text = str(error)
    return name in text or snake(name) in text or (name == "server" and "server." in text)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_json_value_for_any_input_constructs_or_is_refused_naming_that_input(data):
    class_name = data.draw(st.sampled_from(sorted(MINIMAL)), label="component")
    declared = sorted(inferred_schema()["resources"][f"{PACKAGE}:index:{class_name}"]["inputProperties"])
    name = data.draw(st.sampled_from([*declared, "undeclaredInput"]), label="input")
    value = data.draw(JSON, label="value")
    inputs = {**MINIMAL[class_name], name: value}
    json.dumps(inputs)  # what another language can send (NaN and Infinity included)
    error = construct(class_name, inputs)
    if error is None:
        return
    assert isinstance(error, ComponentArgsError), f"{type(error).__name__}: {error}"
    assert named(error, name), str(error)
