"""The probe exactly as the program uploads it: its zip (from the program's resource
inputs under mocks), run in a fresh interpreter with the environment the program sets
and the input of one of the program's schedules, against the project's origin app on
loopback (token from a loopback token endpoint, client secret from moto server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.demo.demo_server.app import create_app
from examples.demo.demo_server.settings import Settings
from local.plan import secret_name_of
from tests.functions.probe.conftest import CLIENT_SECRET, Loopback, OAuthServer
from tests.functions.results.conftest import MotoServer, extract_function_package, moto_server, run_in_package
from tests.harness import ProgramRun

__all__ = ["moto_server"]  # a fixture this module uses


def stored_origin_secret(prod: ProgramRun, secret_arn: str) -> str:
    """The document the program stores in the secret ``secret_arn`` (components/secrets.py)."""
    (version,) = [v for v in prod.of_type("aws:secretsmanager/secretVersion:SecretVersion")
                  if v["secretId"] == secret_arn]
    value = version.inputs["secretString"]
    return str(value["value"] if isinstance(value, dict) else value)
PROBE_REGION = "eu-west-1"
TARGET_REGION = "ap-southeast-1"

SCRIPT = """
import json, pathlib, sys
import probe.handler as h
assert pathlib.Path(h.__file__).is_relative_to(pathlib.Path.cwd()), h.__file__
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "pydantic", "boto3"))
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
    schedule = next(s for s in prod.of_type("aws:scheduler/schedule:Schedule")
                    if s.region == PROBE_REGION and s["name"] == f"acme-mcp-prod-origin-{TARGET_REGION}")
    return json.loads(schedule["target"]["input"])


@pytest.fixture
def origin(prod: ProgramRun, oauth: OAuthServer) -> Iterator[Loopback]:
    """The origin app configured with the origin secret the program generated and stores."""
    stored = json.loads(stored_origin_secret(prod, program_environment(prod)["ORIGIN_SECRET_ID"]))
    settings = Settings.from_env({
        "AUTH_ISSUER": oauth.issuer, "AUTH_AUDIENCE": oauth.audience, "AUTH_JWKS_URL": oauth.jwks_url,
        "ORIGIN_SECRET": stored["current"], "SERVED_REGION": TARGET_REGION,
    })
    with Loopback(create_app(settings)) as running:
        yield running


def test_shipped_probe_probes_a_program_target(prod: ProgramRun, origin: Loopback, oauth: OAuthServer,
                                              moto_server: MotoServer, tmp_path: Path):
    package = extract_function_package(prod, f"probes-{PROBE_REGION}-probe-function", tmp_path / "pkg")
    env = program_environment(prod)
    secrets = moto_server.client("secretsmanager", PROBE_REGION)
    secrets.create_secret(Name=env["CLIENT_SECRET_NAME"], SecretString=json.dumps({"client_secret": CLIENT_SECRET}))
    # The origin secret as the program stores it in this region (moto makes its own ARN suffix: by name).
    name = secret_name_of(env["ORIGIN_SECRET_ID"])
    secrets.create_secret(Name=name, SecretString=stored_origin_secret(prod, env["ORIGIN_SECRET_ID"]))
    env["ORIGIN_SECRET_ID"] = name
    event = program_event(prod)
    assert event["needsOriginSecret"] is True and event["target"] == "origin"
    # The only change: where the target listens (loopback instead of the Function URL).
    event["endpoint"] = origin.url()
    (package / "event.json").write_text(json.dumps(event))
    env.update(TOKEN_URL=oauth.token_url, TOKEN_AUDIENCE=oauth.audience)

    out = run_in_package(package, SCRIPT, {**env, **moto_server.env(PROBE_REGION)})

    assert out["heavyImports"] == [], "importing the shipped probe must not pull in the SDK, pydantic or boto3"
    result = out["result"]
    assert result["status"] in ("healthy", "degraded") and result["era"] == "modern"
    assert result["servedRegion"] == TARGET_REGION and result["probeRegion"] == PROBE_REGION
    assert result["toolCount"] >= 3 and len(result["schemaHash"]) == 64
