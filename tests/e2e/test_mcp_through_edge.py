"""The official MCP SDK client through the local edge, with a token from the dev issuer,
sees the stack's server exactly as the server itself answers: the same protocol version
and the same tool listing (names, schemas, annotations), in both protocol eras.

What "the server itself" answers is taken from the server: the topology's own package,
started once more beside the topology (its run.sh, on a free port) and asked directly.
Nothing here knows which tools the server has (the demo's own tests do).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from local.client import connect, token_for
from local.origins import env_argv, start_command
from local.plan import LocalPlan
from local.supervisor import free_ports
from tests.e2e.conftest import SessionTopology

pytestmark = pytest.mark.e2e

READY_TIMEOUT_S = 60.0


def listing_digest(tools: list[Any]) -> str:
    """A hash of a tools/list answer, order and all (what the probes' schema hashing covers)."""
    dumped = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
    return hashlib.sha256(json.dumps(dumped, sort_keys=True).encode()).hexdigest()


async def _listing(url: str, token: str | None, mode: str, headers: dict[str, str] | None = None) -> tuple[str, list[Any]]:
    async with connect(url, token, mode=mode, headers=headers) as client:
        listed = await client.list_tools()
        return client.protocol_version, list(listed.tools)


@pytest.fixture(scope="module")
def server_itself(session_topology: SessionTopology) -> Iterator[str]:
    """The MCP URL of the topology's server package, started on its own (no edge in front)."""
    topology = session_topology.get()
    (port,) = free_ports(1)
    origin = topology.plan.origins[0]
    argv, env = start_command(topology.server, topology.package_dir, port, origin.environment)
    process = subprocess.Popen(env_argv(argv, env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        _wait_ready(process, f"http://127.0.0.1:{port}{origin.readiness_path}")
        yield f"http://127.0.0.1:{port}{topology.server.path}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def _wait_ready(process: subprocess.Popen[bytes], url: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the server's package exited with {process.returncode}"
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"the server's package did not answer {url} below 500 within {READY_TIMEOUT_S} s")


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_sdk_client_through_the_edge_sees_the_servers_own_tool_listing(plan: LocalPlan, server_itself: str,
                                                                          mode: str) -> None:
    token = token_for(plan)
    through_edge = anyio.run(lambda: _listing(plan.mcp_url, token, mode, {"cloudfront-viewer-country": "DE"}))
    direct = anyio.run(lambda: _listing(server_itself, token, mode))
    assert through_edge[0] == direct[0], "the edge changed the negotiated protocol version"
    if mode == "legacy":
        assert through_edge[0] != "2026-07-28"
    assert len(through_edge[1]) == len(direct[1]) > 0
    assert listing_digest(through_edge[1]) == listing_digest(direct[1])
