"""``scripts/run-local explain`` lists what the local edge does differently from CloudFront,
and the numbers and names it states are the program's and the emulator's own."""

from __future__ import annotations

import subprocess
import sys

from components.edge import ROUTER_MEMORY_MB, ROUTER_TIMEOUT_S, VIEWER_CERTIFICATE_MIN_TLS
from devkit.edge_runtimes.in_process import FUNCTION_TIMEOUT_S
from edge.viewer_function import RUNTIME
from local.cloudfront.differences import EDGE_DIFFERENCES
from local.cloudfront.proxy import EdgeSettings
from local.plan import LOCAL_DIFFERENCES


def test_explain_prints_every_edge_difference() -> None:
    out = subprocess.run([sys.executable, "-m", "local", "explain"], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    assert set(EDGE_DIFFERENCES) <= set(LOCAL_DIFFERENCES)
    for line in EDGE_DIFFERENCES:
        assert f"- {line}" in out
    for topic in ("TLS", "host names", "JS engine", "Lambda@Edge runtime", "Origin"):
        assert any(line.startswith(f"Edge {topic}") for line in EDGE_DIFFERENCES), topic


def test_the_stated_facts_are_the_programs_and_the_emulators() -> None:
    text = " ".join(EDGE_DIFFERENCES)
    assert VIEWER_CERTIFICATE_MIN_TLS in text and RUNTIME in text
    assert f"{ROUTER_MEMORY_MB:,} MB" in text and f"{ROUTER_TIMEOUT_S} s timeout" in text
    assert f"bounded at {FUNCTION_TIMEOUT_S:g} s" in text
    names = EdgeSettings.__dataclass_fields__
    assert names["distribution_domain"].default == "127.0.0.1" and names["aliases"].default == ("localhost",)
    assert "Host 127.0.0.1 and localhost" in text
