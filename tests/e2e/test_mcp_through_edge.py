"""The official MCP SDK client through the local edge, with a token from the dev issuer."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from local.client import connect, token_for
from local.plan import LocalPlan

pytestmark = pytest.mark.e2e

# Arguments for each example tool; a new tool must be added here to be called.
EXAMPLE_ARGUMENTS: dict[str, dict[str, Any]] = {
    "echo": {"text": "héllo through the edge"},
    "countdown": {"steps": 4, "interval_s": 0.05},
    "served_by": {},
    "whoami": {},  # needs mcp:identity: the token asks for it
}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_sdk_client_lists_and_calls_every_tool_with_progress_over_sse(plan: LocalPlan, mode: str) -> None:
    token = token_for(plan, scope="mcp mcp:identity")
    seen: list[tuple[float, float | None]] = []

    async def run() -> dict[str, Any]:
        async with connect(plan.mcp_url, token, mode=mode, headers={"cloudfront-viewer-country": "DE"}) as client:
            listed = await client.list_tools()
            names = sorted(t.name for t in listed.tools)
            assert names == sorted(EXAMPLE_ARGUMENTS), f"tools changed: add arguments for {names}"
            results = {}
            for name in names:

                async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                    seen.append((progress, total))

                result = await client.call_tool(name, EXAMPLE_ARGUMENTS[name], progress_callback=on_progress)
                assert not result.is_error, (name, result.content)
                results[name] = result
            return {"protocol": client.protocol_version, **results}

    results = anyio.run(run)
    if mode == "legacy":
        assert results["protocol"] != "2026-07-28"
    else:
        assert results["protocol"] == "2026-07-28"
    assert results["echo"].content[0].text == EXAMPLE_ARGUMENTS["echo"]["text"]
    assert results["served_by"].structured_content["region"] == "eu-west-1"  # DE's nearest region
    assert results["countdown"].structured_content == {"steps": 4, "message": "counted down 4 steps"}
    # Every step's progress arrived, in order: the SSE stream came through the edge.
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
