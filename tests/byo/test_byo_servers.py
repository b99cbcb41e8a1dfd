"""Servers written the way each SDK's own docs write them (not the project's examples), each in
its own folder under ``servers/``, behind the local edge from a stack file of ``stacks/``, as
``scripts/run-local --stack`` runs them (one topology per stack, one region: kept lean for CI).

The fixed servers (the change a user makes for Lambda: stateless, Host check configured,
``$PORT``, each made on the command line, ``VAR=value cmd``) pass: the official Python SDK
client completes OAuth with the dev issuer and calls a tool. The TypeScript server serves on
``/api/mcp`` while the stack leaves ``mcpPath`` at ``/mcp``.

The servers as written (stateful, the default Host check, the default port) must fail
locally the way they would on Lambda, with a message naming the fix: the local twin runs two
instances of each origin and forwards the Host AWS sends, and the probes' results (their
``degradedReasons`` in the latest state, or their error) name the setting to change."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from functions.contract import REFUSAL_HEADER
from local.client import connect
from local.oauth.client import HeadlessAuthorization, MemoryStorage, oauth_provider
from local.plan import LocalPlan, token_for
from stack_config.loading import PROJECT_ROOT, load_from_stack_file
from tests.e2e.conftest import latest_items, own_topology, wait_for
from tests.e2e.server_tools import ACCEPT, HANDSHAKE_ERA

pytestmark = pytest.mark.e2e

STACKS = Path(__file__).with_name("stacks")
SERVERS = Path(__file__).with_name("servers")
FIXED = ("fastmcp", "lowlevel", "typescript")
# The local twin's part passes (the handshake-era client fails on the second instance); the probes'
# first round records the server degraded without naming stateless_http yet.


def stack_file(name: str) -> Path:
    return STACKS / f"Pulumi.byo-{name}.yaml"


@pytest.fixture(scope="module", params=FIXED)
def fixed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlan]:
    name = request.param
    with own_topology(stack_file(name), f"byo-{name}", tmp_path_factory.mktemp(f"byo-{name}")) as plan:
        yield plan


def oauth_session(plan: LocalPlan, calls: list[tuple[str, dict[str, Any]]],
                  mode: str = "auto") -> tuple[list[str], list[Any]]:
    """The official SDK client with nothing in hand: it finds the edge's resource metadata,
    registers with the dev issuer, authorizes, lists the tools and makes ``calls``."""
    provider = oauth_provider(plan.mcp_url, storage=MemoryStorage(), authorization=HeadlessAuthorization())

    async def run() -> tuple[list[str], list[Any]]:
        async with connect(plan.mcp_url, None, mode=mode, auth=provider) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            return tools, [await client.call_tool(name, arguments) for name, arguments in calls]

    return anyio.run(run)


# --- fixed as a user fixes them: they pass ---------------------------------------------------------------


def test_the_fixed_server_completes_oauth_and_serves_a_tool_call_through_the_edge(fixed: LocalPlan) -> None:
    tools, (result,) = oauth_session(fixed, [("add", {"a": 2, "b": 3})])
    assert "add" in tools
    assert not result.is_error, result.content
    assert "5" in result.content[0].text


def test_the_command_line_sets_variables_for_the_server_as_a_shell_does(fixed: LocalPlan) -> None:
    # Each fixed stack's command starts with NAME=value words: the server got them (else it would
    # be stateful, refuse the Function URL's Host or listen elsewhere, and the call above fails).
    command = load_from_stack_file(fixed.stack).server.command or ""
    assert command.split()[0].partition("=")[1] == "="
    assert fixed.server["command"] == command


def test_a_server_on_api_mcp_is_served_at_the_edges_mcp_path_and_only_there(fixed: LocalPlan) -> None:
    if fixed.server["path"] == fixed.mcp_path:
        pytest.skip("this server serves MCP on the edge's own path")
    assert (fixed.mcp_path, fixed.server["path"]) == ("/mcp", "/api/mcp")
    metadata = httpx.get(f"{fixed.edge_url}/.well-known/oauth-protected-resource/mcp", timeout=30).json()
    assert metadata["resource"] == fixed.mcp_url
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"authorization": f"Bearer {token_for(fixed)}", "content-type": "application/json",
               "accept": ACCEPT, "mcp-protocol-version": HANDSHAKE_ERA}
    served = httpx.post(fixed.mcp_url, json=body, headers=headers, timeout=30)
    assert served.status_code == 200 and REFUSAL_HEADER not in served.headers, served.text
    # The server's own path is no public path: the edge refuses it itself.
    refused = httpx.post(fixed.edge_url + fixed.server["path"], json=body, headers=headers, timeout=30)
    assert (refused.status_code, refused.headers.get(REFUSAL_HEADER)) == (404, "not-found"), refused.text


def test_the_probes_see_the_fixed_server_healthy_at_the_edge_and_at_its_function_url(fixed: LocalPlan) -> None:
    # Probes run once at the start: the edge on its public path, the Function URL on the server's own.
    expected = {("edge", region) for region in fixed.regions} | {("origin", region) for region in fixed.regions}

    def round_done() -> list[dict[str, Any]] | None:
        items = latest_items(fixed)
        return items if {(i["target"]["S"], i["targetRegion"]["S"]) for i in items} >= expected else None

    items = wait_for(round_done, 60, "the probes' first round")
    for item in items:
        target, status, endpoint = item["target"]["S"], item["status"]["S"], item["endpoint"]["S"]
        assert status == "healthy", item
        path = fixed.mcp_path if target == "edge" else fixed.server["path"]
        assert endpoint.endswith(path) and not endpoint.endswith("/mcp/mcp"), (target, endpoint)


# --- as written: they fail locally as on Lambda, with the fix named ---------------------------------------------


def probe_messages(plan: LocalPlan) -> str:
    """The probes' latest results, every field as text (their verdicts and advice)."""
    return " ".join(str(item) for item in latest_items(plan))


def failing_run(tmp_path: Path, name: str, mode: str = "auto") -> tuple[str, str]:
    """A stack whose server Lambda would break, run locally: what the official SDK client got
    through the edge (in ``mode``), and what the probes' first round (run at the start) says."""
    with own_topology(stack_file(name), f"byo-{name}", tmp_path / "run") as plan:
        try:
            oauth_session(plan, [("add", {"a": 2, "b": 3})] * 3, mode=mode)
            client = "served"
        except Exception as exc:  # the client's failure is what a user sees first
            client = f"failed: {exc!r}"
        probes = wait_for(lambda: probe_messages(plan) if latest_items(plan) else None, 60, "the probes' first round")
        return client, probes



def test_fastmcps_quickstart_as_written_is_stateful_and_fails_locally_naming_stateless_http(tmp_path: Path) -> None:
    # Two instances behind each local Function URL, as Lambda runs: a session's next request
    # lands where the session is unknown.
    # The handshake era's client (2025 protocol versions): FastMCP's quickstart is stateful there
    # (on 2026-07-28 it needs no session).
    client, probes = failing_run(tmp_path, "fastmcp-stateful", mode="legacy")
    assert client.startswith("failed"), client
    assert "stateless_http=True" in probes, probes


def test_the_sdks_default_host_check_fails_locally_naming_the_setting(tmp_path: Path) -> None:
    # The local Function URL forwards the Host AWS sends (<url-id>.lambda-url.<region>.on.aws).
    client, probes = failing_run(tmp_path, "lowlevel-hostcheck")
    assert client.startswith("failed"), client
    assert "Host" in probes and "TransportSecuritySettings" in probes, probes


@pytest.mark.timeout(45)  # the bound is 10 s after the start (the program's run under mocks comes first)
def test_a_server_on_its_own_port_fails_the_start_naming_the_port_and_port(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"8000") as raised, \
            own_topology(stack_file("fastmcp-port"), "byo-fastmcp-port", tmp_path / "run"):
        pass
    assert "$PORT" in str(raised.value)


def test_a_server_folder_outside_the_project_works(tmp_path: Path) -> None:
    # The user's own repository: the server folder and the stack file beside it, outside the project.
    repo = tmp_path / "my-server"
    shutil.copytree(SERVERS / "fastmcp_quickstart", repo / "server")
    text = stack_file("fastmcp").read_text().replace("tests/byo/servers/fastmcp_quickstart", "server")
    (repo / "Pulumi.outside.yaml").write_text(text)
    assert not repo.is_relative_to(PROJECT_ROOT)
    with own_topology(repo / "Pulumi.outside.yaml", "outside", tmp_path / "run") as plan:
        _, (result,) = oauth_session(plan, [("add", {"a": 2, "b": 3})])
        assert not result.is_error, result.content
