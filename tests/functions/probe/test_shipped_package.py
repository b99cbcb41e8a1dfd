"""The probe exactly as the program uploads it: its zip (from the program's resource
inputs under mocks), run in a fresh interpreter with the environment the program sets
(and the role credentials Lambda adds) and the input of one of the program's schedules,
against the official SDK's server behind a loopback Function URL that verifies SigV4
(token from a loopback token endpoint, client secret from moto server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from functions.probe.secrets_manager import Credentials
from tests.functions.probe.conftest import CLIENT_SECRET, FunctionUrl, Loopback, OAuthServer, sdk_server
from tests.functions.results.conftest import MotoServer, extract_function_package, moto_server, run_in_package
from tests.harness import ProgramRun

__all__ = ["moto_server"]  # a fixture this module uses
PROBE_REGION = "eu-west-1"
TARGET_REGION = "ap-southeast-1"
# What Lambda hands the function: its role's session credentials.
ROLE = Credentials("ASIASHIPPEDPROBE", "shipped-probe-secret-key", "shipped-probe-session-token")

SCRIPT = """
import json, pathlib, sys
import probe.handler as h
assert pathlib.Path(h.__file__).is_relative_to(pathlib.Path.cwd()), h.__file__
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "pydantic", "boto3", "botocore", "cryptography"))
event = json.loads(pathlib.Path("event.json").read_text())

class Context:
    def get_remaining_time_in_millis(self): return 30000

result = h.handler(event, Context())
print(json.dumps({"heavyImports": heavy, "result": result}))
"""


def program_environment(prod: ProgramRun) -> dict[str, str]:
    from pulumi.runtime import rpc

    function = next(f for f in prod.of_type("aws:lambda/function:Function")
                    if f.region == PROBE_REGION and "-probe-function" in f.name)
    env = function["environment"]
    assert env.get(rpc._special_sig_key) != rpc._special_secret_sig, "nothing secret in the environment"
    return dict(env["variables"])


def program_event(prod: ProgramRun) -> dict:
    """The event the probe region's rounds workflow invokes the probe with for the target's origin."""
    from components.probe_rounds import run_definition

    machine = next(m for m in prod.of_type("aws:sfn/stateMachine:StateMachine") if m.region == PROBE_REGION)
    return next(dict(i.payload) for i in run_definition(json.loads(machine["definition"]))
                if i.payload["target"] == "origin" and i.payload["targetRegion"] == TARGET_REGION)


@pytest.fixture
def function_url() -> Iterator[tuple[FunctionUrl, Loopback]]:
    """A Function URL in the target's region that takes SigV4 from the probe role only."""
    url = FunctionUrl(sdk_server().streamable_http_app(stateless_http=True), region=TARGET_REGION, credentials=ROLE)
    with Loopback(url) as running:
        yield url, running


def test_shipped_probe_probes_a_program_target(prod: ProgramRun, function_url, oauth: OAuthServer,
                                              moto_server: MotoServer, tmp_path: Path):
    url, running = function_url
    package = extract_function_package(prod, f"probes-{PROBE_REGION}-probe-function", tmp_path / "pkg")
    env = program_environment(prod)
    secrets = moto_server.client("secretsmanager", PROBE_REGION)
    secrets.create_secret(Name=env["CLIENT_SECRET_NAME"], SecretString=json.dumps({"client_secret": CLIENT_SECRET}))
    event = program_event(prod)
    assert event["signed"] is True and event["target"] == "origin"
    # The only change: where the target listens (loopback instead of the Function URL).
    event["endpoint"] = running.url()
    (package / "event.json").write_text(json.dumps(event))
    env.update(TOKEN_URL=oauth.token_url, TOKEN_AUDIENCE=oauth.audience)
    # moto answers the Secrets Manager read with any credentials; the Function URL only the role's.
    aws = {**moto_server.env(PROBE_REGION), "AWS_ACCESS_KEY_ID": ROLE.access_key,
           "AWS_SECRET_ACCESS_KEY": ROLE.secret_key, "AWS_SESSION_TOKEN": str(ROLE.token)}

    out = run_in_package(package, SCRIPT, {**env, **aws})

    assert out["heavyImports"] == [], "importing the shipped probe pulls in no SDK, pydantic, boto3, signer or cryptography"
    result = out["result"]
    assert result["status"] in ("healthy", "degraded") and result["era"] == "modern"
    assert result["probeRegion"] == PROBE_REGION and result["toolCount"] == 3 and len(result["schemaHash"]) == 64
    assert all(problem is None for _, _, problem in url.seen[:-1]), "every request of the exchange was signed"
    assert result["promise"] == {"check": "unsigned", "status": "pass", "httpStatus": 403, "detail": None}
