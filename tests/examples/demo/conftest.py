"""Fixtures for the MCP origin's tests: the app as shipped, a real issuer, a real server.

- ``shipped``: the ``mcp_server`` package extracted from the zip the program uploads
  (the ``code`` input of the us-east-1 origin function under mocks), imported as
  ``mcp_server`` exactly as ``run.sh`` imports it on Lambda. Its dependencies come
  from the local virtualenv (same pinned versions; the zip's wheels are aarch64).
- ``lambda_env``: that function's environment as the program sets it.
- ``issuer``: RSA and EC signing keys, a JWKS served on loopback (counting fetches)
  and a token factory.
- ``origin``: the shipped app under uvicorn on a loopback port (as the Web Adapter
  runs it), configured from ``lambda_env`` with only the JWKS URL pointed at the
  local issuer; requests carry the Function URL's Host.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from pulumi.runtime import rpc

from devkit.jwks import JwksServer, public_jwk
from tests.harness import ProgramRun
from tests.loopback import LoopbackServer

REGION = "us-east-1"
FUNCTION_URL_HOST = "4bq2jzkfx7oyt6lqxs3ysvoc4q0qkhdm.lambda-url.us-east-1.on.aws"


def origin_function(prod: ProgramRun, region: str = REGION):
    return prod.one("aws:lambda/function:Function", region=region, name_contains=f"-origin-{region}")


def program_environment(prod: ProgramRun, region: str = REGION) -> dict[str, str]:
    """The origin function's environment exactly as the program sets it (ORIGIN_SECRET_ID, no value)."""
    env = origin_function(prod, region)["environment"]
    assert not (isinstance(env, dict) and env.get(rpc._special_sig_key) == rpc._special_secret_sig), \
        "nothing secret in the origin's environment"
    return dict(env["variables"])


def stored_origin_secret(prod: ProgramRun, secret_arn: str) -> str:
    """The document the program stores in the secret ``secret_arn`` (components/secrets.py)."""
    (version,) = [v for v in prod.of_type("aws:secretsmanager/secretVersion:SecretVersion")
                  if v["secretId"] == secret_arn]
    value = version.inputs["secretString"]
    return str(value["value"] if isinstance(value, dict) else value)


def function_environment(prod: ProgramRun, region: str = REGION) -> dict[str, str]:
    """What the app's settings see at start-up: the program's environment with the origin
    secret read (origin_secrets.with_origin_secrets) from the secret the program stores, and
    ORIGIN_SECRET_ID then dropped, so an in-process app does not read it again."""
    from functions.mcp_server.origin_secrets import with_origin_secrets

    env = with_origin_secrets(program_environment(prod, region), read=partial(stored_origin_secret, prod))
    env.pop("ORIGIN_SECRET_ID")
    return env


@pytest.fixture(scope="session")
def shipped_zip(prod: ProgramRun) -> Path:
    return Path(origin_function(prod)["code"].path)


@pytest.fixture(scope="session")
def shipped(shipped_zip: Path, tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """``mcp_server.app`` from the zip the program uploads."""
    root = tmp_path_factory.mktemp("shipped")
    with zipfile.ZipFile(shipped_zip) as zf:
        members = [n for n in zf.namelist() if n.startswith("mcp_server/")]
        assert members, "the package has no mcp_server/ folder"
        zf.extractall(root, members)
    for name in [m for m in sys.modules if m == "mcp_server" or m.startswith("mcp_server.")]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    module = importlib.import_module("mcp_server.app")
    assert Path(module.__file__ or "").is_relative_to(root), "imported mcp_server from somewhere else"
    return module


@pytest.fixture(scope="session")
def lambda_env(prod: ProgramRun) -> dict[str, str]:
    return function_environment(prod)


@dataclass
class Issuer:
    """A token issuer with a JWKS on loopback."""

    issuer: str
    audience: str
    rsa_key: rsa.RSAPrivateKey
    ec_key: ec.EllipticCurvePrivateKey
    jwks: JwksServer

    @property
    def jwks_url(self) -> str:
        return self.jwks.url

    @property
    def fetches(self) -> list[float]:
        return self.jwks.fetches

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": self.audience, "sub": "client-1", "client_id": "client-1",
                  "iat": now, "exp": now + 300, "scope": "mcp"}
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def token(self, *, alg: str = "RS256", kid: str | None = None, **overrides: Any) -> str:
        key: Any = self.rsa_key if alg.startswith(("RS", "PS")) else self.ec_key
        kid = kid or ("rsa-1" if alg.startswith(("RS", "PS")) else "ec-1")
        return jwt.encode(self.claims(**overrides), key, algorithm=alg, headers={"kid": kid})

    def add_key(self, kid: str, key: rsa.RSAPrivateKey) -> None:
        self.jwks.add_key(public_jwk(key, kid, "RS256"))


@pytest.fixture(scope="session")
def issuer(lambda_env: dict[str, str]) -> Iterator[Issuer]:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    with JwksServer([public_jwk(rsa_key, "rsa-1", "RS256"), public_jwk(ec_key, "ec-1", "ES256")]) as jwks:
        yield Issuer(lambda_env["AUTH_ISSUER"], lambda_env["AUTH_AUDIENCE"], rsa_key, ec_key, jwks)


class RunningOrigin(LoopbackServer):
    """The app under uvicorn on loopback, addressed with the Function URL's Host."""

    def __init__(self, app: Any, settings: Any):
        super().__init__(app)
        self.settings = settings

    @property
    def mcp_url(self) -> str:
        return self.base_url + self.settings.mcp_path

    @property
    def secret(self) -> str:
        return self.settings.origin_secrets[0]

    def headers(self, token: str | None = None, **extra: str) -> dict[str, str]:
        """What CloudFront sends to the origin: the Function URL host and the secret."""
        headers = {"host": FUNCTION_URL_HOST, self.settings.origin_secret_header: self.secret}
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        headers.update(extra)
        return headers

    def post(self, body: Any, *, headers: dict[str, str], path: str | None = None) -> httpx.Response:
        base = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        return httpx.post(self.base_url + (path or self.settings.mcp_path), json=body,
                          headers={**base, **headers}, timeout=30)


def rpc_message(response: httpx.Response) -> Any:
    """The JSON-RPC answer of a POST, whether plain JSON or an SSE stream (whose last
    ``data:`` line is the answer; keep-alive comments carry none)."""
    if not response.headers.get("content-type", "").startswith("text/event-stream"):
        return response.json()
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1])


def settings_for(shipped: ModuleType, env: dict[str, str], **overrides: str) -> Any:
    settings_module = importlib.import_module("mcp_server.settings")
    return settings_module.Settings.from_env({**env, **overrides})


@pytest.fixture(scope="module")
def origin(shipped: ModuleType, lambda_env: dict[str, str], issuer: Issuer) -> Iterator[RunningOrigin]:
    settings = settings_for(shipped, lambda_env, AUTH_JWKS_URL=issuer.jwks_url)
    with RunningOrigin(shipped.create_app(settings), settings) as running:
        yield running


INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
DISCOVER = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}
MODERN_HEADERS = {"mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover"}


RUN_LOG = "run.log"


@contextmanager
def running_run_sh(package: zipfile.ZipFile, env: dict[str, str], tmp_path: Path) -> Iterator[tuple[str, httpx.Response]]:
    """What the Web Adapter does with a shipped zip: exec its run.sh (the app's own files;
    the dependencies come from this machine's virtualenv, the zip's wheels being for
    aarch64) and poll the readiness path. Yields the base URL and the readiness answer;
    the function's output is in ``tmp_path / RUN_LOG``."""
    task_root = tmp_path / "task"
    package.extractall(task_root, [n for n in package.namelist() if n.startswith("mcp_server/") or n == "run.sh"])
    (task_root / "run.sh").chmod(0o755)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**env, "LAMBDA_TASK_ROOT": str(task_root), "AWS_LWA_PORT": str(port),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    log = tmp_path / RUN_LOG  # the function's output (its log lines), read by tests once it stopped
    with log.open("w") as output:
        process = subprocess.Popen([str(task_root / "run.sh")], env=env, cwd=tmp_path,
                                   stdout=output, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, f"run.sh exited: {log.read_text()}"
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}{env['AWS_LWA_READINESS_CHECK_PATH']}", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the readiness path never answered"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", ready
    finally:
        process.terminate()
        process.wait(timeout=10)
