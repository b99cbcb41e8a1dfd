"""OAuth as standard MCP clients do it, through the local edge, each starting with no token:
the official Python SDK's OAuth client provider and the official TypeScript SDK client
(@modelcontextprotocol/client, pinned in tests/ts_client, run with the machine's Node.js).

Each follows the edge's 401 to the protected resource metadata and the dev issuer,
registers (dynamically, or with an https client ID metadata document), authorizes with
code + PKCE by following the redirect, lists and calls tools through the edge, refreshes
once its access token has expired, and steps up for a tool that needs another scope.
Plus the client-credentials grant machine clients use, and the scope step-up in both
protocol eras at the HTTP level.

The tools come from the server's own ``tools/list`` and the scoped one from the stack's
``toolScopes``: nothing here depends on what the stack's server is.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx
import jwt
import pytest

from local.client import connect, token_for
from local.oauth.client import HeadlessAuthorization, MemoryStorage, client_metadata_document, oauth_provider
from local.plan import LocalPlan
from stack_config.loading import PROJECT_ROOT, load_from_stack_file
from tests.cimd import DocumentServer, LocalCA
from tests.e2e.conftest import TOKEN_LIFETIME_S, SessionTopology
from tests.e2e.server_tools import arguments_for, callable_tools, jsonrpc_answer, listed_tools, tool_named

pytestmark = pytest.mark.e2e

TS_CLIENT = PROJECT_ROOT / "tests" / "ts_client"
LEEWAY_S = 30  # the prod stack's authLeewaySeconds: the edge and origins accept a token this long past exp
COUNTRY = {"cloudfront-viewer-country": "DE"}  # served by eu-west-1
_SERVER = load_from_stack_file("prod").server
assert _SERVER is not None and _SERVER.tool_scopes, "the prod stack scopes a tool (toolScopes)"
TOOL_SCOPES = dict(_SERVER.tool_scopes)
# The stack's scoped tool and the scopes a call of it needs (step-up).
(SCOPED, SCOPES), *_ = TOOL_SCOPES.items()


def tool_plan(plan: LocalPlan) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    """The server's tool names, a tool any token may call, and the scoped tool (as listed)."""
    tools = listed_tools(plan)
    return [t["name"] for t in tools], callable_tools(tools, TOOL_SCOPES)[0], tool_named(tools, SCOPED)


def granted_scopes(access_token: str) -> set[str]:
    return set(str(jwt.decode(access_token, options={"verify_signature": False}).get("scope", "")).split())


@pytest.fixture(scope="module")
def https_documents(local_ca: LocalCA) -> Iterator[DocumentServer]:
    with DocumentServer(local_ca) as server:
        yield server


def publish_client_document(documents: DocumentServer, name: str) -> str:
    path = f"/clients/{name}.json"
    return documents.publish(path, client_metadata_document(documents.url(path), client_name=name))


# --- the official Python SDK ---------------------------------------------------------------------------


def python_session(plan: LocalPlan, provider: Any, steps: Any) -> Any:
    async def run() -> Any:
        async with connect(plan.mcp_url, None, auth=provider, headers=COUNTRY) as client:
            return await steps(client)

    return anyio.run(run)


def test_python_sdk_registers_dynamically_authorizes_calls_refreshes_and_steps_up(plan: LocalPlan) -> None:
    storage, authorization = MemoryStorage(), HeadlessAuthorization()
    provider = oauth_provider(plan.mcp_url, storage=storage, authorization=authorization)
    names, tool, scoped = tool_plan(plan)

    async def steps(client: Any) -> dict[str, Any]:
        out = {"tools": [t.name for t in (await client.list_tools()).tools],
               "first": await client.call_tool(tool["name"], arguments_for(tool))}
        await anyio.sleep(TOKEN_LIFETIME_S + 1)  # the access token expires: the provider refreshes before the next call
        out["after_refresh"] = await client.call_tool(tool["name"], arguments_for(tool))
        # 403 insufficient_scope, step-up, retried
        out["scoped"] = await client.call_tool(SCOPED, arguments_for(scoped))
        return out

    results = python_session(plan, provider, steps)
    assert results["tools"] == names
    assert not results["first"].is_error and not results["after_refresh"].is_error, results
    # Registered dynamically (no client id of ours), authorized once, refreshed once, stepped up once.
    assert storage.client_info is not None and storage.client_info.client_id.startswith("dcr-")
    first, refreshed, stepped_up = storage.history
    assert refreshed.refresh_token != first.refresh_token and refreshed.access_token != first.access_token
    assert len(authorization.visited) == 2
    assert all(quote(scope, safe="") in authorization.visited[1] for scope in SCOPES)
    assert "resource=" + quote(plan.mcp_url, safe="") in authorization.visited[0]  # RFC 8707
    assert not results["scoped"].is_error, results["scoped"].content
    assert not set(SCOPES) & granted_scopes(first.access_token)
    assert set(SCOPES) <= granted_scopes(stepped_up.access_token)
    claims = jwt.decode(stepped_up.access_token, options={"verify_signature": False})
    assert claims["aud"] == plan.mcp_url and claims["iss"] == plan.issuer.issuer


def test_python_sdk_uses_an_https_client_id_metadata_document(plan: LocalPlan,
                                                              https_documents: DocumentServer) -> None:
    url = publish_client_document(https_documents, "python-sdk")
    storage = MemoryStorage()
    provider = oauth_provider(plan.mcp_url, storage=storage, client_metadata_url=url)
    _, tool, _ = tool_plan(plan)

    async def steps(client: Any) -> Any:
        await client.list_tools()
        return await client.call_tool(tool["name"], arguments_for(tool))

    result = python_session(plan, provider, steps)
    assert not result.is_error, result.content
    assert storage.client_info is not None and storage.client_info.client_id == url  # no registration request
    assert https_documents.fetches.count("/clients/python-sdk.json") == 1


# --- the official TypeScript SDK -------------------------------------------------------------------------


class TsClient:
    """One run of the TypeScript SDK client (tests/ts_client/oauth_client.mjs), started at once
    and read by ``report()``: a run that waits out a token's expiry can go on in the background.
    Its output goes to files in ``out_dir``, so a run nobody reads yet never blocks on a pipe."""

    def __init__(self, out_dir: Path, **options: Any):
        self.options = options
        node = shutil.which("node")
        assert node, "Node.js (20 or later) is needed for the TypeScript SDK tests"
        assert (TS_CLIENT / "node_modules" / "@modelcontextprotocol" / "client").is_dir(), (
            f"the TypeScript SDK client is not installed: run `npm ci --prefix {TS_CLIENT}` (scripts/check does)")
        self.stdout, self.stderr = out_dir / "stdout.txt", out_dir / "stderr.txt"
        with self.stdout.open("w") as stdout, self.stderr.open("w") as stderr:
            self.process = subprocess.Popen([node, "oauth_client.mjs", json.dumps(options)], cwd=TS_CLIENT,
                                            stdout=stdout, stderr=stderr, text=True)

    def report(self) -> dict[str, Any]:
        try:
            self.process.wait(timeout=180)
        finally:
            self.stop()
        stderr = self.stderr.read_text()
        lines = [line for line in self.stdout.read_text().splitlines() if line.startswith("{")]
        assert lines, f"no report from the TypeScript client (exit {self.process.returncode}): {stderr[-2000:]}"
        report: dict[str, Any] = json.loads(lines[-1])
        assert self.process.returncode == 0 and not report["errors"], (report, stderr[-2000:])
        return report

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def run_ts_client(out_dir: Path, **options: Any) -> dict[str, Any]:
    return TsClient(out_dir, **options).report()


@pytest.fixture(scope="module", autouse=True)
def ts_client_waiting_for_expiry(session_topology: SessionTopology, https_documents: DocumentServer,
                                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[TsClient]:
    """The TypeScript SDK client with a client ID metadata document, started with the module:
    most of its run is waiting for its token to expire (the TypeScript SDK refreshes when a
    request is refused, so it waits until the edge refuses the token: the lifetime, the
    stack's leeway and 2 s), which the module's other tests use instead of waiting after it;
    the test that reads it comes last."""
    plan = session_topology.get().plan
    url = publish_client_document(https_documents, "typescript-sdk")
    _, tool, scoped = tool_plan(plan)
    client = TsClient(tmp_path_factory.mktemp("ts-client"), url=plan.mcp_url, clientMetadataUrl=url, headers=COUNTRY,
                      waitForExpirySeconds=TOKEN_LIFETIME_S + LEEWAY_S + 2,
                      call={"name": tool["name"], "arguments": arguments_for(tool)},
                      stepUp={"name": SCOPED, "arguments": arguments_for(scoped)})
    yield client
    client.stop()  # killed if no test read it (e.g. -k chose others)


def test_typescript_sdk_registers_dynamically(plan: LocalPlan, tmp_path: Path) -> None:
    _, tool, _ = tool_plan(plan)
    report = run_ts_client(tmp_path, url=plan.mcp_url, headers=COUNTRY,
                           call={"name": tool["name"], "arguments": arguments_for(tool)})
    assert report["clientId"].startswith("dcr-")
    assert report["calls"]["first"]["isError"] is False, report["calls"]
    assert len(report["authorizations"]) == 1 and "code_challenge_method=S256" in report["authorizations"][0]


# --- machine clients and the step-up challenge at the HTTP level ---------------------------------------------


def test_python_sdk_client_credentials_provider_starts_from_the_401(plan: LocalPlan) -> None:
    from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider

    storage = MemoryStorage()
    provider = ClientCredentialsOAuthProvider(server_url=plan.mcp_url, storage=storage, client_id="local-dev",
                                              client_secret=plan.issuer.clients["local-dev"],
                                              scope=" ".join(("mcp", *SCOPES)), issuer=plan.issuer.issuer)
    _, _, scoped = tool_plan(plan)

    async def steps(client: Any) -> Any:
        return await client.call_tool(SCOPED, arguments_for(scoped))

    result = python_session(plan, provider, steps)
    assert not result.is_error, result.content
    assert storage.tokens is not None and storage.tokens.refresh_token is None  # machine clients get none
    claims = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
    assert claims["client_id"] == "local-dev" and set(SCOPES) <= granted_scopes(storage.tokens.access_token)



def _post_call(plan: LocalPlan, token: str, era: str, tool: dict[str, Any]) -> httpx.Response:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                            "params": {"name": tool["name"], "arguments": arguments_for(tool)}}
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json",
               "accept": "application/json, text/event-stream", "mcp-protocol-version": era, **COUNTRY}
    if era == "2026-07-28":
        headers |= {"mcp-method": "tools/call", "mcp-name": tool["name"]}
        body["params"]["_meta"] = {"io.modelcontextprotocol/protocolVersion": era,
                                   "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
                                   "io.modelcontextprotocol/clientCapabilities": {}}
    return httpx.post(plan.mcp_url, json=body, headers=headers, timeout=30)


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
def test_client_credentials_tokens_step_up_through_the_edge_in_both_eras(plan: LocalPlan, era: str) -> None:
    _, _, scoped = tool_plan(plan)
    refused = _post_call(plan, token_for(plan), era, scoped)
    assert refused.status_code == 403, refused.text
    challenge = dict(re.findall(r'(\w+)="([^"]*)"', refused.headers["www-authenticate"]))
    assert challenge["error"] == "insufficient_scope" and challenge["scope"].split() == list(SCOPES)
    assert challenge["resource_metadata"] == f"{plan.edge_url}/.well-known/oauth-protected-resource{plan.mcp_path}"
    served = _post_call(plan, token_for(plan, scope=" ".join(("mcp", *SCOPES))), era, scoped)
    assert served.status_code == 200, served.text
    answer = jsonrpc_answer(served)
    assert "result" in answer and not answer["result"].get("isError"), answer


def test_the_resource_metadata_is_served_through_the_edge_at_both_paths(plan: LocalPlan) -> None:
    for path in (f"/.well-known/oauth-protected-resource{plan.mcp_path}", "/.well-known/oauth-protected-resource"):
        response = httpx.get(plan.edge_url + path, headers={"origin": "https://inspector.example"}, timeout=30)
        assert response.status_code == 200, (path, response.text)
        document = response.json()
        assert document["resource"] == plan.mcp_url and document["authorization_servers"] == [plan.issuer.issuer]
        assert document["scopes_supported"] == ["mcp"] and document["bearer_methods_supported"] == ["header"]
        assert response.headers["access-control-allow-origin"] in ("*", "https://inspector.example")


def test_issuer_metadata_names_every_endpoint_the_clients_use(plan: LocalPlan) -> None:
    meta = httpx.get(plan.issuer.base_url + "/.well-known/oauth-authorization-server", timeout=30).json()
    for endpoint in ("authorization_endpoint", "token_endpoint", "registration_endpoint", "jwks_uri"):
        assert httpx.head(meta[endpoint], timeout=30).status_code != 404, endpoint
    assert Path(plan.issuer.key_file).stat().st_mode & 0o077 == 0


# --- last: the TypeScript SDK run started with the module ------------------------------------------------


def test_typescript_sdk_with_a_client_id_metadata_document_authorizes_refreshes_and_steps_up(
        plan: LocalPlan, https_documents: DocumentServer, ts_client_waiting_for_expiry: TsClient) -> None:
    # The run started with the module (see the fixture): it waited until the edge refused its token.
    url = ts_client_waiting_for_expiry.options["clientMetadataUrl"]
    report = ts_client_waiting_for_expiry.report()
    assert report["clientId"] == url
    assert https_documents.fetches.count("/clients/typescript-sdk.json") >= 1
    assert report["tools"] == sorted(tool_plan(plan)[0])
    assert report["calls"]["first"]["isError"] is False and report["calls"]["after_expiry"]["isError"] is False
    assert report["tokenRequests"] == ["authorization_code", "refresh_token", "authorization_code"]
    assert report["calls"]["step_up"]["isError"] is False, report["calls"]
    first, refreshed, stepped_up = report["tokens"]
    assert refreshed["refresh"] != first["refresh"]  # rotated
    assert set(SCOPES) <= set(str(stepped_up["scope"]).split()) and not set(SCOPES) & set(str(first["scope"]).split())
    assert report["serverVersion"]["name"]  # the stack's server answered, whatever it calls itself
