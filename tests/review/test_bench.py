"""The benchmark runner (``python -m bench``) and the program benchmark: every module is
run, a failing one is reported and fails the command, a missing one is listed, and the
program benchmark's figures are ratios and a fit that recover a straight line.

(These live with the review tests because the review helper owns the runner.)"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bench.__main__ as runner
from bench import origin_bench, program_bench
from bench.local_bench import Figures, round_ratio
from bench.program_bench import linear_fit


@given(
    intercept=st.floats(-100, 100),
    # Slopes so small that the y values differ only in their last bits are noise, not lines.
    slope=st.one_of(st.just(0.0), st.floats(1e-3, 100), st.floats(-100, -1e-3)),
    xs=st.lists(st.integers(0, 1000), min_size=2, max_size=8, unique=True),
)
def test_linear_fit_recovers_a_straight_line(intercept: float, slope: float, xs: list[int]):
    fit = linear_fit(xs, [intercept + slope * x for x in xs])
    assert fit.slope == pytest.approx(slope, abs=1e-6)
    assert fit.intercept == pytest.approx(intercept, abs=1e-5)
    assert fit.r_squared == pytest.approx(1.0, abs=1e-6)


def test_linear_fit_reports_a_poor_fit_for_a_curve():
    xs = [1, 4, 8, 17]
    assert linear_fit(xs, [x**3 for x in xs]).r_squared < 0.95
    with pytest.raises(ValueError):
        linear_fit([3, 3], [1, 2])


def local_edge_sequential_ratio(edge: list[float], origin: list[float]) -> float:
    return round_ratio(Figures(round_medians={"edge": edge, "origin": origin}))


def origin_loopback_ratio(origin: list[float], bare: list[float]) -> float:
    rounds = origin_bench.Rounds()
    for o, b in zip(origin, bare, strict=True):
        rounds.add("origin", [o])
        rounds.add("bare", [b])
    return rounds.ratio("origin", "bare")


def origin_cold_start_ratio(origin: list[float], bare: list[float]) -> float:
    return figures_with(cold={origin_bench.DEMO: origin, origin_bench.BARE: bare}).cold_ratio()


def figures_with(cold: dict[str, list[float]], warm_ratio: float = 1.0) -> origin_bench.Figures:
    warm = origin_bench.Rounds()
    for era in origin_bench.ERAS:
        warm.add(origin_bench.key(origin_bench.DEMO, era), [warm_ratio])
        warm.add(origin_bench.key(origin_bench.BARE, era), [1.0])
    return origin_bench.Figures(cold, warm, origin_bench.UrlFigures(origin_bench.Rounds(), [], 403))


@pytest.mark.parametrize("figure", [local_edge_sequential_ratio, origin_loopback_ratio, origin_cold_start_ratio])
@given(
    baseline=st.lists(st.floats(0.5, 5), min_size=5, max_size=40),
    ratio=st.floats(0.8, 2.0),
    burst=st.floats(2, 50),
    data=st.data(),
)
def test_a_round_the_machine_slowed_does_not_move_a_figure_measured_in_rounds(
        figure: Any, baseline: list[float], ratio: float, burst: float, data: st.DataObject):
    # Given rounds whose measured figure (the local edge's median; the origin's over
    # loopback; the origin's cold start) is `ratio` times the same round's baseline
    # figure (the origin's; the bare app's),
    # whatever the machine's load did to the round (the baseline medians vary freely),
    measured = [ratio * b for b in baseline]
    # and one round where a burst of other work slowed only the measured turn,
    measured[data.draw(st.integers(0, len(baseline) - 1))] *= burst
    # the figure is still `ratio`: a median over rounds of per-round ratios.
    assert figure(measured, baseline) == pytest.approx(ratio)


def test_program_benchmark_reports_ratios_to_one_region():
    result = program_bench.run(repeats=1, counts=(1, 2))
    data = result["data"]
    assert data["ratios_to_1_region"][1] == 1.0
    assert data["counts"][1]["resources"] > data["counts"][0]["resources"]
    assert "| 2 |" in result["markdown"] and "per added region" in result["markdown"]
    assert data["nonlinear_types"] == {}  # 1 and 2 regions: two points always make a line


def test_types_that_grow_faster_than_regions_are_named():
    def figures(regions: int, schedules: int) -> program_bench.CountFigures:
        return program_bench.CountFigures(regions, 10 * regions + schedules, [1.0],
                                          {"aws:sqs/queue:Queue": 10 * regions, "aws:scheduler/schedule:Schedule": schedules})

    rows = [figures(n, 2 * n * n) for n in (1, 4, 8, 17)]
    assert program_bench.nonlinear_types(rows) == {"aws:scheduler/schedule:Schedule": [2, 32, 128, 578]}
    assert "grow faster than the number of regions" in program_bench.report(rows)


@pytest.fixture
def fake_benches(tmp_path: Path, monkeypatch):
    package = tmp_path / "fakebench"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "good_bench.py").write_text(textwrap.dedent('''
        """Benchmark: something fast against a baseline.

            .venv/bin/python -m fakebench.good_bench

        Both are timed in the same run.
        """
        def run(quick=False):
            return {"title": "Good", "markdown": "| ratio |\\n|---|\\n| 1.50 |" + (" quick" if quick else "")}
    '''))
    (package / "printing_bench.py").write_text(textwrap.dedent('''
        """Benchmark: prints its table."""
        import sys
        def main(argv=None):
            assert argv == [] and sys.argv == ["fakebench.printing_bench"]
            print("| a | b |")
    '''))
    (package / "broken_bench.py").write_text(textwrap.dedent('''
        """Benchmark: fails."""
        def main(argv=None):
            print("partial output")
            raise RuntimeError("server did not start")
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield package
    for name in [m for m in sys.modules if m.startswith("fakebench")]:
        del sys.modules[name]


def test_runner_discovers_expected_benchmarks_first(fake_benches: Path):
    (fake_benches / "program_bench.py").write_text("")
    assert runner.discover(fake_benches) == ["program", "broken", "good", "printing"]


def test_runner_uses_run_or_main_and_keeps_the_method(fake_benches: Path):
    good = runner.run_bench("good", quick=True, package="fakebench")
    assert good.status == "ok" and good.title == "Good" and good.body.endswith("quick")
    assert good.method == "Both are timed in the same run."
    printing = runner.run_bench("printing", package="fakebench")
    assert printing.status == "ok" and printing.body == "| a | b |"


def test_a_failing_benchmark_is_reported_not_hidden(fake_benches: Path):
    broken = runner.run_bench("broken", package="fakebench")
    assert broken.status == "failed" and "server did not start" in broken.error
    assert broken.body == "partial output\n"
    missing = runner.Outcome("edge", "missing")
    document = runner.render_document([broken, missing], datetime.datetime(2026, 1, 1), "python -m bench")
    assert "**FAILED** in this run" in document and "server did not start" in document
    assert "`bench/edge_bench.py` is not in this checkout" in document
    assert "## Machine" in document and "| cores available |" in document


def test_runner_exits_1_when_a_benchmark_fails_and_still_writes_the_document(tmp_path: Path, monkeypatch):
    outcomes = {"program": runner.Outcome("program", "ok", 1.0, "Program", "", "| 1.00 |"),
                "origin": runner.Outcome("origin", "failed", 1.0, "Origin", "", "", "Traceback: boom")}
    monkeypatch.setattr(runner, "discover", lambda: ["origin", "program"])
    monkeypatch.setattr(runner, "run_bench", lambda name, quick, echo=None: outcomes[name])
    output = tmp_path / "benchmarks.md"
    assert runner.main(["--output", str(output)]) == 1
    text = output.read_text()
    assert "Traceback: boom" in text and "| 1.00 |" in text
    assert "`bench/probe_bench.py` is not in this checkout" in text


def test_runner_refuses_an_unknown_only_name(monkeypatch):
    monkeypatch.setattr(runner, "discover", lambda: ["program"])
    with pytest.raises(SystemExit):
        runner.main(["--only", "nope", "--no-write"])


def test_the_document_lists_every_goal_met_or_not_with_the_machines_load():
    met = {"goal": "cold start <= 1.05x the bare SDK app", "measured": "1.03x", "met": True, "note": ""}
    missed = {"goal": "local edge <= 1.6x the origin", "measured": "1.90x", "met": False, "note": "over by 0.30"}
    outcomes = [runner.Outcome("origin", "ok", 1.0, "Origin", "", "| x |", goals=[met]),
                runner.Outcome("local", "ok", 1.0, "Local", "", "| y |", goals=[missed])]
    document = runner.render_document(outcomes, datetime.datetime(2026, 1, 1), "python -m bench",
                                      ("2.00, 1.00, 0.50", "3.00, 2.00, 1.00"))
    assert "| cold start <= 1.05x the bare SDK app (`bench/origin_bench.py`) | 1.03x | **yes** |  |" in document
    assert "| local edge <= 1.6x the origin (`bench/local_bench.py`) | 1.90x | **no** | over by 0.30 |" in document
    assert "| load average (1, 5, 15 min) at start / at end | 2.00, 1.00, 0.50 / 3.00, 2.00, 1.00 |" in document
    assert document.index("## Goals") < document.index("## Origin")


def test_the_bare_app_starts_with_the_demo_s_own_command_with_only_the_app_swapped():
    from stack_config.keys import DEMO_SERVER_COMMAND

    command = origin_bench.bare_command(DEMO_SERVER_COMMAND)
    # Same interpreter invocation and uvicorn flags, the bare SDK app's factory in place of the demo's app
    assert command == DEMO_SERVER_COMMAND.replace("demo_server.app:app", "--factory bench.bare_sdk:bare_sdk_app")
    assert "demo_server" not in command and "--http httptools" in command and "$PORT" in command
    # ... and a command that no longer names the demo's app is refused, not measured as something else
    with pytest.raises(ValueError, match="demo_server.app:app"):
        origin_bench.bare_command("python3 -m uvicorn other:app --port $PORT")


def test_the_origin_bench_starts_the_demo_from_its_package_through_the_generated_run_sh():
    from local.origins import DEFAULT_SERVER, run_sh

    with origin_bench.shipped_servers() as servers:
        demo, bare = servers.demo(8123), servers.bare(8124)
        # The demo is the package's own run.sh, as the local topology starts it, the port in its environment
        assert demo.argv == (str(servers.package_dir / "run.sh"),)
        assert (servers.package_dir / "run.sh").read_bytes() == run_sh(DEFAULT_SERVER.command, DEFAULT_SERVER.runtime)
        assert demo.env["PORT"] == "8123" and demo.env["LAMBDA_TASK_ROOT"] == str(servers.package_dir)
        # The bare app runs from the same package (its dependencies first), through a run.sh generated the same way
        assert bare.env["LAMBDA_TASK_ROOT"] == str(servers.package_dir) and bare.env["PORT"] == "8124"
        assert Path(bare.argv[0]).read_bytes() == run_sh(origin_bench.bare_command(), DEFAULT_SERVER.runtime)


@pytest.mark.parametrize("era", list(origin_bench.ERAS))
def test_the_bench_s_signed_tools_list_is_one_the_local_function_url_lets_in(era: str):
    from botocore.credentials import Credentials

    from local.aws.function_url import SignatureRefusedError, SignedRequest, verify
    from local.plan import FAKE_AWS_CREDENTIALS

    credentials = Credentials(FAKE_AWS_CREDENTIALS["AWS_ACCESS_KEY_ID"], FAKE_AWS_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                              FAKE_AWS_CREDENTIALS["AWS_SESSION_TOKEN"])

    def request(body: bytes, headers: dict[str, str]) -> SignedRequest:
        return SignedRequest("POST", origin_bench.MCP_PATH, "", [("host", "127.0.0.1:9000"), *headers.items()], body)

    # Given a tools/list signed as the bench sends it (the gate's signer, the local fake credentials)
    body, headers = origin_bench.signed_tools_list(era, 9000)
    assert headers[origin_bench.AUTHORIZATION_SOURCE] == origin_bench.BEARER
    # Then the Function URL's own check lets it in
    verify(request(body, headers), region=origin_bench.REGION, credentials=credentials)
    # ... and refuses the direct path's request (unsigned) and the signed one with its body changed
    with pytest.raises(SignatureRefusedError):
        verify(request(*origin_bench.direct_tools_list(era)), region=origin_bench.REGION, credentials=credentials)
    with pytest.raises(SignatureRefusedError):
        verify(request(body + b" ", headers), region=origin_bench.REGION, credentials=credentials)


def test_the_origin_bench_goals_judge_the_demo_against_the_bare_app_in_the_same_rounds():
    bare = [0.8, 0.9, 1.0, 0.85, 0.95]
    # Given rounds where the demo starts 1.10x the bare app and answers warm 1.02x
    figures = figures_with({origin_bench.DEMO: [1.10 * b for b in bare], origin_bench.BARE: bare}, warm_ratio=1.02)
    cold, warm = (next(g for g in origin_bench.goals(figures) if what in g["goal"])
                  for what in ("cold start", "warm tools/list"))
    # Then the cold start misses its goal by what it measured, and the warm one is met in both eras
    assert cold["measured"] == "1.10x" and not cold["met"] and cold["note"].startswith("over by 0.05")
    assert warm["met"] and warm["measured"] == ", ".join(f"{era}: 1.02x" for era in origin_bench.ERAS)


def test_the_origin_bench_runs_end_to_end_with_its_smallest_settings():
    # When the bench runs once with one round of two requests per path
    result = origin_bench.run(cold_runs=1, requests=2, rounds=1)
    figures = result["figures"]
    # Then every path was measured, an unsigned request was refused and the signer was timed
    assert all(len(starts) == 1 and starts[0] > 0 for starts in figures["cold_s"].values())
    assert figures["url"]["unsigned_status"] == 403 and len(figures["url"]["sign_us"]) == 2 * len(origin_bench.ERAS)
    for path in (origin_bench.DIRECT, origin_bench.VIA_URL):
        assert all(len(figures["url"]["rounds"]["samples"][origin_bench.key(path, era)]) == 2
                   for era in origin_bench.ERAS)
    assert "Function URL / direct" in result["markdown"] and len(result["goals"]) == 2


def test_rounds_of_three_paths_give_each_path_every_place_in_turn():
    from bench.ratios import round_orders

    orders = round_orders(["a", "b", "c"], 12)
    # every order of the three, each twice in twelve rounds, so each path stands first, second and last alike
    assert sorted(set(orders)) == sorted(itertools.permutations("abc")) and len(orders) == 12
    for place in range(3):
        assert {name: sum(order[place] == name for order in orders) for name in "abc"} == {"a": 4, "b": 4, "c": 4}


def test_the_probe_benchmarks_first_secret_reads_run_every_way_against_the_shipped_zip():
    from bench import probe_bench

    # Given moto holding the probe's two secrets and the probe's zip, When each way reads them once
    figures = probe_bench.first_reads(1)
    # Then both ran to the end (a failed read fails its interpreter, and this call) and were timed
    assert set(figures) == set(probe_bench.SECRET_READS) and all(0 < seconds < 60 for seconds in figures.values())


def test_a_process_s_cpu_time_is_read_from_proc_and_grows_with_its_work():
    from bench import local_bench

    if local_bench.process_cpu_s(os.getpid()) is None:
        pytest.skip("no /proc here")
    # Given this process's CPU time, When it works for a while
    before = local_bench.process_cpu_s(os.getpid())
    deadline = time.thread_time() + 0.05
    while time.thread_time() < deadline:
        pass
    after = local_bench.process_cpu_s(os.getpid())
    # Then the reading grew, and a process that is gone reads as None
    assert before is not None and after is not None and after - before >= 0.03
    assert local_bench.process_cpu_s(2**22 + 12345) is None
    assert local_bench.cpu_now({"gone": 2**22 + 12345}) is None


def test_the_local_bench_reports_each_process_s_cpu_per_request_for_both_paths():
    from bench import local_bench

    # Given 40 sequential requests per path and the CPU each process spent on them
    figures = Figures(sequential_ms={"edge": [2.0], "origin": [1.0]}, round_medians={"edge": [2.0], "origin": [1.0]},
                      load={p: {"per_second": 100.0, "requests": 10.0} for p in ("edge", "origin")},
                      cpu_requests={"edge": 40, "origin": 40},
                      cpu_s={"edge": {"client": 0.02, "edge": 0.018, "origin": 0.028},
                             "origin": {"client": 0.016, "edge": 0.0, "origin": 0.014}})
    # When the run is summarised
    result = local_bench.summary(figures)
    # Then the figures are per request, in ms, and the report and the goal's note say them
    assert result["cpu_ms_per_request"]["edge"] == pytest.approx({"client": 0.5, "edge": 0.45, "origin": 0.7})
    report = local_bench.report(result, argparse.Namespace(requests=40, round_size=20, concurrency=1))
    assert "| edge | 0.500 | 0.450 | 0.700 |" in report and "| origin | 0.400 | 0.000 | 0.350 |" in report
    note = local_bench.goals(result)[0]["note"]
    assert "cost the origin 0.70 ms of CPU through the edge against 0.35 ms straight" in note
    # ... and a run that could not read them says nothing about them
    assert local_bench.cpu_sentence({}) == "" and "CPU time each process" not in local_bench.report(
        {**result, "cpu_ms_per_request": {}}, argparse.Namespace(requests=40, round_size=20, concurrency=1))


def _viewer_figures(njs_vs_minimal: float | None, code_bytes: int) -> dict:
    from bench import edge_bench

    engines = [] if njs_vs_minimal is None else [{"engine": edge_bench.NJS.name, "rows": [
        {"case": "valid token (passes)", "vs_minimal": njs_vs_minimal}, {"case": "expired token (401)", "vs_minimal": 1.0}]}]
    return {"engines": engines, "skipped": {} if engines else {edge_bench.NJS.name: "njs is not installed"},
            "code_bytes": code_bytes, "limit_bytes": 10240, "token_chars": 877}


def test_edge_bench_goals_judge_njs_against_the_minimal_check_and_the_rendered_size_against_4_kb():
    from bench import edge_bench

    # Given the function's figures within both goals, then over both
    within = edge_bench.goals(_viewer_figures(7.3, 4047))
    over = edge_bench.goals(_viewer_figures(8.4, 4097))
    # Then each goal reads the valid token's njs ratio and the rendered size
    assert [(g["measured"], g["met"]) for g in within] == [("7.3x", True), ("4047 bytes", True)]
    assert [(g["measured"], g["met"]) for g in over] == [("8.4x", False), ("4097 bytes", False)]
    assert "877 characters" in within[0]["goal"]


def test_edge_bench_goal_is_not_met_when_njs_did_not_run():
    from bench import edge_bench

    [njs, size] = edge_bench.goals(_viewer_figures(None, 4000))
    assert (njs["measured"], njs["met"]) == ("not run", False)
    assert "njs is not installed" in njs["note"]
    assert size["met"]


def test_the_local_bench_reads_the_edge_against_a_bare_relay_in_the_same_rounds():
    from bench import local_bench

    # Given rounds in which the relay took 1.2x the origin and the edge 1.8x
    figures = Figures(sequential_ms={"edge": [1.8, 3.6], "origin": [1.0, 2.0], "relay": [1.2, 2.4]},
                      round_medians={"edge": [1.8, 3.6], "origin": [1.0, 2.0], "relay": [1.2, 2.4]},
                      load={p: {"per_second": 100.0, "requests": 10.0} for p in ("edge", "origin")})
    # When the run is summarised
    result = local_bench.summary(figures)
    # Then the relay's figures are ratios of the same rounds, and the report and the goal's note say them
    assert result["relay"]["over_origin"] == pytest.approx(1.2)
    assert result["relay"]["edge_over_relay"] == pytest.approx(1.5)
    sentence = "read 1.20x the origin in the same rounds"
    assert sentence in local_bench.report(result, argparse.Namespace(requests=40, round_size=20, concurrency=1))
    assert sentence in local_bench.goals(result)[0]["note"] and "the edge read 1.50x the relay" in \
        local_bench.goals(result)[0]["note"]
    # ... and a run without the relay path says nothing about it
    del figures.round_medians["relay"]
    assert "relay" not in local_bench.summary(figures)


def test_the_bare_relay_moves_each_request_and_answer_both_ways(tmp_path: Path):
    import http.server
    import socketserver
    import subprocess
    import threading

    import httpx

    from bench.processes import terminate, wait_for_port
    from local.supervisor import free_ports

    class Echo(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: several requests on one relayed connection

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            answer = b"echo:" + body + b":" + self.headers["host"].encode()
            self.send_response(200)
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    # Given a loopback server and the relay in front of it
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = free_ports(1)[0]
    relay = subprocess.Popen([sys.executable, "-m", "bench.relay", "--port", str(port), "--to",
                              f"127.0.0.1:{server.server_address[1]}"], cwd=Path(__file__).resolve().parents[2])
    try:
        wait_for_port(port, relay)
        # When requests are sent through it, on one connection and on fresh ones
        with httpx.Client(trust_env=False, timeout=10) as client:
            answers = [client.post(f"http://127.0.0.1:{port}/", content=f"r{i}".encode(),
                                   headers={"host": "origin.example"}).text for i in range(5)]
        fresh = [httpx.post(f"http://127.0.0.1:{port}/", content=b"x" * 100_000, trust_env=False, timeout=10)
                 for _ in range(3)]
        # Then each answer is the server's, bytes unchanged both ways (the Host header too)
        assert answers == [f"echo:r{i}:origin.example" for i in range(5)]
        assert all(r.status_code == 200 and r.content.startswith(b"echo:" + b"x" * 100_000) for r in fresh)
    finally:
        terminate(relay)
        server.shutdown()
        server.server_close()


def test_the_local_bench_stops_at_a_refused_request_instead_of_timing_it():
    # Given a path that answers its first tools/list and then refuses (as a rate limit does)
    import httpx

    from bench.local_bench import FailedRequestError, Target, turn

    answers = iter([200, 429])

    def reply(request: httpx.Request) -> httpx.Response:
        status = next(answers, 429)
        body = {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}} if status == 200 else {"error": "rate limited"}
        return httpx.Response(status, json=body)

    client = httpx.Client(transport=httpx.MockTransport(reply))
    # When a measured turn runs on it, then the bench stops and says what came back
    with pytest.raises(FailedRequestError, match="edge answered 429"):
        turn(client, Target("edge", "http://edge.invalid/mcp", {}), round_size=3)



def test_the_gate_bench_goals_judge_the_gate_against_its_floor_and_name_a_first_calls_cost():
    from bench.edge_gate_bench import goals

    run = {"per_request_ratio_gate_vs_floor": 1.4, "per_request_ratio_gate_cold_tokens_vs_floor": 1.8,
           "cold_import_ratio_gate_vs_floor": 1.25}
    per_request, cold_import = goals(run)
    assert (per_request["met"], per_request["measured"]) == (True, "1.40x")
    assert "1.80x, over" in per_request["note"]
    assert (cold_import["met"], cold_import["measured"]) == (False, "1.25x")
    within = goals({**run, "per_request_ratio_gate_cold_tokens_vs_floor": 1.5, "cold_import_ratio_gate_vs_floor": 1.2})
    assert within[0]["note"].endswith("1.50x") and within[1]["met"]
