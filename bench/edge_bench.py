"""Benchmark: the edge code the program ships, against baselines measured in the same run.

    .venv/bin/python -m bench.edge_bench [--quick] [--json]

The CloudFront Function is the prod stack's rendered code, run in V8 (mini-racer) on
CloudFront-shaped viewer-request events; each figure is the median over repetitions of
a loop of calls inside the engine (one Python -> JS crossing per loop, so marshalling
is not what is measured). Baselines: an identity function (``return event.request``)
and the seed article's check (``Authorization`` starts with ``Bearer`` and splits into
three parts), both in the same engine, same events, same loop.

The geo-router is rendered for the prod regions and for all AWS regions this project
knows (the largest table), from ``edge.router.render_router``. Import time is
compile + execute of the module source, in process, against a stub module with the
same handler signature that returns the request untouched; a cold import in a fresh
isolated interpreter (``python -I -S -B``, no bytecode cache, as on Lambda's
read-only ``/var/task``) is also timed against the same interpreter
importing the stub. Time per request is the handler on an origin-request event,
against the stub handler and against a shallow ``dict`` copy of the request. Package
size is the deterministic zip, against the stub's zip and against Lambda@Edge's
50 MB origin-request limit. CloudFront Function code size is against its 10 KB limit.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from py_mini_racer import MiniRacer

from components.packaging import write_deterministic_zip
from edge.router import OriginTarget, render_router
from edge.viewer_function import MAX_CODE_BYTES, ViewerFunctionSettings, render_viewer_function
from mcpedge.config import load_from_stack_file
from mcpedge.regions import AWS_REGIONS
from tests.edge.shipped import make_token, origin_request_event, viewer_event

LAMBDA_EDGE_ORIGIN_REQUEST_LIMIT = 50 * 1024 * 1024
STUB_ROUTER = '''def handler(event, context):
    return event["Records"][0]["cf"]["request"]
'''
IDENTITY_JS = "function handler(event) { return event.request; }"
SEED_JS = """function handler(event) {
  var request = event.request;
  if (request.uri.indexOf('/mcp') !== 0) return request;
  var h = request.headers['authorization'] ? request.headers['authorization'].value : '';
  if (h.indexOf('Bearer ') !== 0) return {statusCode: 401, statusDescription: 'Unauthorized'};
  if (h.slice(7).split('.').length !== 3) return {statusCode: 401, statusDescription: 'Unauthorized'};
  return request;
}"""
# None of the three handlers modifies the event, so one event serves every iteration.
LOOP_JS = """function __loop(event, n) {
  var r;
  for (var i = 0; i < n; i++) r = handler(event);
  return r.statusCode || 200;
}"""


def median_seconds(fn: Callable[[], object], repeats: int, number: int) -> float:
    """Median seconds per call of fn, over `repeats` timings of `number` calls."""
    return statistics.median(timeit.repeat(fn, repeat=repeats, number=number)) / number


# --- CloudFront Function ---------------------------------------------------------------------


def viewer_cases(issuer: str, audience: str) -> dict[str, dict[str, Any]]:
    now = int(time.time())
    good = make_token({"alg": "RS256", "typ": "at+jwt"}, {"iss": issuer, "aud": audience, "exp": now + 3600, "sub": "c"})
    expired = make_token({"alg": "RS256"}, {"iss": issuer, "aud": audience, "exp": now - 3600})
    return {
        "valid token (passes)": viewer_event(headers={"authorization": f"Bearer {good}"}),
        "expired token (401)": viewer_event(headers={"authorization": f"Bearer {expired}"}),
        "two-segment token (401)": viewer_event(headers={"authorization": "Bearer abc.def"}),
        "no token (401)": viewer_event(),
        "other path (passes)": viewer_event(uri="/healthz", method="GET"),
    }


class Engine:
    def __init__(self, code: str):
        self.ctx = MiniRacer()
        self.ctx.eval(code)
        self.ctx.eval(LOOP_JS)

    def per_call(self, event: dict[str, Any], loop: int, repeats: int) -> float:
        self.ctx.call("__loop", event, 200)  # warm the JIT
        timings = []
        for _ in range(repeats):
            started = time.perf_counter()
            self.ctx.call("__loop", event, loop)
            timings.append(time.perf_counter() - started)
        return statistics.median(timings) / loop

    def close(self) -> None:
        self.ctx.close()


def bench_viewer(quick: bool) -> dict[str, Any]:
    config = load_from_stack_file("prod")
    code = render_viewer_function(ViewerFunctionSettings.from_config(config))
    loop, repeats = (2000, 5) if quick else (20000, 9)
    engines = {"shipped": Engine(code), "identity": Engine(IDENTITY_JS), "seed check": Engine(SEED_JS)}
    rows = []
    try:
        for case, event in viewer_cases(config.auth.issuer, config.auth.audience).items():
            t = {name: e.per_call(event, loop, repeats) for name, e in engines.items()}
            rows.append({
                "case": case,
                "shipped_us": t["shipped"] * 1e6,
                "identity_us": t["identity"] * 1e6,
                "seed_us": t["seed check"] * 1e6,
                "vs_identity": t["shipped"] / t["identity"],
                "vs_seed": t["shipped"] / t["seed check"],
            })
    finally:
        for engine in engines.values():
            engine.close()
    size = len(code.encode("utf-8"))
    return {"rows": rows, "code_bytes": size, "limit_bytes": MAX_CODE_BYTES, "of_limit": size / MAX_CODE_BYTES,
            "seed_bytes": len(SEED_JS.encode())}


# --- geo-router ----------------------------------------------------------------------------------


def fake_origins(regions: Sequence[str]) -> dict[str, OriginTarget]:
    return {r: OriginTarget(f"{'a' * 32}.lambda-url.{r}.on.aws") for r in regions}


def load_source(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "geo_router"}
    exec(compile(source, "geo_router.py", "exec"), namespace)
    return namespace


def zip_size(source: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp) / "p.zip"
        write_deterministic_zip({"geo_router.py": source.encode()}, dest)
        return dest.stat().st_size


def cold_import_seconds(source: str, repeats: int) -> float:
    """Median wall time of a fresh isolated interpreter importing the module from an
    unpacked package without bytecode (Lambda's /var/task is read-only: no pyc cache)."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "geo_router.py").write_text(source)
        cmd = [sys.executable, "-I", "-S", "-B", "-c", f"import sys; sys.path.insert(0, {tmp!r}); import geo_router"]
        timings = []
        for _ in range(repeats):
            started = time.perf_counter()
            subprocess.run(cmd, check=True)
            timings.append(time.perf_counter() - started)
        return statistics.median(timings)


def bench_router(quick: bool) -> list[dict[str, Any]]:
    config = load_from_stack_file("prod")
    repeats, number = (5, 200) if quick else (9, 2000)
    cold_repeats = 3 if quick else 9
    stub = load_source(STUB_ROUTER)
    out = []
    for label, regions in (("prod (4 regions)", list(config.regions)), (f"all {len(AWS_REGIONS)} regions", sorted(AWS_REGIONS))):
        source = render_router(fake_origins(regions), regions[0])
        router = load_source(source)
        event = origin_request_event({"CloudFront-Viewer-Country": "SE"})
        request = event["Records"][0]["cf"]["request"]
        import_s = median_seconds(partial(load_source, source), repeats, max(1, number // 100))
        stub_import_s = median_seconds(partial(load_source, STUB_ROUTER), repeats, max(1, number // 100))
        cold_s = cold_import_seconds(source, cold_repeats)
        cold_stub_s = cold_import_seconds(STUB_ROUTER, cold_repeats)
        handler = router["handler"]
        stub_handler = stub["handler"]
        request_s = median_seconds(partial(handler, event, None), repeats, number)
        stub_s = median_seconds(partial(stub_handler, event, None), repeats, number)
        copy_s = median_seconds(partial(dict, request), repeats, number)
        size, stub_size = zip_size(source), zip_size(STUB_ROUTER)
        out.append({
            "table": label,
            "import_ms": import_s * 1e3, "import_vs_stub": import_s / stub_import_s,
            "cold_ms": cold_s * 1e3, "cold_vs_stub": cold_s / cold_stub_s,
            "request_us": request_s * 1e6, "request_vs_stub": request_s / stub_s, "request_vs_copy": request_s / copy_s,
            "zip_bytes": size, "zip_vs_stub": size / stub_size, "zip_of_limit": size / LAMBDA_EDGE_ORIGIN_REQUEST_LIMIT,
        })
    return out


# --- report ------------------------------------------------------------------------------------------


def markdown(viewer: dict[str, Any], router: list[dict[str, Any]]) -> str:
    lines = [
        "### CloudFront Function (viewer-request), in V8",
        "",
        f"Code size: {viewer['code_bytes']} bytes = **{viewer['of_limit']:.2f}x** CloudFront's "
        f"{viewer['limit_bytes']}-byte limit (the seed's check: {viewer['seed_bytes']} bytes).",
        "",
        "| request | shipped (us) | identity (us) | seed check (us) | shipped / identity | shipped / seed check |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in viewer["rows"]:
        lines.append(
            f"| {row['case']} | {row['shipped_us']:.2f} | {row['identity_us']:.3f} | {row['seed_us']:.3f} "
            f"| **{row['vs_identity']:.1f}x** | **{row['vs_seed']:.1f}x** |"
        )
    lines += [
        "",
        "### Lambda@Edge geo-router (Python)",
        "",
        "| table | import (ms) | import / stub | cold import in a fresh interpreter (ms) | cold / stub "
        "| request (us) | request / stub | request / dict copy | zip (bytes) | zip / stub | zip / 50 MB limit |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in router:
        lines.append(
            f"| {row['table']} | {row['import_ms']:.2f} | **{row['import_vs_stub']:.0f}x** | {row['cold_ms']:.1f} "
            f"| **{row['cold_vs_stub']:.2f}x** | {row['request_us']:.2f} | **{row['request_vs_stub']:.1f}x** "
            f"| **{row['request_vs_copy']:.1f}x** | {row['zip_bytes']} | {row['zip_vs_stub']:.0f}x "
            f"| {row['zip_of_limit']:.5f}x |"
        )
    return "\n".join(lines)


def run(quick: bool = False) -> dict[str, Any]:
    viewer = bench_viewer(quick)
    router = bench_router(quick)
    return {"title": "Edge code: CloudFront Function and Lambda@Edge geo-router", "markdown": markdown(viewer, router),
            "viewer": viewer, "router": router}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.edge_bench", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    result = run(quick=args.quick)
    if args.json:
        out = io.StringIO()
        json.dump({k: v for k, v in result.items() if k != "markdown"}, out, indent=2)
        print(out.getvalue())
    else:
        print(result["markdown"])


if __name__ == "__main__":
    main()
