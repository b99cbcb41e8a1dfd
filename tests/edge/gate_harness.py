"""The edge gate as it ships, for tests and the benchmark: the rendered files of
``edge.gate_package.edge_gate_package`` written to a folder and imported from there
(``edge_gate.handler`` and ``geo_router``, fresh modules each time, their names then
taken back out of ``sys.modules`` so that several renders live side by side), plus an
issuer with keys, CloudFront origin-request events with include-body, and an independent
check of the SigV4 signature with botocore."""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from devkit.jwks import public_jwk
from edge.gate_package import GateSettings, edge_gate_package
from edge.router import OriginTarget

ISSUER = "https://issuer.example.com"
AUDIENCE = "https://mcp.example.com/mcp"
RESOURCE = "https://mcp.example.com/mcp"
METADATA_URL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
ORIGINS = {
    "us-east-1": OriginTarget("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.lambda-url.us-east-1.on.aws"),
    "eu-west-1": OriginTarget("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb.lambda-url.eu-west-1.on.aws"),
    "ap-northeast-1": OriginTarget("cccccccccccccccccccccccccccccccc.lambda-url.ap-northeast-1.on.aws"),
}
DEFAULT_REGION = "us-east-1"
PROBE_CLIENT_ID = "mcp-edge-probe"  # the probes' OAuth client: the only one that may pin a region
PIN_HEADER = "x-mcp-edge-region"
ALLOWED_ORIGIN = "https://app.example"  # the one browser origin the harness's stack allows
READINESS_PATH = "/healthz"  # the server's readiness path: the probes' client alone reaches it
REFUSAL_HEADER = "x-mcp-edge-refusal"  # the edge's mark on its own answers
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "ASIAEDGEGATETESTKEY1",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEDGEGATEKEY",
    "AWS_SESSION_TOKEN": "IQoJb3JpZ2luX2VjEdgeGateSessionToken//////////wEaCXVzLWVhc3QtMSJHMEUCIQ",
}
TOOLS_CALL = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
              "params": {"name": "search", "arguments": {"query": "weather in Lisbon", "limit": 5}}}


def _module_names() -> list[str]:
    return [n for n in sys.modules if n in ("geo_router", "edge_gate") or n.startswith("edge_gate.")]


def load_gate(files: Mapping[str, str], root: Path) -> ModuleType:
    """``edge_gate.handler`` imported from ``files`` written under ``root``."""
    for arcname, text in files.items():
        path = root / arcname
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for name in _module_names():
        del sys.modules[name]
    sys.path.insert(0, str(root))
    try:
        module = importlib.import_module("edge_gate.handler")
    finally:
        sys.path.remove(str(root))
        for name in _module_names():
            del sys.modules[name]
    assert Path(module.__file__ or "").is_relative_to(root), "imported the gate from somewhere else"
    return module


@dataclass
class Issuer:
    """Signing keys and a token factory; ``jwks`` is the issuer's public key set."""

    rsa_key: rsa.RSAPrivateKey
    ec_key: ec.EllipticCurvePrivateKey

    @classmethod
    def generate(cls) -> Issuer:
        return cls(rsa.generate_private_key(public_exponent=65537, key_size=2048),
                   ec.generate_private_key(ec.SECP256R1()))

    @property
    def jwks(self) -> dict[str, Any]:
        return {"keys": [public_jwk(self.rsa_key, "rsa-1", "RS256"), public_jwk(self.ec_key, "ec-1", "ES256")]}

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "user-1", "client_id": "client-1",
                  "iat": now, "exp": now + 300, "scope": "mcp"}
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def token(self, *, alg: str = "RS256", kid: str | None = None, key: Any = None, **overrides: Any) -> str:
        if key is None:
            key = self.rsa_key if alg.startswith(("RS", "PS")) else self.ec_key
        kid = kid or ("rsa-1" if alg.startswith(("RS", "PS")) else "ec-1")
        return jwt.encode(self.claims(**overrides), key, algorithm=alg, headers={"kid": kid})


def settings(jwks: Mapping[str, Any], jwks_url: str = "http://127.0.0.1:9/jwks.json", **overrides: Any) -> GateSettings:
    base = GateSettings(
        issuer=ISSUER, audiences=(AUDIENCE,), jwks_url=jwks_url, jwks=jwks, resource=RESOURCE,
        authorization_servers=(ISSUER,), algorithms=("RS256", "ES256"), leeway_s=30,
        base_scopes=("mcp",), tool_scopes={"search": ("search:read",), "delete_all": ("admin", "search:read")},
        resource_scopes={"file:///secret.txt": ("files:read",)}, prompt_scopes={"incident": ("oncall",)},
        jwks_refresh_cooldown_s=60, jwks_max_backoff_s=30, jwks_fetch_timeout_s=1.0,
        probe_client_id=PROBE_CLIENT_ID, allowed_origins=(ALLOWED_ORIGIN,), readiness_path=READINESS_PATH,
    )
    return replace(base, **overrides)


def render(gate: GateSettings, root: Path) -> ModuleType:
    package = edge_gate_package(ORIGINS, DEFAULT_REGION, gate=gate)
    return load_gate(package.files, root)


def event(headers: Mapping[str, str | list[str]] | None = None, *, body: bytes | None = None, method: str = "POST",
          uri: str = "/mcp", querystring: str = "", truncated: bool = False) -> dict[str, Any]:
    """A CloudFront origin-request event with include-body (header values may repeat)."""
    all_headers: dict[str, Any] = {"Host": "d111111abcdef8.cloudfront.net", "Content-Type": "application/json",
                                   **(headers or {})}
    cf_headers: dict[str, list[dict[str, str]]] = {}
    for name, value in all_headers.items():
        for one in value if isinstance(value, list) else [value]:
            cf_headers.setdefault(name.lower(), []).append({"key": name, "value": one})
    request: dict[str, Any] = {
        "clientIp": "203.0.113.178", "method": method, "uri": uri, "querystring": querystring,
        "headers": cf_headers,
        "origin": {"custom": {"customHeaders": {}, "domainName": "placeholder.example.com", "keepaliveTimeout": 5,
                              "path": "", "port": 443, "protocol": "https", "readTimeout": 30,
                              "sslProtocols": ["TLSv1.2"]}},
    }
    if body is not None:
        request["body"] = {"inputTruncated": truncated, "action": "read-only", "encoding": "base64",
                           "data": base64.b64encode(body).decode()}
    return {"Records": [{"cf": {"config": {"eventType": "origin-request", "distributionId": "EDFDVBD6EXAMPLE"},
                                "request": request}}]}


def rpc(message: Any) -> bytes:
    return json.dumps(message).encode()


def header(result: Mapping[str, Any], name: str) -> str | None:
    entries = result.get("headers", {}).get(name)
    return entries[0]["value"] if entries else None


def status(result: Mapping[str, Any]) -> int | None:
    """The status of a generated response; None for a request forwarded to the origin."""
    return int(result["status"]) if "status" in result else None


def verify_sigv4(request: Mapping[str, Any], body: bytes, credentials: Mapping[str, str] = CREDENTIALS) -> str:
    """Recompute the forwarded request's SigV4 signature with botocore (independent of the
    edge's signer) from what the request carries; returns the credential scope's region.
    AssertionError when the signature, the signed headers or the payload hash differ."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    headers = request["headers"]
    authorization = headers["authorization"][0]["value"]
    algorithm, _, fields = authorization.partition(" ")
    assert algorithm == "AWS4-HMAC-SHA256", authorization
    parts = dict(part.strip().split("=", 1) for part in fields.split(","))
    access_key, date, region, service, terminator = parts["Credential"].split("/")
    assert (access_key, service, terminator) == (credentials["AWS_ACCESS_KEY_ID"], "lambda", "aws4_request")
    signed = parts["SignedHeaders"].split(";")
    assert {"host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"} <= set(signed), signed
    assert headers["x-amz-content-sha256"][0]["value"] == hashlib.sha256(body).hexdigest()
    custom = request["origin"]["custom"]
    url = f"{custom['protocol']}://{headers['host'][0]['value']}{request['uri']}"
    if request.get("querystring"):
        url += "?" + request["querystring"]
    aws_request = AWSRequest(method=request["method"], url=url, data=body,
                             headers={name: headers[name][0]["value"] for name in signed})
    timestamp = headers["x-amz-date"][0]["value"]
    assert timestamp.startswith(date)
    aws_request.context["timestamp"] = timestamp
    signer = SigV4Auth(Credentials(credentials["AWS_ACCESS_KEY_ID"], credentials["AWS_SECRET_ACCESS_KEY"],
                                   credentials["AWS_SESSION_TOKEN"]), service, region)
    canonical = signer.canonical_request(aws_request)
    expected = signer.signature(signer.string_to_sign(aws_request, canonical), aws_request)
    assert parts["Signature"] == expected, f"signature differs; canonical request:\n{canonical}"
    return region
