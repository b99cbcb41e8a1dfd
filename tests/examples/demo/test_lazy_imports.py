"""What PyJWT imports but the origin never uses is loaded on first use (``lazy_imports``),
from the shipped package, each case in a fresh interpreter (the only place an import's
timing and laziness can be seen): the origin starts, warms up and verifies real tokens
without loading ``cryptography.x509``, and whatever reads a certificate later, PyJWT
included, gets the real module."""

from __future__ import annotations

import base64
import datetime
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from tests.functions.mcp_server.conftest import FUNCTION_URL_HOST, Issuer
from tests.functions.mcp_server.test_server import TOOLS_LIST, TOOLS_LIST_HEADERS

DEFERRED = "cryptography.x509"
# A module only the deferred module's body imports: in sys.modules once it ran.
LOADED_MARK = "cryptography.x509.name"

SERVE_AND_VERIFY = """
import asyncio, json, os, sys
import httpx
import mcp_server.app as origin
from mcp_server.settings import Settings

async def main():
    settings = Settings.from_env(os.environ)
    app = origin.create_app(settings)
    async with app.router.lifespan_context(app):  # the warm-up, as before uvicorn listens
        assert app.state.warm_up_problems == [], app.state.warm_up_problems
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://origin") as client:
            statuses = []
            for token in json.loads(os.environ["TEST_TOKENS"]):
                headers = {"host": os.environ["TEST_HOST"], settings.origin_secret_header: settings.origin_secrets[0],
                           "authorization": f"Bearer {token}", "content-type": "application/json",
                           "accept": "application/json, text/event-stream", **json.loads(os.environ["TEST_HEADERS"])}
                response = await client.post(settings.mcp_path, json=json.loads(os.environ["TEST_BODY"]), headers=headers)
                statuses.append(response.status_code)
    print(json.dumps({"statuses": statuses, "loaded": os.environ["TEST_MARK"] in sys.modules}))

asyncio.run(main())
"""

CERTIFICATE_THROUGH_PYJWT = """
import base64, json, os, sys
import mcp_server.lazy_imports
import jwt
from jwt.algorithms import HMACAlgorithm
before = os.environ["TEST_MARK"] in sys.modules
# PyJWT's own use of x509: refusing a certificate (DER) as an HMAC secret, which only a
# working x509 module can tell from random bytes.
try:
    HMACAlgorithm(HMACAlgorithm.SHA256).prepare_key(base64.b64decode(os.environ["TEST_CERTIFICATE_DER"]))
    refused = None
except jwt.InvalidKeyError as exc:
    refused = str(exc)
print(json.dumps({"before": before, "after": os.environ["TEST_MARK"] in sys.modules, "refused": refused}))
"""


@pytest.fixture(scope="module")
def package_root(shipped_zip: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lazy-imports")
    with zipfile.ZipFile(shipped_zip) as zf:
        zf.extractall(root, [n for n in zf.namelist() if n.startswith("mcp_server/")])
    return root


def run_fresh(root: Path, script: str, **env: str) -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(root), "TEST_MARK": LOADED_MARK, **env})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_origin_starts_warms_up_and_verifies_real_tokens_without_loading_x509(
        package_root: Path, lambda_env: dict[str, str], issuer: Issuer):
    # Given the shipped origin in a fresh interpreter, with a real key set
    env = {**lambda_env, "AUTH_JWKS_URL": issuer.jwks_url}
    # When it starts, warms up and serves tools/list to an RS256 and an ES256 token
    out = run_fresh(package_root, SERVE_AND_VERIFY, **env, TEST_HOST=FUNCTION_URL_HOST,
                    TEST_TOKENS=json.dumps([issuer.token(), issuer.token(alg="ES256"), "not-a-token"]),
                    TEST_HEADERS=json.dumps(TOOLS_LIST_HEADERS), TEST_BODY=json.dumps(TOOLS_LIST))
    # Then both are verified and answered, the bad one refused, and x509 never ran
    assert out == {"statuses": [200, 200, 401], "loaded": False}


def test_a_certificate_read_through_pyjwt_loads_the_real_module_on_first_use(package_root: Path):
    # Given a self-signed certificate
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lazy-imports")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
                   .sign(key, hashes.SHA256()))
    der = base64.b64encode(certificate.public_bytes(serialization.Encoding.DER)).decode()
    # When PyJWT, with x509 deferred, is given it as an HMAC secret
    out = run_fresh(package_root, CERTIFICATE_THROUGH_PYJWT, TEST_CERTIFICATE_DER=der)
    # Then the module was not loaded before, that use loads it, and PyJWT recognises the certificate
    assert out["before"] is False and out["after"] is True
    assert out["refused"] is not None and "x509 certificate" in out["refused"]


def test_a_module_imported_already_or_unknown_is_left_as_it_is(package_root: Path):
    script = """
import json, sys
import cryptography.x509
real = sys.modules["cryptography.x509"]
import mcp_server.lazy_imports as lazy
print(json.dumps({"again": lazy.defer("cryptography.x509"), "same": sys.modules["cryptography.x509"] is real,
                  "unknown": lazy.defer("no_such_package_anywhere.sub"), "listed": list(lazy.DEFERRED)}))
"""
    out = run_fresh(package_root, script)
    assert out == {"again": False, "same": True, "unknown": False, "listed": [DEFERRED]}
