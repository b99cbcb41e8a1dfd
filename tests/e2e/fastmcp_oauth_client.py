"""A FastMCP client that authorizes on its own, run with the FastMCP example's own virtualenv
(``devkit.example_envs.python_env("fastmcp")``: fastmcp pins an ``mcp`` of its own, which must
not meet the project's). It imports nothing of this repository.

    python fastmcp_oauth_client.py '{"url": "...", "calls": [["tool", {...}], ...]}'

FastMCP's ``OAuth`` as shipped: it finds the protected resource metadata from the edge's 401,
registers dynamically with the dev issuer, sends the person to the authorization URL and takes
the code on its own loopback callback server. The one stand-in is the person's browser: a
thread that fetches the authorization URL and follows the issuer's redirect to the callback
(the dev issuer approves loopback redirect URIs without a consent page). Prints one JSON report.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
import webbrowser
from typing import Any

VISITED: list[str] = []
BROWSER_ERRORS: list[str] = []


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _browse(url: str) -> None:
    """What a person's browser does with the authorization URL, headless."""
    try:
        try:
            urllib.request.build_opener(_NoRedirect).open(url, timeout=30)
            raise RuntimeError(f"the authorization endpoint did not redirect: {url}")
        except urllib.error.HTTPError as redirect:
            if redirect.code not in (302, 303):
                raise
            callback = redirect.headers["location"]
        deadline = time.monotonic() + 30
        while True:  # the callback server starts once the client is told the URL was opened
            try:
                with urllib.request.urlopen(callback, timeout=30) as answer:
                    answer.read()
                return
            except urllib.error.URLError as exc:
                if not isinstance(exc.reason, ConnectionRefusedError) or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    except Exception as exc:  # reported, and the client times out waiting for its callback
        BROWSER_ERRORS.append(repr(exc))


def _open(url: str, *args: Any, **kwargs: Any) -> bool:
    VISITED.append(url)
    threading.Thread(target=_browse, args=(url,), daemon=True).start()
    return True


async def run(options: dict[str, Any]) -> dict[str, Any]:
    from fastmcp import Client
    from fastmcp.client.auth import OAuth

    webbrowser.open = _open  # type: ignore[assignment]
    report: dict[str, Any] = {"calls": {}, "errors": []}
    auth = OAuth(client_name="fastmcp e2e client", callback_host="127.0.0.1", callback_timeout=60)
    async with Client(options["url"], auth=auth) as client:
        report["tools"] = [tool.name for tool in await client.list_tools()]
        for name, arguments in options["calls"]:
            try:
                result = await client.call_tool(name, arguments, raise_on_error=False)
                report["calls"][name] = {"isError": result.is_error,
                                         "structuredContent": result.structured_content,
                                         "text": [getattr(c, "text", None) for c in result.content]}
            except Exception as exc:
                report["calls"][name] = {"exception": f"{type(exc).__name__}: {exc}"}
    report["authorizations"] = VISITED
    return report


def main() -> None:
    options = json.loads(sys.argv[1])
    try:
        report = asyncio.run(run(options))
    except BaseException as exc:
        report = {"errors": ["".join(traceback.format_exception(exc))[-4000:]], "authorizations": VISITED}
    report["browserErrors"] = BROWSER_ERRORS
    print(json.dumps(report, default=str), flush=True)


if __name__ == "__main__":
    main()
