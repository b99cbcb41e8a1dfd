"""The gate's Lambda@Edge package built as the program builds packages
(``components.lambda_package.build_package``: the rendered files, the requirements installed by
pip as manylinux x86_64 wheels for CPython 3.13, bytecode), then run from the extracted zip
in a bare interpreter, as Lambda@Edge runs it."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from components.edge_function import EVENT_LIMITS
from components.lambda_package import PackageSpec, build_package
from edge.gate_package import GATE_HANDLER, edge_gate_package
from tests.edge.gate_harness import CREDENTIALS, DEFAULT_REGION, ORIGINS, TOOLS_CALL, Issuer, settings

pytestmark = pytest.mark.slow

RUN = """
import base64, json, sys, time
sys.path.insert(0, sys.argv[1])
token, body = sys.argv[2], sys.argv[3].encode()
started = time.perf_counter()
import edge_gate.handler as gate
imported = time.perf_counter() - started
event = {"Records": [{"cf": {"request": {
    "method": "POST", "uri": "/mcp", "querystring": "", "clientIp": "203.0.113.1",
    "headers": {"authorization": [{"key": "Authorization", "value": "Bearer " + token}],
                "content-type": [{"key": "Content-Type", "value": "application/json"}],
                "cloudfront-viewer-country": [{"key": "CloudFront-Viewer-Country", "value": "DE"}]},
    "body": {"inputTruncated": False, "action": "read-only", "encoding": "base64",
             "data": base64.b64encode(body).decode()},
    "origin": {"custom": {"customHeaders": {}, "domainName": "x.example.com", "path": "", "port": 443,
                          "protocol": "https", "readTimeout": 30, "keepaliveTimeout": 5,
                          "sslProtocols": ["TLSv1.2"]}}}}}]}
result = gate.handler(event, None)
print(json.dumps({"result": result, "import_s": imported,
                  "modules": sorted({m.split(".")[0] for m in sys.modules})}))
"""


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer.generate()


@pytest.fixture(scope="module")
def package_zip(issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    package = edge_gate_package(ORIGINS, DEFAULT_REGION, gate=settings(issuer.jwks))
    spec = PackageSpec(
        name="edge-gate-test",
        extra_files={name: text.encode() for name, text in package.files.items()},
        requirements=package.requirements,
        architecture="x86_64",
        python_version="3.13",
    )
    return build_package(spec, tmp_path_factory.mktemp("build"))


def test_the_package_holds_the_gate_and_x86_64_wheels_within_the_origin_request_quota(package_zip):
    with zipfile.ZipFile(package_zip) as zf:
        names = zf.namelist()
    assert "geo_router.py" in names and "edge_gate/handler.py" in names and "edge_gate/constants.py" in names
    native = [n for n in names if n.endswith(".so")]
    assert native and all("aarch64" not in n for n in native), native
    assert any(n.startswith("cryptography/hazmat/bindings/_rust") for n in native)
    assert any(n.startswith("_awscrt") for n in native)
    assert not any(n.startswith("botocore/") for n in names)
    assert package_zip.stat().st_size < EVENT_LIMITS["origin-request"].package_bytes


def test_the_package_verifies_and_signs_in_a_bare_interpreter(package_zip, issuer, tmp_path):
    root = tmp_path / "task"
    with zipfile.ZipFile(package_zip) as zf:
        zf.extractall(root)
    token = issuer.token(scope="mcp search:read")
    body = json.dumps(TOOLS_CALL)
    out = subprocess.run([sys.executable, "-I", "-S", "-c", RUN, str(root), token, body],
                         capture_output=True, text=True, timeout=120, env=dict(CREDENTIALS))
    assert out.returncode == 0, out.stderr
    emf_line, report_line = out.stdout.splitlines()
    report = json.loads(report_line)
    request = report["result"]
    emf = json.loads(emf_line)  # the request's metrics record, printed by the shipped gate
    assert emf["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "McpEdge"
    assert (emf["Decision"], emf["gen_ai.tool.name"], emf["mcp.edge.origin_region"]) == (
        "allowed", "search", "eu-west-1")
    assert request["headers"]["traceparent"][0]["value"] == f"00-{emf['trace_id']}-{emf['span_id']}-01"
    assert "status" not in request, request
    assert request["origin"]["custom"]["domainName"] == ORIGINS["eu-west-1"].domain_name
    assert request["headers"]["authorization"][0]["value"].startswith(
        f"AWS4-HMAC-SHA256 Credential={CREDENTIALS['AWS_ACCESS_KEY_ID']}/")
    assert "/eu-west-1/lambda/aws4_request" in request["headers"]["authorization"][0]["value"]
    assert GATE_HANDLER == "edge_gate.handler.handler"
