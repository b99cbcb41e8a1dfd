"""Benchmark: the edge code the program ships, against baselines measured in the same run.

    .venv/bin/python -m bench.edge_bench [--quick] [--json]

The CloudFront Function is the prod stack's rendered code, run on CloudFront-shaped
viewer-request events in four engines: njs (Debian's ``njs``, nginx's JavaScript
interpreter: the closest to CloudFront's runtime we can run), ``node --jitless``
(V8's interpreter alone), ``node`` (V8 with its JIT) and QuickJS in quickjs-ng (the local
edge's engine, an interpreter too, where Buffer is the stand-in's, on QuickJS's native base64).
Each engine runs the function as ``devkit/edge_runtimes/njs_node.py`` does (the runtime's
``cloudfront`` module stand-in, Buffer from the engine or, in QuickJS, the stand-in), the
token a realistic access token (RS256-length signature, ordinary claims: the length is
printed, a little over the 750 characters the goal names), the KeyValueStore read served by the in-memory stand-in holding a
health document with one region down. Each figure is the time per call of a loop
inside the engine (run until it lasts the section's target time, timed with
``Date.now()``), the fastest of the repetitions, which alternate the variants case by
case in one engine process (on a shared machine other load only ever adds time, so
the minimum is the least disturbed figure; every variant gets the same statistic).
Baselines, in the same engine, same events, same loop: an identity function (``return
event.request``) and a minimal check (``Authorization`` starts with
``Bearer`` and splits into three parts: the least a token check can do); and the function without its KeyValueStore
read (its ``kvs.get`` and ``avoid`` statements removed), for what the read adds.

The geo-router is rendered for the prod regions and for all AWS regions this project
knows (the largest table), from ``edge.router.render_router``. Import time is
compile + execute of the module source, in process, against a stub module with the
same handler signature that returns the request untouched; a cold import in a fresh
isolated interpreter (``python -I -S -B``, no bytecode cache, as on Lambda's
read-only ``/var/task``) is also timed against the same interpreter
importing the stub. Time per request is the handler on an origin-request event
(a viewer in SE, one region avoided), against the stub handler and against a shallow
``dict`` copy of the request. Package size is the deterministic zip, against the
stub's zip and against Lambda@Edge's 50 MB origin-request limit. CloudFront Function
code size is against its 10 KB limit.
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

import quickjs

from components.lambda_package import write_deterministic_zip
from devkit.edge_cases import Store, health, realistic_token
from devkit.edge_runtimes.in_process import kvs_snapshot, runnable_code, runtime_js
from devkit.edge_runtimes.njs_node import EMIT_JS, NJS, NODE_JITLESS, Engine, emitted
from devkit.shipped import origin_request_event, viewer_event
from edge.protocol import AVOID_REGIONS_HEADER
from edge.regions import AWS_REGIONS
from edge.router import OriginTarget, render_router
from edge.viewer_function import MAX_CODE_BYTES, render_viewer_function
from stack_config.loading import load_from_stack_file

LAMBDA_EDGE_ORIGIN_REQUEST_LIMIT = 50 * 1024 * 1024
NODE = Engine("node (V8 with its JIT, native Buffer)", ("node",))
# The goals for the function: under njs on a valid token, against the minimal check; its
# rendered size for the prod stack.
NJS_GOAL_VS_MINIMAL = 8.0
CODE_GOAL_BYTES = 4 * 1024
STUB_ROUTER = '''def handler(event, context):
    return event["Records"][0]["cf"]["request"]
'''
IDENTITY_JS = "function handler(event) { return event.request; }"
MINIMAL_CHECK_JS = """function handler(event) {
  var request = event.request;
  if (request.uri.indexOf('/mcp') !== 0) return request;
  var h = request.headers['authorization'] ? request.headers['authorization'].value : '';
  if (h.indexOf('Bearer ') !== 0) return {statusCode: 401, statusDescription: 'Unauthorized'};
  if (h.slice(7).split('.').length !== 3) return {statusCode: 401, statusDescription: 'Unauthorized'};
  return request;
}"""
# The statement that reads the KeyValueStore, removed for the "without the read" variant.
KVS_READ = "var doc = await kvs.get(C.key);avoid(req.headers, doc);"
# Every variant in its own function scope of one script, so that one engine process
# alternates them case by case (drift hits all alike). Each loop runs until it lasts
# targetMs (Date.now() is what every engine has; a later round may go down to half of
# it, with the count it needed in the first, warm-up, round); an async handler's promise is awaited, in a statement of its own (njs).
BENCH_JS = r"""
var __cases = JSON.parse(%s);
async function __bench(targetMs, repeats) {
  var out = {};
  var counts = {};
  for (var rep = 0; rep <= repeats; rep++) {
    for (var c = 0; c < __cases.length; c++) {
      var ev = __cases[c].event;
      for (var name in __variants) {
        var fn = __variants[name];
        var key = name + '|' + c;
        var n = counts[key] || 1;
        var ms = 0;
        for (;;) {
          var t0 = Date.now();
          for (var i = 0; i < n; i++) {
            var r = fn(ev);
            if (r && typeof r.then === 'function') await r;
          }
          ms = Date.now() - t0;
          if (ms >= targetMs || (counts[key] && ms >= targetMs / 2)) break;
          n = ms < 2 ? n * 10 : Math.ceil(n * targetMs * 1.1 / ms);
        }
        counts[key] = n;
        if (rep === 0) continue;
        out[name] = out[name] || {};
        out[name][__cases[c].name] = (out[name][__cases[c].name] || []).concat([ms / 1000 / n]);
      }
    }
  }
  return JSON.stringify(out);
}
"""


def median_seconds(fn: Callable[[], object], repeats: int, number: int) -> float:
    """Median seconds per call of fn, over `repeats` timings of `number` calls."""
    return statistics.median(timeit.repeat(fn, repeat=repeats, number=number)) / number


# --- CloudFront Function ---------------------------------------------------------------------


def viewer_cases() -> dict[str, dict[str, Any]]:
    config = load_from_stack_file("prod")
    now = int(time.time())
    good, expired = realistic_token(config, now), realistic_token(config, now - 7200)
    return {
        "valid token (passes)": viewer_event(headers={"authorization": f"Bearer {good}"}),
        "expired token (401)": viewer_event(headers={"authorization": f"Bearer {expired}"}),
        "two-segment token (401)": viewer_event(headers={"authorization": "Bearer abc.def"}),
        "no token (401)": viewer_event(),
        "other path (passes)": viewer_event(uri="/healthz", method="GET"),
    }


def variants(code: str) -> dict[str, str]:
    if code.count(KVS_READ) != 1:
        raise AssertionError(f"the shipped function no longer has the statement {KVS_READ!r}")
    return {"shipped": code, "without the KeyValueStore read": code.replace(KVS_READ, ""),
            "identity": IDENTITY_JS, "minimal check": MINIMAL_CHECK_JS}


def bench_script(variants: dict[str, str], cases: dict[str, dict[str, Any]], store: Store) -> str:
    """One script: the runtime's stand-ins, each variant's handler in its own scope, the driver."""
    payload = json.dumps([{"name": name, "event": event} for name, event in cases.items()])
    snapshot = json.dumps(kvs_snapshot(store.reader()))
    parts = [runtime_js(), f"__cf.__store(JSON.parse({json.dumps(snapshot)}));", "var __variants = {};"]
    for name, code in variants.items():
        parts.append(f"__variants[{json.dumps(name)}] = (function () {{\n{runnable_code(code)}\nreturn handler;\n}})();")
    return "\n".join(parts) + BENCH_JS % json.dumps(payload)


def run_quickjs(script: str, target_ms: int, repeats: int) -> dict[str, dict[str, list[float]]]:
    ctx = quickjs.Context()  # no time limit: the driver runs for seconds
    ctx.eval(script)
    ctx.eval(f"var __out; __bench({target_ms}, {repeats}).then(function (t) {{ __out = t; }});")
    while ctx.execute_pending_job():
        pass
    return json.loads(str(ctx.eval("__out")))  # type: ignore[no-any-return]


def run_engine(engine: Engine, script: str, target_ms: int, repeats: int) -> dict[str, dict[str, list[float]]]:
    driver = EMIT_JS + f"__bench({target_ms}, {repeats}).then(__emit);\n"
    return emitted(engine, engine.run_script(script + driver, timeout_s=3600))  # type: ignore[no-any-return]


def bench_viewer(quick: bool) -> dict[str, Any]:
    config = load_from_stack_file("prod")
    code = render_viewer_function(config.viewer_function_settings())
    cases = viewer_cases()
    store = Store(value=health(sorted(config.regions)[0]))
    script = bench_script(variants(code), cases, store)
    repeats, target_ms = (3, 20) if quick else (7, 60)
    per_engine, skipped = [], {}
    runs: list[tuple[str, Callable[[], dict[str, dict[str, list[float]]]]]] = []
    for engine in (NJS, NODE_JITLESS, NODE):
        reason = engine.missing()
        if reason:
            skipped[engine.name] = reason
        else:
            runs.append((engine.name, partial(run_engine, engine, script, target_ms, repeats)))
    runs.append(("QuickJS in quickjs-ng (the local edge's engine; Buffer from the stand-in, base64 native)",
                 partial(run_quickjs, script, target_ms, repeats)))
    for label, run_it in runs:
        timings = run_it()
        rows = []
        for case in cases:
            # The least disturbed repetition: the machine is shared, and load only ever adds.
            t = {name: min(timings[name][case]) for name in timings}
            rows.append({
                "case": case,
                "shipped_us": t["shipped"] * 1e6,
                "identity_us": t["identity"] * 1e6,
                "minimal_us": t["minimal check"] * 1e6,
                "vs_identity": t["shipped"] / t["identity"],
                "vs_minimal": t["shipped"] / t["minimal check"],
                # Rejected requests never read the store.
                "kvs_read": t["shipped"] / t["without the KeyValueStore read"] if "passes" in case else None,
            })
        per_engine.append({"engine": label, "rows": rows})
    size = len(code.encode("utf-8"))
    return {"engines": per_engine, "skipped": skipped, "code_bytes": size, "limit_bytes": MAX_CODE_BYTES,
            "of_limit": size / MAX_CODE_BYTES, "minimal_bytes": len(MINIMAL_CHECK_JS.encode()),
            "token_chars": len(realistic_token(config))}


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
        event = origin_request_event({"CloudFront-Viewer-Country": "SE", AVOID_REGIONS_HEADER: regions[0]})
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
        "### CloudFront Function (viewer-request): njs, node --jitless, node and QuickJS",
        "",
        f"Code size: {viewer['code_bytes']} bytes = **{viewer['of_limit']:.2f}x** CloudFront's "
        f"{viewer['limit_bytes']}-byte limit (the minimal check: {viewer['minimal_bytes']} bytes). "
        f"Token: {viewer['token_chars']} characters.",
    ]
    for engine in viewer["engines"]:
        lines += [
            "",
            f"{engine['engine']}:",
            "",
            "| request | shipped (us) | identity (us) | minimal check (us) | shipped / identity | shipped / minimal check "
            "| KeyValueStore read: shipped / without it |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for row in engine["rows"]:
            lines.append(
                f"| {row['case']} | {row['shipped_us']:.2f} | {row['identity_us']:.3f} | {row['minimal_us']:.3f} "
                f"| **{row['vs_identity']:.1f}x** | **{row['vs_minimal']:.1f}x** | "
                + (f"**{row['kvs_read']:.2f}x** |" if row["kvs_read"] is not None else "no read (rejected) |")
            )
    for name, reason in viewer["skipped"].items():
        lines += ["", f"{name}: not run ({reason})."]
    valid = njs_valid_row(viewer)
    if valid is not None:
        verdict = "met" if valid["vs_minimal"] <= NJS_GOAL_VS_MINIMAL else "**not met**"
        lines += ["", f"Goal, njs, valid token: shipped / minimal check <= {NJS_GOAL_VS_MINIMAL:.0f}x: "
                      f"**{valid['vs_minimal']:.1f}x**, {verdict}."]
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


def njs_valid_row(viewer: dict[str, Any]) -> dict[str, Any] | None:
    """njs's figures for the valid token, or None when njs did not run."""
    for engine in viewer["engines"]:
        if engine["engine"] == NJS.name:
            return next((r for r in engine["rows"] if r["case"].startswith("valid token")), None)
    return None


def goals(viewer: dict[str, Any]) -> list[dict[str, Any]]:
    """The function's goals, for the report's goals table: its cost under njs on a valid,
    realistic token against the minimal check, and its rendered size for the prod stack."""
    valid = njs_valid_row(viewer)
    size = viewer["code_bytes"]
    return [
        {"goal": f"CloudFront Function under njs, valid token ({viewer['token_chars']} characters): "
                 f"shipped <= {NJS_GOAL_VS_MINIMAL:.0f}x the minimal check, KeyValueStore read included",
         "measured": f"{valid['vs_minimal']:.1f}x" if valid else "not run",
         "met": valid is not None and valid["vs_minimal"] <= NJS_GOAL_VS_MINIMAL,
         "note": "" if valid else f"njs did not run: {viewer['skipped'].get(NJS.name, 'not found')}"},
        {"goal": f"CloudFront Function rendered for the prod stack <= {CODE_GOAL_BYTES} bytes",
         "measured": f"{size} bytes", "met": size <= CODE_GOAL_BYTES,
         "note": f"CloudFront's limit: {viewer['limit_bytes']} bytes"},
    ]


def run(quick: bool = False) -> dict[str, Any]:
    viewer = bench_viewer(quick)
    router = bench_router(quick)
    return {"title": "Edge code: CloudFront Function and Lambda@Edge geo-router", "markdown": markdown(viewer, router),
            "viewer": viewer, "router": router, "goals": goals(viewer)}


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
