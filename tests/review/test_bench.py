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
    figures = {name: origin_bench.Figures([], [], {}, {}, warm_rounds_ms={"2026-07-28": rounds})
               for name, rounds in (("origin", origin), ("bare SDK", bare))}
    return figures["origin"].warm_round_ratio(figures["bare SDK"], "2026-07-28")


def cold_starts(seconds: list[float]) -> list[origin_bench.ColdStart]:
    return [origin_bench.ColdStart(s, 1.0, 1.0, 1.0) for s in seconds]


def origin_cold_start_ratio(origin: list[float], bare: list[float]) -> float:
    return origin_bench.Figures(cold_starts(origin), [], {}, {}).cold_round_ratio(
        origin_bench.Figures(cold_starts(bare), [], {}, {}))


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


def test_origin_bench_measures_snapstart_phases_and_the_key_set_comes_back_after_restore():
    from bench import origin_bench

    issuer = origin_bench.Issuer()
    try:
        with origin_bench.shipped_packages() as packages:
            origin, _ = origin_bench.targets(issuer, packages)
            fetches = len(issuer.jwks.fetches)
            init_s, before_ms, after_ms, first_over_warm = origin_bench.snapstart_phases(origin, issuer,
                                                                                          packages["snapstart"])
    finally:
        issuer.close()
    # One fetch at init, one by the restore hook, none by the requests after it.
    assert len(issuer.jwks.fetches) == fetches + 2
    assert min(init_s, before_ms, after_ms, first_over_warm) > 0


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


def test_the_origin_bench_runs_the_shipped_package_with_run_sh_s_command():
    from bench import origin_bench
    from components.lambda_package import source_entries
    from components.origin import RUN_SH, SERVER_PACKAGE

    # The flags are run.sh's own, less the port the bench picks.
    assert origin_bench.UVICORN_FLAGS[:2] == ("--host", "127.0.0.1")
    assert {"--http", "httptools", "--timeout-keep-alive", "75"} <= set(origin_bench.UVICORN_FLAGS)
    assert not any(flag.startswith("--port") for flag in origin_bench.UVICORN_FLAGS)
    assert origin_bench.run_sh_app(RUN_SH) == "mcp_server.app:app"
    with origin_bench.shipped_packages() as packages:
        root = packages["provisioned"]
        shipped = source_entries(SERVER_PACKAGE)
        # Every file the package ships is there byte for byte, with bytecode for its modules.
        assert all((root / name).read_bytes() == data for name, data in shipped.items())
        assert any(root.glob("mcp_server/__pycache__/app.*.pyc"))
        assert (packages["snapstart"] / "mcp_server" / "snapstart.py").exists()
        assert not (root / "mcp_server" / "snapstart.py").exists()
        assert origin_bench.run_sh_app((packages["snapstart"] / "run.sh").read_bytes()) == "mcp_server.snapstart:app"


def test_the_origin_bench_times_each_app_s_start_up_in_parts_and_adds_up_the_difference():
    from bench import cold_start_parts as parts_of
    from bench import origin_bench

    issuer = origin_bench.Issuer()
    try:
        with origin_bench.shipped_packages() as packages:
            origin, bare = origin_bench.targets(issuer, packages)
            # When each app's start-up is timed in parts, in a fresh interpreter from its task root
            origin_parts = origin_bench.start_parts(origin, "origin")
            bare_parts = origin_bench.start_parts(bare, "bare")
            cold = origin_bench.cold_start(origin, issuer.unseen(origin, 1))
    finally:
        issuer.close()
    # Then the origin reports every part, its in-process warm-up read back from its own log line
    assert set(origin_parts) == {parts_of.KEY_SET_DOWNLOAD, parts_of.SHARED, *parts_of.ORIGIN_ONLY_IMPORTS,
                                 parts_of.OWN_MODULES, parts_of.APP_BUILT, parts_of.LIFESPAN, parts_of.WARM_UP}
    assert set(bare_parts) == {parts_of.SHARED, parts_of.OWN_MODULES, parts_of.APP_BUILT, parts_of.LIFESPAN}
    assert all(ms > 0 for ms in [*origin_parts.values(), *bare_parts.values()])
    assert origin_parts[parts_of.WARM_UP] < origin_parts[parts_of.LIFESPAN]
    # ... and its cold start carries the readiness warm-up's time, from the origin's log line
    assert cold.readiness_warm_up_ms is not None and cold.readiness_warm_up_ms > 0
    # ... and the first request against the one warm request with an unseen token, which is also the nearest
    assert cold.first_over_early_unseen == pytest.approx(cold.first_over_unseen)
    # And the report's differences add up, the warm-up counted once (inside the lifespan)
    figures = {"origin": origin_bench.Figures([cold], [], {}, {}, [origin_parts]),
               "bare SDK": origin_bench.Figures([cold], [], {}, {}, [bare_parts])}
    table = origin_bench.start_parts_report(figures)
    expected = (sum(ms for name, ms in origin_parts.items() if name != parts_of.WARM_UP) - sum(bare_parts.values())
                + cold.readiness_warm_up_ms)
    summed = float(table.rsplit("**", 2)[-2])
    assert summed == pytest.approx(expected, abs=0.051)
    assert "imported" in origin_bench.cold_start_extras(figures)


def test_the_cold_start_goal_is_the_origin_as_deployed_reading_its_secret():
    # Given rounds where the origin as deployed (secret from Secrets Manager) starts 1.10x the
    # bare app and the origin with its secret in the environment 1.02x
    bare = [0.8, 0.9, 1.0, 0.85, 0.95]
    figures = {"bare SDK": origin_bench.Figures(cold_starts(bare), [], {}, {}),
               "origin": origin_bench.Figures(cold_starts([1.02 * b for b in bare]), [], {}, {}),
               origin_bench.FROM_SECRETS_MANAGER: origin_bench.Figures(cold_starts([1.10 * b for b in bare]), [], {}, {})}
    for name in ("origin", "bare SDK"):
        figures[name].in_process_us = {era: [1.0] for era in origin_bench.ERAS}
        figures[name].warm_rounds_ms = {era: [1.0] for era in origin_bench.ERAS}
    # Then the goal reads what ships, and says the other figure beside it
    cold = next(g for g in origin_bench.goals(figures) if g["goal"].startswith("cold start"))
    assert cold["measured"] == "1.10x (secret in the environment: 1.02x)" and not cold["met"]


def test_rounds_of_three_paths_give_each_path_every_place_in_turn():
    from bench.ratios import round_orders

    orders = round_orders(["a", "b", "c"], 12)
    # every order of the three, each twice in twelve rounds, so each path stands first, second and last alike
    assert sorted(set(orders)) == sorted(itertools.permutations("abc")) and len(orders) == 12
    for place in range(3):
        assert {name: sum(order[place] == name for order in orders) for name in "abc"} == {"a": 4, "b": 4, "c": 4}


def test_the_probe_benchmarks_first_secret_reads_run_both_ways_against_the_shipped_zip():
    from bench import probe_bench

    # Given moto holding the probe's two secrets and the probe's zip, When each way reads them once
    figures = probe_bench.first_reads(1)
    # Then both ran to the end (a failed read fails its interpreter, and this call) and were timed
    assert set(figures) == set(probe_bench.SECRET_READS) and all(0 < seconds < 60 for seconds in figures.values())


def test_a_paced_request_waits_its_pause_first_and_its_time_leaves_the_pause_out():
    sent_at: list[float] = []

    def send() -> str:
        sent_at.append(time.perf_counter())
        time.sleep(0.01)
        return "answer"

    # When a request is sent paced
    began = time.perf_counter()
    exchange = origin_bench.paced(send, pause_s=0.03)
    # Then it went out after the pause, which is reported apart from the request's own time
    assert exchange.answer == "answer"
    assert sent_at[0] - began >= 0.03
    assert exchange.paused_s >= 0.03
    assert exchange.seconds >= 0.01
    assert exchange.paused_s + exchange.seconds <= time.perf_counter() - began
    assert 0 <= exchange.cpu_seconds < exchange.seconds
    # ... and the first-request comparison paces every request by default
    assert origin_bench.REQUEST_PAUSE_S > 0


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
