"""Benchmark: the guarded origin-request function (router + token verification + scopes
+ SigV4) against today's geo-router alone, both as shipped packages, in the same run.

    .venv/bin/python -m bench.edge_gate_bench [--quick] [--json]

Both packages are built as the program builds Lambda packages
(``components.lambda_package.build_package``: deterministic zip, manylinux x86_64 wheels for
CPython 3.13, bytecode), from the same origins (three regions), then extracted and run in
fresh bare interpreters (``python -I -S``), the way Lambda@Edge imports ``/var/task``:

- cold import: ``import edge_gate.handler`` (which imports ``geo_router``, PyJWT,
  cryptography, awscrt and builds the embedded key set) against ``import geo_router``,
  and against the floor's own cold import (the libraries the floor below needs, imported
  alone from the gate's package: ``base64``, ``hashlib``, ``json``, ``jwt``,
  ``awscrt.auth``, ``awscrt.http``), timed inside each fresh process; rounds alternate
  the order, the figure is the median of the rounds' ratios (``bench.ratios``);
- per request: the handler on an origin-request event, a viewer in DE, with a real RS256
  access token (2048-bit key, ordinary claims) and a real ``tools/call`` body (include-body,
  base64), scoped so that the call is allowed, forwarded and signed; the event is rebuilt
  for each call from its JSON (as Lambda hands each invocation a fresh one) in both
  loops, so that cost is in both figures. Time per call of a loop, median of repetitions
  per round, rounds alternating; the router alone gets the same event;
- the floor: the work no gate can skip, written as directly as the libraries allow (parse
  the event, decode the body, ``jwt.decode`` with the key already parsed, hash the body,
  sign with awscrt), in the gate's own package, on the same event; the gate against it is
  what the gate's own code (routing, header rules, scope checks, telemetry) costs on top.
  The gate remembers verified tokens until their ``exp`` (``tokens.VerifiedTokenCache``), so
  the same token again is a cache hit, as a client's next calls are; the gate is also timed
  with its cache emptied before every call (every token new to it: a client's first call),
  against the same floor, which verifies every time;
- the signer candidates: awscrt's ``aws_sign_request`` against botocore's ``SigV4Auth``,
  each from a package holding only it, import and per-signature, same inputs;
- package sizes (compressed) against Lambda@Edge's 50 MB origin-request limit.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from bench.ratios import median_of_round_ratios
from components.lambda_package import PackageSpec, build_package
from devkit.jwks import public_jwk
from edge.gate_package import GateSettings, edge_gate_package
from edge.router import OriginTarget, render_router

LAMBDA_EDGE_ORIGIN_REQUEST_LIMIT = 50 * 1024 * 1024
# The goals, as ratios of one run: the gate's request against the floor's, and its
# cold import against the floor's libraries imported alone.
PER_REQUEST_GOAL_VS_FLOOR = 1.5
COLD_IMPORT_GOAL_VS_FLOOR = 1.2
ORIGINS = {
    "us-east-1": OriginTarget("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.lambda-url.us-east-1.on.aws"),
    "eu-west-1": OriginTarget("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.lambda-url.eu-west-1.on.aws"),
    "ap-northeast-1": OriginTarget("cccccccccccccccccccccccccccccccc.lambda-url.ap-northeast-1.on.aws"),
}
ISSUER = "https://auth.acme.example/realms/mcp"
AUDIENCE = "https://mcp.acme.example/mcp"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "ASIAQNZGKEDGEBENCH01",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYBENCHMARKKEY",
    # A session token is ~1 KB on Lambda; its length is signed and sent on every request.
    "AWS_SESSION_TOKEN": "IQoJb3JpZ2luX2VjE" + "A" * 1000,
}
TOOLS_CALL = {
    "jsonrpc": "2.0", "id": 42, "method": "tools/call",
    "params": {"name": "search_tickets", "arguments": {
        "query": "checkout latency regression after the 2026-11 release", "status": ["open", "triaged"],
        "assignee": "platform-oncall", "limit": 25, "include_comments": True},
        "_meta": {"progressToken": "b7c1f7b2-5c33-4a4e-9a61-0f5f1d8c2e9a"}},
}
SIGNER_REQUIREMENTS = {
    "awscrt": "awscrt==0.38.0\n",
    "botocore": "botocore==1.44.8\njmespath==1.1.0\npython-dateutil==2.9.0.post0\nsix==1.17.0\nurllib3==2.8.0\n",
}
SIGNER_IMPORTS = {
    "awscrt": "import awscrt.auth, awscrt.http",
    "botocore": "import botocore.auth, botocore.awsrequest, botocore.credentials",
}

COLD_IMPORT = """
import sys, time
sys.path.insert(0, sys.argv[1])
started = time.perf_counter()
{statement}
print((time.perf_counter() - started) * 1000)
"""

PER_REQUEST = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import importlib
module = importlib.import_module(sys.argv[2])
event_json, calls, repeats = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
handler = module.handler
first = handler(json.loads(event_json), None)
assert "status" not in first, first  # forwarded, not refused
if sys.argv[6:] == ["cold-tokens"]:  # every call a token the gate has not verified before
    forget = module.VERIFIER.clear
    def call():
        forget()
        handler(json.loads(event_json), None)
else:
    def call():
        handler(json.loads(event_json), None)
times = []
for _ in range(repeats):
    started = time.perf_counter()
    for _ in range(calls):
        call()
    times.append((time.perf_counter() - started) / calls * 1e6)
print(json.dumps(times))
"""
FLOOR_IMPORTS = "import base64, hashlib, json, jwt, awscrt.auth, awscrt.http"

FLOOR_LOOP = """
import base64, hashlib, json, os, sys, time
sys.path.insert(0, sys.argv[1])
import jwt
from awscrt.auth import (AwsCredentialsProvider, AwsSignedBodyHeaderType, AwsSigningAlgorithm,
                         AwsSigningConfig, aws_sign_request)
from awscrt.http import HttpHeaders, HttpRequest
event_json, calls, repeats = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
jwks, issuer, audience = json.loads(sys.argv[5]), sys.argv[6], sys.argv[7]
key = jwt.PyJWK(jwks["keys"][0]).key
provider = AwsCredentialsProvider.new_static(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"],
                                             os.environ["AWS_SESSION_TOKEN"])
host = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.lambda-url.eu-west-1.on.aws"
def floor():
    request = json.loads(event_json)["Records"][0]["cf"]["request"]
    body = base64.b64decode(request["body"]["data"])
    json.loads(body)["params"]["name"]
    token = request["headers"]["authorization"][0]["value"].split(" ", 1)[1]
    jwt.decode(token, key, algorithms=["RS256"], audience=audience, issuer=issuer)
    config = AwsSigningConfig(algorithm=AwsSigningAlgorithm.V4, credentials_provider=provider,
                              region="eu-west-1", service="lambda",
                              signed_body_value=hashlib.sha256(body).hexdigest(),
                              signed_body_header_type=AwsSignedBodyHeaderType.X_AMZ_CONTENT_SHA_256)
    return aws_sign_request(HttpRequest("POST", "/mcp", HttpHeaders([("host", host)])), config).result(5)
floor()
times = []
for _ in range(repeats):
    started = time.perf_counter()
    for _ in range(calls):
        floor()
    times.append((time.perf_counter() - started) / calls * 1e6)
print(json.dumps(times))
"""

SIGN_LOOP = """
import hashlib, json, os, sys, time
sys.path.insert(0, sys.argv[1])
which, calls, repeats = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
body = sys.argv[5].encode()
host = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.lambda-url.eu-west-1.on.aws"
creds = (os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"], os.environ["AWS_SESSION_TOKEN"])
if which == "botocore":
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    credentials = Credentials(*creds)
    def sign():
        request = AWSRequest(method="POST", url=f"https://{host}/mcp",
                             headers={"host": host, "x-amz-content-sha256": hashlib.sha256(body).hexdigest()})
        SigV4Auth(credentials, "lambda", "eu-west-1").add_auth(request)
        return request.headers["Authorization"]
else:
    from awscrt.auth import (AwsCredentialsProvider, AwsSignedBodyHeaderType, AwsSigningAlgorithm,
                             AwsSigningConfig, aws_sign_request)
    from awscrt.http import HttpHeaders, HttpRequest
    provider = AwsCredentialsProvider.new_static(*creds)
    def sign():
        config = AwsSigningConfig(algorithm=AwsSigningAlgorithm.V4, credentials_provider=provider,
                                  region="eu-west-1", service="lambda",
                                  signed_body_value=hashlib.sha256(body).hexdigest(),
                                  signed_body_header_type=AwsSignedBodyHeaderType.X_AMZ_CONTENT_SHA_256)
        request = aws_sign_request(HttpRequest("POST", "/mcp", HttpHeaders([("host", host)])), config).result(5)
        return request.headers.get("Authorization")
sign()
times = []
for _ in range(repeats):
    started = time.perf_counter()
    for _ in range(calls):
        sign()
    times.append((time.perf_counter() - started) / calls * 1e6)
print(json.dumps(times))
"""


def _python(script: str, *args: str) -> str:
    env = {**CREDENTIALS, "PATH": os.environ.get("PATH", "")}
    out = subprocess.run([sys.executable, "-I", "-S", "-c", script, *args], capture_output=True, text=True,
                         env=env, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark process failed:\n{out.stderr.strip()}")
    # The gate writes its EMF record per request to stdout, as on Lambda (that cost is in the
    # figure); the measurement is the last line.
    return out.stdout.strip().splitlines()[-1]


def _extract(zip_path: Path, root: Path) -> Path:
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root)
    return root


def real_token() -> tuple[str, dict[str, Any]]:
    """An RS256 access token as an issuer makes one, and the key set that verifies it."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    claims = {
        "iss": ISSUER, "sub": "f3b9c2d4-7a1e-4c5b-9d2f-8e6a1b3c5d7f", "aud": [AUDIENCE, "account"],
        "exp": now + 3600, "iat": now, "auth_time": now - 30, "jti": "onrtac:9a8b7c6d-5e4f-3a2b-1c0d-e9f8a7b6c5d4",
        "client_id": "mcp-inspector-2f7c", "azp": "mcp-inspector-2f7c", "typ": "Bearer",
        "scope": "openid profile email mcp tickets:read", "sid": "1b2c3d4e-5f6a-7b8c-9d0e-1f2a3b4c5d6e",
        "preferred_username": "platform.engineer@acme.example",
    }
    token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "2026-11-rotation-1", "typ": "at+jwt"})
    return token, {"keys": [public_jwk(key, "2026-11-rotation-1", "RS256")]}


def gate_settings(jwks: dict[str, Any]) -> GateSettings:
    return GateSettings(issuer=ISSUER, audiences=(AUDIENCE,), jwks_url=f"{ISSUER}/protocol/openid-connect/certs",
                        jwks=jwks, resource=AUDIENCE, authorization_servers=(ISSUER,), algorithms=("RS256", "ES256"),
                        base_scopes=("mcp",), tool_scopes={"search_tickets": ("tickets:read",),
                                                           "close_ticket": ("tickets:write",)})


def origin_request_event(token: str, body: bytes) -> dict[str, Any]:
    import base64

    headers = {"Host": "mcp.acme.example", "Authorization": f"Bearer {token}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25",
               "CloudFront-Viewer-Country": "DE", "User-Agent": "mcp-client/1.0"}
    return {"Records": [{"cf": {"config": {"eventType": "origin-request"}, "request": {
        "clientIp": "203.0.113.178", "method": "POST", "uri": "/mcp", "querystring": "",
        "headers": {name.lower(): [{"key": name, "value": value}] for name, value in headers.items()},
        "body": {"inputTruncated": False, "action": "read-only", "encoding": "base64",
                 "data": base64.b64encode(body).decode()},
        "origin": {"custom": {"customHeaders": {}, "domainName": "placeholder.example.com", "path": "", "port": 443,
                              "protocol": "https", "readTimeout": 30, "keepaliveTimeout": 5,
                              "sslProtocols": ["TLSv1.2"]}}}}}]}


def build(tmp: Path, token_jwks: dict[str, Any]) -> dict[str, Path]:
    """The packages, built (or reused from ``.build/packages``), as zips."""
    gate = edge_gate_package(ORIGINS, "us-east-1", gate=gate_settings(token_jwks))
    zips = {
        "gate": build_package(PackageSpec(name="bench-edge-gate", architecture="x86_64",
                                          extra_files={n: t.encode() for n, t in gate.files.items()},
                                          requirements=gate.requirements)),
        "router": build_package(PackageSpec(name="bench-edge-router", architecture="x86_64", extra_files={
            "geo_router.py": render_router(ORIGINS, "us-east-1").encode()})),
    }
    for signer, requirements in SIGNER_REQUIREMENTS.items():
        path = tmp / f"{signer}-requirements.txt"
        path.write_text(requirements)
        zips[signer] = build_package(PackageSpec(name=f"bench-signer-{signer}", architecture="x86_64",
                                                 requirements=path))
    return zips


def run(quick: bool = False) -> dict[str, Any]:
    rounds, calls, repeats = (3, 100, 3) if quick else (7, 400, 5)
    token, token_jwks = real_token()
    body = json.dumps(TOOLS_CALL).encode()
    event_json = json.dumps(origin_request_event(token, body))
    with tempfile.TemporaryDirectory(prefix="edge-gate-bench-") as tmp_name:
        tmp = Path(tmp_name)
        zips = build(tmp, token_jwks)
        roots = {name: _extract(path, tmp / name) for name, path in zips.items()}
        roots["floor"] = roots["gate"]  # the floor runs from the gate's package
        imports: dict[str, list[float]] = {name: [] for name in roots}
        per_request: dict[str, list[float]] = {"gate": [], "gate_cold_tokens": [], "router": [], "floor": []}
        signing: dict[str, list[float]] = {"awscrt": [], "botocore": []}
        statements = {"gate": "import edge_gate.handler", "router": "import geo_router", "floor": FLOOR_IMPORTS,
                      **SIGNER_IMPORTS}
        for n in range(rounds):
            order = list(roots) if n % 2 == 0 else list(reversed(roots))
            for name in order:
                imports[name].append(float(_python(COLD_IMPORT.format(statement=statements[name]), str(roots[name]))))
            runs = ("gate", "gate_cold_tokens", "router")
            for name in (runs if n % 2 == 0 else tuple(reversed(runs))):
                module = "geo_router" if name == "router" else "edge_gate.handler"
                extra = ["cold-tokens"] if name == "gate_cold_tokens" else []
                times = json.loads(_python(PER_REQUEST, str(roots["router" if name == "router" else "gate"]), module,
                                           event_json, str(calls), str(repeats), *extra))
                per_request[name].append(statistics.median(times))
            times = json.loads(_python(FLOOR_LOOP, str(roots["gate"]), event_json, str(calls), str(repeats),
                                       json.dumps(token_jwks), ISSUER, AUDIENCE))
            per_request["floor"].append(statistics.median(times))
            for signer in (("awscrt", "botocore") if n % 2 == 0 else ("botocore", "awscrt")):
                times = json.loads(_python(SIGN_LOOP, str(roots[signer]), signer, str(calls), str(repeats),
                                           body.decode()))
                signing[signer].append(statistics.median(times))
        sizes = {name: path.stat().st_size for name, path in zips.items()}
    result = {
        "token_chars": len(token), "body_bytes": len(body), "rounds": rounds,
        "cold_import_ms": {k: statistics.median(v) for k, v in imports.items()},
        "cold_import_ratio_gate_vs_router": median_of_round_ratios(imports["gate"], imports["router"]),
        "cold_import_ratio_gate_vs_floor": median_of_round_ratios(imports["gate"], imports["floor"]),
        "per_request_us": {k: statistics.median(v) for k, v in per_request.items()},
        "per_request_ratio_gate_vs_router": median_of_round_ratios(per_request["gate"], per_request["router"]),
        "per_request_ratio_gate_vs_floor": median_of_round_ratios(per_request["gate"], per_request["floor"]),
        "per_request_ratio_gate_cold_tokens_vs_floor": median_of_round_ratios(per_request["gate_cold_tokens"],
                                                                              per_request["floor"]),
        "signer_import_ratio_botocore_vs_awscrt": median_of_round_ratios(imports["botocore"], imports["awscrt"]),
        "signer_us": {k: statistics.median(v) for k, v in signing.items()},
        "signer_ratio_botocore_vs_awscrt": median_of_round_ratios(signing["botocore"], signing["awscrt"]),
        "package_bytes": sizes,
    }
    result["title"] = "Edge gate: token verification, scopes and SigV4 at the origin-request function"
    result["markdown"] = markdown(result)
    result["goals"] = goals(result)
    return result


def goals(r: dict[str, Any]) -> list[dict[str, Any]]:
    """The gate's goals, for the report's goals table."""
    per_request, cold_tokens = r["per_request_ratio_gate_vs_floor"], r["per_request_ratio_gate_cold_tokens_vs_floor"]
    cold_import = r["cold_import_ratio_gate_vs_floor"]
    return [
        {"goal": f"edge gate per request <= {PER_REQUEST_GOAL_VS_FLOOR}x its verify-and-sign floor (the same token "
                 "again, as a client's next calls)",
         "measured": f"{per_request:.2f}x", "met": per_request <= PER_REQUEST_GOAL_VS_FLOOR,
         "note": f"every token new to the gate's cache (a client's first call): {cold_tokens:.2f}x"
                 + ("" if cold_tokens <= PER_REQUEST_GOAL_VS_FLOOR else
                    ", over: verification costs what the floor's does, and the gate's own steps (its EMF record, "
                    "the strict parse, routing, the identity headers) cost about as much again")},
        {"goal": f"edge gate cold import <= {COLD_IMPORT_GOAL_VS_FLOOR}x the floor's libraries imported alone",
         "measured": f"{cold_import:.2f}x", "met": cold_import <= COLD_IMPORT_GOAL_VS_FLOOR, "note": ""},
    ]


def markdown(r: dict[str, Any]) -> str:
    imp, req, size, sig = r["cold_import_ms"], r["per_request_us"], r["package_bytes"], r["signer_us"]
    mb = 1024 * 1024
    return "\n".join([
        f"## {r['title']}",
        "",
        f"Shipped packages (x86_64, CPython 3.13) in bare interpreters; {r['rounds']} alternating rounds, "
        f"ratios are medians of the rounds' ratios. Token {r['token_chars']} characters (RS256, 2048-bit), "
        f"tools/call body {r['body_bytes']} bytes.",
        "",
        "| measure | gate (router + verify + scopes + SigV4) | router alone | ratio |",
        "|---|---|---|---|",
        f"| per request | {req['gate']:.1f} us | {req['router']:.1f} us | "
        f"{r['per_request_ratio_gate_vs_router']:.1f}x |",
        f"| per request, against the floor (parse, verify, hash, sign; nothing else) | {req['gate']:.1f} us | "
        f"{req['floor']:.1f} us (floor) | {r['per_request_ratio_gate_vs_floor']:.2f}x |",
        f"| per request, every token new to the gate's cache, against the floor | {req['gate_cold_tokens']:.1f} us | "
        f"{req['floor']:.1f} us (floor) | {r['per_request_ratio_gate_cold_tokens_vs_floor']:.2f}x |",
        f"| cold import | {imp['gate']:.1f} ms | {imp['router']:.2f} ms | "
        f"{r['cold_import_ratio_gate_vs_router']:.0f}x |",
        f"| cold import, against the floor's libraries imported alone | {imp['gate']:.1f} ms | "
        f"{imp['floor']:.1f} ms (floor) | {r['cold_import_ratio_gate_vs_floor']:.2f}x |",
        f"| package (zip) | {size['gate'] / mb:.1f} MB | {size['router'] / 1024:.1f} KB | "
        f"{size['gate'] / LAMBDA_EDGE_ORIGIN_REQUEST_LIMIT:.0%} of the 50 MB limit |",
        "",
        "| signer candidate | import | per signature | package (zip) |",
        "|---|---|---|---|",
        f"| awscrt (chosen) | {imp['awscrt']:.1f} ms | {sig['awscrt']:.1f} us | {size['awscrt'] / mb:.1f} MB |",
        f"| botocore SigV4Auth | {imp['botocore']:.1f} ms ({r['signer_import_ratio_botocore_vs_awscrt']:.1f}x) | "
        f"{sig['botocore']:.1f} us ({r['signer_ratio_botocore_vs_awscrt']:.1f}x) | {size['botocore'] / mb:.1f} MB |",
    ])


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.edge_gate_bench",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    result = run(quick=args.quick)
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "markdown"}, indent=2))
    else:
        print(result["markdown"])
    return result


if __name__ == "__main__":
    main()
