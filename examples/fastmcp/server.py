"""A one-file FastMCP server, written as a user would write it, deployable unchanged.

Run: ``PORT=8080 python server.py``. It serves MCP over Streamable HTTP, statelessly, at
``/mcp`` on 127.0.0.1:$PORT (the Lambda Web Adapter forwards to that port).
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import time
from collections import Counter

import fastmcp
from fastmcp import Context, FastMCP
from pydantic import BaseModel, Field

STARTED_AT = time.monotonic()

# Host values this server answers; any other gets 421 (DNS-rebinding protection). Behind the
# edge, requests arrive through a Lambda Function URL, whose host is
# <url-id>.lambda-url.<region>.on.aws (the id is only known once the function exists, hence
# the wildcard); locally and under the adapter's readiness check, the loopback address.
ALLOWED_HOSTS = ["*.lambda-url.*.on.aws", "127.0.0.1", "localhost"]

mcp = FastMCP("text-tools", instructions="Text statistics and hashing.")


class WordCount(BaseModel):
    word: str
    count: int


class TextStats(BaseModel):
    characters: int = Field(description="Unicode code points in the text")
    words: int
    lines: int
    top_words: list[WordCount] = Field(description="The most frequent words, most frequent first")


@mcp.tool
def text_stats(text: str, top: int = 3) -> TextStats:
    """Count the characters, words and lines of a text, and name its most frequent words."""
    words = re.findall(r"[\w']+", text.lower())
    return TextStats(
        characters=len(text),
        words=len(words),
        lines=len(text.splitlines()),
        top_words=[WordCount(word=w, count=c) for w, c in Counter(words).most_common(max(top, 0))],
    )


@mcp.tool
async def hash_rounds(text: str, rounds: int = 1000, ctx: Context | None = None) -> str:
    """SHA-256 the text, then the digest again, `rounds` times in all; reports progress as it goes."""
    if not 1 <= rounds <= 100_000:
        raise ValueError("rounds must be between 1 and 100000")
    digest = text.encode()
    step = max(rounds // 4, 1)
    for done in range(1, rounds + 1):
        digest = hashlib.sha256(digest).digest()
        if ctx is not None and (done % step == 0 or done == rounds):
            await ctx.report_progress(done, rounds, f"{done} of {rounds} rounds")
    return digest.hex()


@mcp.tool
def admin_runtime_info() -> dict[str, str | float]:
    """What this server runs on (for operators): versions, region, process uptime."""
    return {
        "python": platform.python_version(),
        "fastmcp": fastmcp.__version__,
        "machine": platform.machine(),
        "region": os.environ.get("AWS_REGION", "local"),
        "uptime_s": round(time.monotonic() - STARTED_AT, 3),
    }


if __name__ == "__main__":
    mcp.run(
        transport="http",
        host="127.0.0.1",
        port=int(os.environ.get("PORT", "8080")),
        path="/mcp",
        stateless_http=True,
        host_origin_protection=True,
        allowed_hosts=ALLOWED_HOSTS,
        show_banner=False,
    )
