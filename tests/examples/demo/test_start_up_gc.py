"""The garbage collector paused while the origin starts, then resumed with start-up's heap frozen."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from examples.demo.demo_server import start_up_gc

ROOT = Path(__file__).resolve().parents[3]

# Each case runs in a fresh interpreter: the collector is process-wide state.
PROBE = """
import gc, json, os, sys
sys.path.insert(0, "examples/demo")
from demo_server import start_up_gc
after_import = gc.isenabled()
objects = [[i] for i in range(5000)]  # start-up's long-lived state
again = start_up_gc.pause_from_environment(os.environ)
frozen = start_up_gc.resume()
print(json.dumps({"after_import": after_import, "paused_again": again, "frozen": frozen,
                  "after_resume": gc.isenabled(), "freeze_count": gc.get_freeze_count(),
                  "second_resume": start_up_gc.resume()}))
"""


def probe(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", PROBE], env={"PATH": "/usr/bin:/bin", **env}, cwd=str(ROOT),
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def test_an_origin_process_starts_with_the_collector_paused_and_resume_freezes_start_up():
    # Given a server process's environment (the Web Adapter's port), When the module is imported
    outcome = probe({"AWS_LWA_PORT": "8080"})
    # Then the collector is off until resume, which freezes what start-up built and turns it on
    assert outcome["after_import"] is False and outcome["paused_again"] is False
    assert outcome["after_resume"] is True
    assert outcome["frozen"] >= 5000 and outcome["freeze_count"] >= outcome["frozen"]
    assert outcome["second_resume"] == 0  # once only


def test_any_other_process_keeps_its_collector_as_it_is():
    # Given no origin environment (a test run, the local runner, a tool importing the app)
    outcome = probe({})
    # Then importing changes nothing, and resume has nothing to undo
    assert outcome["after_import"] is True and outcome["frozen"] == 0 and outcome["freeze_count"] == 0
    assert outcome["after_resume"] is True


def test_a_collector_already_off_is_left_off():
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        # Given a process that turned its collector off itself, When the origin's start-up runs
        assert start_up_gc.pause_from_environment({"AWS_LAMBDA_FUNCTION_NAME": "acme-mcp-origin"}) is False
        # Then resume does not turn it on behind its back
        assert start_up_gc.resume() == 0 and not gc.isenabled()
    finally:
        if was:
            gc.enable()


@given(name=st.sampled_from([*start_up_gc.ORIGIN_MARKERS, "PORT", "AWS_REGION"]), value=st.text(max_size=10))
def test_a_server_process_is_one_lambda_or_the_web_adapter_started(name: str, value: str):
    expected = name in start_up_gc.ORIGIN_MARKERS and bool(value.strip())
    assert start_up_gc.origin_process({name: value}) is expected
    assert start_up_gc.origin_process({}) is False
