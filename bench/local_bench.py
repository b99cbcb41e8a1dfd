"""Benchmark: the local edge proxy against the origin it forwards to, measured in the same run.

    .venv/bin/python -m bench.local_bench [--requests 600] [--round-size 20] [--concurrency 16]
                                          [--load-requests 1500] [--time-limit 30] [--quick] [--json]

The prod stack's local topology is planned as ``scripts/run-local`` plans it, and
four of its processes are started: the dev issuer, the us-east-1 origin (the server's
package through its run.sh), that origin's local Function URL (SigV4 verified) and the
edge proxy (the program's CloudFront Function in QuickJS, the shipped origin-request
function verifying the token and signing, streaming forwarding). Every request carries a
token from the dev issuer; requests straight to the origin carry nothing else (the origin
process checks no signature: its Function URL does). The edge requests carry ``CloudFront-Viewer-Country: US`` so the
router picks that same origin: the difference between the two paths is the edge.

- sequential ``tools/list`` (2026-07-28, plain JSON) over one keep-alive connection per
  path, ``--requests`` per path in rounds of ``--round-size``, through three paths: the
  edge, straight to the origin, and a bare relay in front of the same origin
  (``bench/relay.py``: a second process that only moves the bytes, no HTTP parsing, no
  function, no router; the floor of any second process on the path, on this machine).
  Each round sends to every path in turn, the rounds taking every order of the three
  in turn (so a drift of the machine's load, and where a path stands in its round,
  weigh on all alike), and the first ``WARM_UP`` requests of each path's turn are sent
  but not measured (the first request after another path's turn finds caches cold).
  The ratio is the median over rounds of the round's edge median over the same round's
  origin median (the same statistic for every path; a ratio per round cancels what
  changes between rounds, such as another process busy on this shared machine, which
  pooled samples would mix in); the edge and origin columns are the medians and p95s
  of all their measured samples. The relay's figures (relay / origin, edge / relay) are
  the same statistic;
- concurrent load: ``--concurrency`` clients sending ``--load-requests`` ``tools/list``
  requests in total (stopped at ``--time-limit`` seconds), and throughput;
- SSE: ``tools/call countdown`` with progress (5 steps, no wait between them), time to
  the first progress event and to the end of the stream, median of ``--requests / 20``;
  every stream must carry the 5 progress events and the result.

Every request must be answered with what it asked for (any other status, or a transport
error, stops the benchmark with what came back: the time of a refusal is no figure of
the path). The topology is the prod stack's with its per-token rate limit raised
(``BENCH_CONFIG``): one token sends more requests in a window than prod lets it.

Figures are ratios edge / origin; absolute numbers are for context only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from bench.processes import terminate, wait_for_port
from bench.ratios import median_of_round_ratios, round_orders
from devkit.mock_program import run_program
from edge.firewall_rules import RATE_LIMIT_RANGE
from local.client import token_for
from local.plan import LocalPlan, Options, Ports, build_plan
from local.supervisor import Supervisor, free_ports, stat_fields
from local.topology import Topology
from stack_config.loading import load_from_stack_file

REGION, COUNTRY = "us-east-1", "US"
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "local-bench", "version": "1"}}
PROGRESS_STEPS = 5
SEQUENTIAL_ROW = "sequential tools/list, median (ms)"
EDGE, ORIGIN, RELAY = "edge", "origin", "relay"
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Target:
    name: str
    url: str
    headers: dict[str, str]


@dataclass
class Figures:
    sequential_ms: dict[str, list[float]] = field(default_factory=dict)
    # The median of each round, per path, in round order (``sequential``).
    round_medians: dict[str, list[float]] = field(default_factory=dict)
    load: dict[str, dict[str, float]] = field(default_factory=dict)
    sse_first_ms: dict[str, list[float]] = field(default_factory=dict)
    sse_total_ms: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    # Sequential requests per path, and the CPU seconds each process spent on them (the client's
    # own thread, the edge's and the origin's processes), where the system tells (``process_cpu_s``).
    cpu_requests: dict[str, int] = field(default_factory=dict)
    cpu_s: dict[str, dict[str, float]] = field(default_factory=dict)


def _body(method: str, request_id: int, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**(params or {}), "_meta": dict(META)}}


def _headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
               "mcp-protocol-version": MODERN, "mcp-method": method}
    if name:
        headers["mcp-name"] = name
    return headers


# The prod stack with its per-token and every-request per-IP limits at WAF's most: the bench
# sends a few thousand requests with one token from one address within one window, which prod's
# limits answer with 429 (the web ACL is still evaluated on every request, as on AWS).
BENCH_CONFIG = {"wafTokenLimit": str(RATE_LIMIT_RANGE[1]), "wafIpLimit": str(RATE_LIMIT_RANGE[1])}


def start(run_dir: Path) -> tuple[Supervisor, LocalPlan]:
    ports = Ports.free(load_from_stack_file("prod").regions)
    plan = build_plan(Options(stack="prod", ports=ports, run_dir=run_dir),
                      run=run_program("prod", config_overrides=BENCH_CONFIG))
    topology = Topology(plan)
    topology.prepare()
    wanted = {"issuer", f"origin-{REGION}", f"function-url-{REGION}", "edge"}
    topology.supervisor.start_all([s for s in topology.front_services() if s.name in wanted])
    return topology.supervisor, plan


def targets(plan: LocalPlan, token: str) -> list[Target]:
    auth = {"authorization": f"Bearer {token}"}
    origin = next(o for o in plan.origins if o.region == REGION)
    return [
        Target(EDGE, plan.mcp_url, {**auth, "cloudfront-viewer-country": COUNTRY}),
        Target(ORIGIN, origin.url + plan.mcp_path, auth),
    ]


@contextmanager
def relay(origin: Target) -> Iterator[tuple[Target, int]]:
    """``bench/relay.py`` in front of ``origin``: its path (the origin's headers, the Host the
    origin's own, as the edge's router sets it) and its pid."""
    parts = urlsplit(origin.url)
    netloc, path = parts.netloc, parts.path
    port = free_ports(1)[0]
    process = subprocess.Popen([sys.executable, "-m", "bench.relay", "--port", str(port), "--to", netloc],
                               cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        wait_for_port(port, process)
        yield Target(RELAY, f"http://127.0.0.1:{port}{path}", {**origin.headers, "host": netloc}), process.pid
    finally:
        terminate(process)


def _ok_tools(response: httpx.Response) -> bool:
    return response.status_code == 200 and "tools" in response.json().get("result", {})


def _answered(target: Target, response: httpx.Response) -> str:
    return f"{target.name} answered {response.status_code}: {response.text[:300]}"


class FailedRequestError(RuntimeError):
    """A measured request was not answered with what it asked for: the time of a refusal or
    an error is no figure of the path, so the benchmark stops and says what came back."""


def wait_until_served(client: httpx.Client, target: Target, timeout_s: float = 15.0) -> None:
    """Until ``target`` answers a ``tools/list``: the topology starts its services together,
    so an origin up before the issuer has no key set yet and answers 503 during its
    fetch backoff (a second); measuring starts once it serves."""
    deadline = time.monotonic() + timeout_s
    while not _ok_tools(response := client.post(target.url, json=_body("tools/list", 0),
                                                headers=_headers("tools/list"))):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{target.name} answers {response.status_code}: {response.text[:300]}")
        time.sleep(0.1)


ROUND_SIZE = 20  # measured sequential requests per path and round
WARM_UP = 2  # requests per path at the start of each of its turns, sent but not measured


def turn(client: httpx.Client, target: Target, round_size: int) -> list[float]:
    """One path's turn in a round: ``WARM_UP`` sequential ``tools/list`` sent but not measured,
    then ``round_size`` measured; their times in ms (``FailedRequestError`` if any was not
    answered with the list)."""
    measured: list[float] = []
    for i in range(WARM_UP + round_size):
        began = time.perf_counter()
        response = client.post(target.url, json=_body("tools/list", i), headers=_headers("tools/list"))
        if i >= WARM_UP:
            measured.append((time.perf_counter() - began) * 1000)
        if not _ok_tools(response):
            raise FailedRequestError(f"sequential tools/list: {_answered(target, response)}")
    return measured


CLIENT = "client"


def process_cpu_s(pid: int) -> float | None:
    """The CPU seconds (user and system) process ``pid`` has used, from /proc; None where
    there is none (or the process is gone)."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime and stime (stat's 14th and 15th)


def cpu_now(pids: dict[str, int]) -> dict[str, float] | None:
    """Each named process's CPU seconds and the calling thread's (``CLIENT``), or None when
    a process's cannot be read."""
    readings = {name: process_cpu_s(pid) for name, pid in pids.items()}
    if any(v is None for v in readings.values()):
        return None
    return {CLIENT: time.thread_time(), **{k: v for k, v in readings.items() if v is not None}}


def sequential(figures: Figures, all_targets: list[Target], requests: int, round_size: int = ROUND_SIZE,
               pids: dict[str, int] | None = None) -> None:
    """``pids``: the processes (name -> pid) whose CPU time is counted per path."""
    # A whole number of every order of the paths (``round_orders``), so each stands in every place alike.
    orders = math.factorial(len(all_targets))
    rounds = -(-max(requests // round_size, 3) // orders) * orders
    clients = {t.name: httpx.Client(headers=t.headers, timeout=30, trust_env=False) for t in all_targets}
    try:
        for t in all_targets:  # warm-up: connection, JWKS fetch, first-call paths
            wait_until_served(clients[t.name], t)
        by_name = {t.name: t for t in all_targets}
        for order in round_orders(list(by_name), rounds):
            for t in (by_name[name] for name in order):
                before = cpu_now(pids or {})
                measured = turn(clients[t.name], t, round_size)
                after = cpu_now(pids or {})
                if before is not None and after is not None:
                    spent = figures.cpu_s.setdefault(t.name, {})
                    for name in after:
                        spent[name] = spent.get(name, 0.0) + after[name] - before[name]
                    figures.cpu_requests[t.name] = figures.cpu_requests.get(t.name, 0) + WARM_UP + round_size
                figures.sequential_ms.setdefault(t.name, []).extend(measured)
                figures.round_medians.setdefault(t.name, []).append(statistics.median(measured))
    finally:
        for client in clients.values():
            client.close()


def round_ratio(figures: Figures, measured: str = EDGE, baseline: str = ORIGIN) -> float:
    """The median over rounds of ``measured`` / ``baseline`` (edge / origin), each the round's median."""
    return median_of_round_ratios(figures.round_medians[measured], figures.round_medians[baseline])


async def _load(target: Target, concurrency: int, total: int, time_limit_s: float) -> dict[str, float]:
    sent = 0
    failures: list[str] = []
    deadline = time.perf_counter() + time_limit_s
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(headers=target.headers, timeout=60, limits=limits, trust_env=False) as client:

        async def one_client() -> None:
            nonlocal sent
            while sent < total and time.perf_counter() < deadline:
                sent += 1
                try:
                    response = await client.post(target.url, json=_body("tools/list", sent),
                                                 headers=_headers("tools/list"))
                    if not _ok_tools(response):
                        failures.append(_answered(target, response))
                except httpx.HTTPError as exc:
                    failures.append(f"{target.name}: {type(exc).__name__}: {exc}")

        began = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(concurrency)))
        elapsed = time.perf_counter() - began
    if failures:
        raise FailedRequestError(f"{len(failures)} of {sent} concurrent tools/list failed, the first: {failures[0]}")
    return {"requests": sent, "errors": len(failures), "seconds": elapsed, "per_second": sent / elapsed}


def load(figures: Figures, all_targets: list[Target], concurrency: int, total: int, time_limit_s: float) -> None:
    for t in all_targets:
        figures.load[t.name] = asyncio.run(_load(t, concurrency, total, time_limit_s))
        figures.errors[t.name] = figures.errors.get(t.name, 0) + int(figures.load[t.name]["errors"])


def sse(figures: Figures, all_targets: list[Target], streams: int) -> None:
    params = {"name": "countdown", "arguments": {"steps": PROGRESS_STEPS, "interval_s": 0.0}}
    for i in range(streams):
        for t in all_targets:
            body = _body("tools/call", i, params)
            body["params"]["_meta"]["progressToken"] = f"p{i}"
            began = time.perf_counter()
            first: float | None = None
            progress = 0
            done = False
            with httpx.stream("POST", t.url, json=body, headers={**t.headers, **_headers("tools/call", "countdown")},
                              timeout=30, trust_env=False) as response:
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        message = json.loads(line[5:])
                        if message.get("method") == "notifications/progress":
                            progress += 1
                            first = first if first is not None else time.perf_counter()
                        elif message.get("id") == i and "result" in message:
                            done = True
            total = time.perf_counter()
            if response.status_code != 200 or progress != PROGRESS_STEPS or not done or first is None:
                raise FailedRequestError(f"streamed tools/call: {t.name} answered {response.status_code} with "
                                         f"{progress} of {PROGRESS_STEPS} progress events and "
                                         f"{'a' if done else 'no'} result")
            figures.sse_first_ms.setdefault(t.name, []).append((first - began) * 1000)
            figures.sse_total_ms.setdefault(t.name, []).append((total - began) * 1000)


def _p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def summary(figures: Figures) -> dict[str, Any]:
    rows: dict[str, tuple[float, float]] = {}
    ratios: dict[str, float] = {}

    def pair(label: str, edge: float, origin: float) -> None:
        rows[label] = (edge, origin)

    seq = figures.sequential_ms
    pair(SEQUENTIAL_ROW, statistics.median(seq["edge"]), statistics.median(seq["origin"]))
    ratios[SEQUENTIAL_ROW] = round_ratio(figures)
    pair("sequential tools/list, p95 (ms)", _p95(seq["edge"]), _p95(seq["origin"]))
    pair("concurrent tools/list, throughput (req/s)", figures.load["edge"]["per_second"],
         figures.load["origin"]["per_second"])
    if figures.sse_first_ms.get("edge") and figures.sse_first_ms.get("origin"):
        pair("SSE countdown, first progress event, median (ms)", statistics.median(figures.sse_first_ms["edge"]),
             statistics.median(figures.sse_first_ms["origin"]))
        pair("SSE countdown, whole stream, median (ms)", statistics.median(figures.sse_total_ms["edge"]),
             statistics.median(figures.sse_total_ms["origin"]))
    result: dict[str, Any] = {
        "rows": {k: {"edge": e, "origin": o, "ratio": ratios.get(k, e / o if o else float("nan"))}
                 for k, (e, o) in rows.items()},
        "errors": figures.errors,
        "load": figures.load,
        "cpu_ms_per_request": cpu_per_request(figures),
        "sequential_requests": len(seq["edge"]),
    }
    if figures.round_medians.get(RELAY):
        result["relay"] = {"median_ms": statistics.median(seq[RELAY]),
                           "over_origin": round_ratio(figures, RELAY, ORIGIN),
                           "edge_over_relay": round_ratio(figures, EDGE, RELAY)}
    return result


def cpu_per_request(figures: Figures) -> dict[str, dict[str, float]]:
    """Per path, each process's CPU ms per sequential request (empty where none was read)."""
    return {path: {name: 1000 * seconds / figures.cpu_requests[path] for name, seconds in spent.items()}
            for path, spent in figures.cpu_s.items() if figures.cpu_requests.get(path)}


def report(result: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        f"Local edge proxy vs straight to the origin ({REGION}), same run; "
        f"{result.get('sequential_requests', args.requests)} sequential requests per path in rounds of "
        f"{args.round_size} (every order of the paths equally often) "
        f"(the sequential median's ratio: the median of the rounds' ratios), {args.concurrency} concurrent clients",
        "| measure | ratio edge / origin | edge | origin |",
        "|---|---|---|---|",
    ]
    for label, row in result["rows"].items():
        lines.append(f"| {label} | {row['ratio']:.2f} | {row['edge']:.2f} | {row['origin']:.2f} |")
    if result.get("relay"):
        lines += ["", relay_sentence(result["relay"])]
    cpu = result.get("cpu_ms_per_request") or {}
    if cpu:
        names = [CLIENT, *(n for n in (EDGE, ORIGIN, RELAY) if any(n in spent for spent in cpu.values()))]
        lines += ["", "CPU time each process spends on a sequential request, by path (ms; the client's own "
                      "thread, the other processes' from /proc):", "",
                  "| path | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
        lines += [f"| {path} | " + " | ".join(f"{spent.get(n, 0.0):.3f}" for n in names) + " |"
                  for path, spent in cpu.items()]
    load = result["load"]
    lines.append("")
    lines.append("| path | requests under load | errors | error ratio |")
    lines.append("|---|---|---|---|")
    for name in ("edge", "origin"):
        sent, errors = int(load[name]["requests"]), int(result["errors"].get(name, 0))
        lines.append(f"| {name} | {sent} | {errors} | {errors / max(sent, 1):.4f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=600,
                        help="sequential requests per path (rounded up to whole sets of the paths' orders)")
    parser.add_argument("--round-size", type=int, default=ROUND_SIZE,
                        help="measured sequential requests per path and round")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--load-requests", type=int, default=1500, help="requests per path under load (at most)")
    parser.add_argument("--time-limit", type=float, default=30.0, help="seconds per path under load (at most)")
    parser.add_argument("--quick", action="store_true", help="a tenth of the requests")
    parser.add_argument("--json", action="store_true", help="print raw figures as JSON")
    args = parser.parse_args(argv if argv is not None else [])
    if args.quick:
        args.requests, args.load_requests = max(args.requests // 10, 20), max(args.load_requests // 10, 100)
    figures = Figures()
    with tempfile.TemporaryDirectory(prefix="local-bench-") as tmp:
        supervisor, plan = start(Path(tmp))
        try:
            all_targets = targets(plan, token_for(plan))
            pids = {EDGE: supervisor.services["edge"].pid, ORIGIN: supervisor.services[f"origin-{REGION}"].pid}
            straight = next(t for t in all_targets if t.name == ORIGIN)
            with relay(straight) as (relay_target, relay_pid):
                sequential(figures, [*all_targets, relay_target], args.requests, args.round_size,
                           {**pids, RELAY: relay_pid})
            load(figures, all_targets, args.concurrency, args.load_requests, args.time_limit)
            sse(figures, all_targets, max(args.requests // 20, 5))
        finally:
            supervisor.stop_all()
    result = summary(figures)
    print(json.dumps(result, indent=1) if args.json else report(result, args))
    return {"title": "Local edge proxy against the origin", "markdown": report(result, args), **result,
            "goals": goals(result)}


SEQUENTIAL_GOAL = 1.6  # the most the local edge may add: sequential tools/list, edge / origin


# Where the edge's time goes, as measured in runs of the topology under this bench's load
# (time stamps at each step inside the edge, py-spy and perf on the edge, each process's CPU
# per request, a ladder of stripped-down edges beside one origin); kept true when the edge changes.
SEQUENTIAL_NOTE = (
    "Since 2026-12-05 the edge path holds two steps more than the ladder below measured: the edge gate "
    "verifies the token and SigV4-signs in the edge process (about 0.5 ms a request, bench/edge_gate_bench.py), "
    "and the request then goes through the origin's local Function URL, a second process that checks the "
    "signature before the origin sees it (bench/origin_bench.py times that hop alone against the origin "
    "called directly). "
    "Where the rest went before, from a ladder of edges measured beside one origin in the same rounds (2026-12-02, "
    "two runs of 24 rounds; the stripped-down edges were a scratch build, not shipped): an edge with only its "
    "HTTP/1.1 server and its origin client (no limits, events, function or router) 1.56x the origin (the "
    "second run); with the "
    "limits, events, policy and request log but no function or router 1.77-1.83x; the whole edge "
    "2.15-2.22x, the bare relay 1.18-1.23x. So the HTTP hop in Python costs about 0.35x, the edge's own "
    "steps about 0.2x, and the viewer function alone 0.33-0.45x (the router under 0.03x): the shipped "
    "function takes 25 us of JavaScript back to back in QuickJS, and 125 us a request inside the edge "
    "here, where every process's work runs cold (each request reaches a process after the others "
    "ran; a call after a 1 ms sleep costs this VM 2-3x its back-to-back time), and more work in the edge "
    "makes the origin and the client slower on the same request too (the CPU table). Serving the edge "
    "without uvicorn's ASGI cycle, on an httptools server of its own, made it 0.96-0.97x the edge (branch "
    "experiment/edge-own-http-server, not merged: a hand-written server for 4%). The figure moves with the "
    "machine's state more than with the code: the same code read 1.46-1.59 in eleven full runs of an "
    "earlier round, and 1.64-2.25 since. Code changes are weighed against each other instead, two edges "
    "of two commits beside one origin (python -m bench.edge_ab --base REV): the previous rounds' changes "
    "to the edge path made it 0.98x, then 0.99x the edge before them"
)


def relay_sentence(relay: dict[str, float]) -> str:
    """The hop's floor in this run, as a sentence."""
    return (f"A bare relay in front of the same origin (bench/relay.py: one more process moving the bytes "
            f"both ways, no HTTP parsing, no function, no router) read {relay['over_origin']:.2f}x the origin "
            f"in the same rounds: what a second process on the path costs on this machine before any of the "
            f"edge's work; the edge read {relay['edge_over_relay']:.2f}x the relay.")


def cpu_sentence(cpu: dict[str, dict[str, float]]) -> str:
    """This run's CPU per request through the edge against straight to the origin, as a sentence
    ("" when the run could not read it)."""
    edge, origin = cpu.get(EDGE, {}), cpu.get(ORIGIN, {})
    if not (edge.get(ORIGIN) and origin.get(ORIGIN) and CLIENT in edge and CLIENT in origin):
        return ""
    return (f"This run, a sequential request cost the origin {edge[ORIGIN]:.2f} ms of CPU through the edge "
            f"against {origin[ORIGIN]:.2f} ms straight, the client {edge[CLIENT]:.2f} against "
            f"{origin[CLIENT]:.2f} ms, and the edge {edge.get(EDGE, 0.0):.2f} ms. ")


def goals(result: dict[str, Any]) -> list[dict[str, Any]]:
    ratio = result["rows"][SEQUENTIAL_ROW]["ratio"]
    return [{
        "goal": f"local edge, sequential tools/list <= {SEQUENTIAL_GOAL}x the origin", "measured": f"{ratio:.2f}x",
        "met": ratio <= SEQUENTIAL_GOAL,
        "note": ("" if ratio <= SEQUENTIAL_GOAL else f"over by {ratio - SEQUENTIAL_GOAL:.2f}. ")
        + (relay_sentence(result["relay"]) + " " if result.get("relay") else "")
        + cpu_sentence(result.get("cpu_ms_per_request") or {}) + SEQUENTIAL_NOTE,
    }]


if __name__ == "__main__":
    main(sys.argv[1:])
