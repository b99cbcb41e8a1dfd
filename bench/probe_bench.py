"""Benchmark: the probe's cost over plain httpx, measured in the same run.

    .venv/bin/python -m bench.probe_bench [--import-runs 7] [--probes 150] [--json]

The probe runs every minute in every region, per target, so what it adds on top of
the network round trips it cannot avoid is what matters:

- cold import: importing ``functions.probe.handler`` in a fresh interpreter, against
  importing ``httpx`` alone (the floor for any httpx probe) and the official SDK's
  client (what the probe avoids); with the bytecode cache, and from source (an empty
  cache, as on Lambda, whose packages ship no ``.pyc``). Median of ``--import-runs``.
- first signed request and first forged token: importing botocore's SigV4 signer (what the
  first secret read adds, ``secrets_manager.aws_sign``, which a direct target's requests
  then share, ``sigv4.py``) against awscrt's, and cryptography with one RSA 2048 key (what
  an edge target's first promise check adds, ``forge.py``), each in a fresh interpreter;
  the probe handler's import pays neither.
- first invocation's secret read: in a fresh interpreter that has imported the probe
  from its zip, the ``GetSecretValue`` call of a cold environment (the client secret,
  ``build_runtime``) through ``secrets_manager`` (one signed request), as shipped and with
  botocore's signer imported beforehand (the difference is the signer's share of a cold
  start), against the same read through boto3 (import, client, call: what the probe did
  before); moto on loopback answers it. Median of ``--import-runs``.
- per probe, warm process: ``run_probe`` (fresh connection, ``server/discover`` then
  ``tools/list``, parsing, RFC 8785 hashing, the result) against a plain httpx client
  making the same two POSTs on a fresh connection, and a single plain POST; against a
  stock SDK server (``MCPServer.streamable_http_app(stateless_http=True)``) in its
  own process on loopback, in alternating rounds so machine drift hits all alike.
- schema hash: RFC 8785 canonical JSON + SHA-256 against ``json.dumps(sort_keys=True)``
  + SHA-256 (which is not canonical), for the test server's tools and for 200 tools.
- SSE decoding: the probe's decoder on one large event in 16 KB chunks against
  ``json.loads`` of the same body (the ratio must stay flat as the body grows).

Figures are ratios against the baselines; milliseconds are for context only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from local.supervisor import free_ports

ROOT = Path(__file__).resolve().parent.parent
MODERN_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                  "mcp-protocol-version": "2026-07-28"}
META = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}


def sdk_app() -> Any:
    """The server (uvicorn --factory): a stock SDK app with a few typed tools."""
    from mcp.server import MCPServer

    server = MCPServer("bench-server")

    @server.tool(description="Add two integers")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool()
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    @server.tool()
    def forecast(city: str, days: int = 3) -> dict[str, float]:
        """Forecast temperatures."""
        return {"today": 21.5}

    return server.streamable_http_app(stateless_http=True)


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


# --- cold import ------------------------------------------------------------------------


def import_time(statement: str, path: Path, *, bytecode: bool) -> float:
    """Seconds to run ``statement`` in a fresh interpreter with ``path`` first on sys.path
    (interpreter startup excluded)."""
    code = f"import time\nt = time.perf_counter()\n{statement}\nprint(time.perf_counter() - t)"
    env = {**os.environ, "PYTHONPATH": str(path)}
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # the package stays as shipped: no .pyc
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=path, capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def cold_imports(runs: int) -> dict[str, float]:
    """Median import times: in the dev environment (bytecode cached) and from the probe's
    own Lambda package as built by the program (no .pyc: every module of the package
    compiled at import, as on Lambda; the standard library keeps its cache, as there)."""
    import zipfile

    from components.lambda_package import build_package
    from components.probe_fleet import PROBE_PACKAGE

    cases: dict[str, tuple[str, str]] = {  # name -> (statement, where)
        "httpx (baseline)": ("import httpx", "dev"),
        "probe handler": ("import functions.probe.handler", "dev"),
        "MCP SDK client": ("from mcp import Client", "dev"),
        # What a direct target's first signed request adds (sigv4.py), and the alternative signer.
        "botocore signer (first signed request)": ("from botocore.auth import SigV4Auth\n"
                                                   "from botocore.awsrequest import AWSRequest", "dev"),
        "awscrt signer (alternative)": ("from awscrt.auth import aws_sign_request\nfrom awscrt.http import HttpRequest",
                                        "dev"),
        # What an edge target's first forged token adds (forge.py): cryptography and an RSA 2048 key.
        "forged-token key (first edge probe)": ("from cryptography.hazmat.primitives.asymmetric import rsa\n"
                                                "rsa.generate_private_key(public_exponent=65537, key_size=2048)", "dev"),
        "httpx (baseline), as shipped": ("import httpx", "package"),
        "probe handler, as shipped": ("import probe.handler", "package"),
    }
    with tempfile.TemporaryDirectory() as tmp:
        package = Path(tmp)
        with zipfile.ZipFile(build_package(PROBE_PACKAGE)) as zf:
            zf.extractall(package)
        where = {"dev": ROOT, "package": package}
        for statement, place in cases.values():  # warm the OS file cache (and dev .pyc) once
            import_time(statement, where[place], bytecode=place == "dev")
        results: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(runs):
            for name, (statement, place) in cases.items():  # alternating: drift hits all alike
                results[name].append(import_time(statement, where[place], bytecode=place == "dev"))
    return {name: _median(values) for name, values in results.items()}


# --- first invocation's secret reads ---------------------------------------------------------

SECRET_NAMES = ("acme-mcp-prod-probe-client-secret",)
BOTO3_READS = "boto3 (baseline: what the probe used before)"
SHIPPED_READS = "secrets_manager (as shipped: imports botocore's signer)"
SIGNER_LOADED_READS = "secrets_manager, botocore's signer already imported"
SECRET_READS = {
    SHIPPED_READS: (
        "from probe.secrets_manager import get_secret_string",
        "[get_secret_string(name) for name in NAMES]"),
    # What the first read costs without its signer's import: the read itself (the
    # difference to the shipped read is what botocore's SigV4Auth adds to a cold start).
    SIGNER_LOADED_READS: (
        "from probe.secrets_manager import get_secret_string\nimport botocore.auth, botocore.awsrequest",
        "[get_secret_string(name) for name in NAMES]"),
    BOTO3_READS: (
        "",
        "import boto3\nclient = boto3.client('secretsmanager')\n"
        "[client.get_secret_value(SecretId=name)['SecretString'] for name in NAMES]"),
}


def first_reads(runs: int) -> dict[str, float]:
    """Median seconds, per way of reading, to read both secrets in a fresh interpreter that
    has imported the probe handler from its zip (the import is not timed)."""
    import zipfile

    import boto3
    from moto.server import ThreadedMotoServer

    from components.lambda_package import build_package
    from components.probe_fleet import PROBE_PACKAGE

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        aws = {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "eu-west-1",
               "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_SESSION_TOKEN": "bench"}
        secrets = boto3.client("secretsmanager", region_name="eu-west-1", endpoint_url=aws["AWS_ENDPOINT_URL"],
                               aws_access_key_id="bench", aws_secret_access_key="bench")
        for name in SECRET_NAMES:
            secrets.create_secret(Name=name, SecretString=json.dumps({"current": "x" * 48}))
        with tempfile.TemporaryDirectory() as tmp:
            package = Path(tmp)
            with zipfile.ZipFile(build_package(PROBE_PACKAGE)) as zf:
                zf.extractall(package)
            env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **aws,
                   "PYTHONPATH": str(package), "PYTHONDONTWRITEBYTECODE": "1"}
            results: dict[str, list[float]] = {name: [] for name in SECRET_READS}
            for n in range(runs + 1):  # the first round warms the OS file cache, not counted
                for name, (setup, statement) in SECRET_READS.items():
                    code = (f"import probe.handler\n{setup}\nNAMES = {SECRET_NAMES!r}\nimport time\n"
                            f"t = time.perf_counter()\n{statement}\nprint(time.perf_counter() - t)")
                    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=package, capture_output=True,
                                         text=True, check=True)
                    if n:
                        results[name].append(float(out.stdout.strip().splitlines()[-1]))
    finally:
        server.stop()
    return {name: _median(values) for name, values in results.items()}


# --- per probe -----------------------------------------------------------------------------


@contextmanager
def server() -> Iterator[str]:
    port = free_ports(1)[0]
    cmd = [sys.executable, "-m", "uvicorn", "--factory", "bench.probe_bench:sdk_app", "--host", "127.0.0.1",
           "--port", str(port), "--log-level", "warning", "--no-access-log", "--loop", "asyncio", "--http", "h11"]
    process = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        give_up = time.monotonic() + 30
        while True:
            try:
                httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": META},
                           headers={**MODERN_HEADERS, "mcp-method": "tools/list"}, timeout=2, trust_env=False)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > give_up:
                    raise RuntimeError("benchmark server did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def _post(client: httpx.Client, url: str, method: str) -> Any:
    response = client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": META},
                           headers={**MODERN_HEADERS, "mcp-method": method})
    response.raise_for_status()
    return response.json()


def per_probe(url: str, probes: int) -> dict[str, list[float]]:
    from functions.probe.event import parse_event
    from functions.probe.probe import ProbeSettings, run_probe
    from functions.probe.wire import Deadline, new_probe_client

    target = parse_event({"endpoint": url, "serverId": "bench", "target": "origin", "targetRegion": "us-east-1"})
    settings = ProbeSettings(deadline_s=10, degraded_latency_ms=10_000, probe_region="local")

    tls = ssl.create_default_context()

    def new_client() -> httpx.Client:
        # As the probe's runtime does: one TLS context, a fresh client (connection) per probe.
        return httpx.Client(verify=tls, trust_env=False)

    def one_post() -> None:
        with new_client() as client:
            _post(client, url, "tools/list")

    def two_posts() -> None:
        with new_client() as client:
            _post(client, url, "server/discover")
            _post(client, url, "tools/list")

    def probe() -> None:
        # The probe's own client, as the runtime builds it (the deadline in its transport).
        result = run_probe(target, settings, None, lambda: new_probe_client(tls), Deadline(10))
        assert result["toolCount"] == 3, result

    variants: dict[str, Callable[[], None]] = {
        "plain httpx, 1 POST": one_post, "plain httpx, 2 POSTs": two_posts, "probe": probe}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for fn in variants.values():  # warm-up
        for _ in range(5):
            fn()
    for _ in range(probes):
        for name, fn in variants.items():
            started = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - started) * 1000)
    return times


# --- schema hash ---------------------------------------------------------------------------


def hash_costs(url: str, repeats: int) -> dict[str, dict[str, float]]:
    from functions.probe.schema_hash import schema_hash

    with httpx.Client(trust_env=False) as client:
        tools = _post(client, url, "tools/list")["result"]["tools"]
    many = [{**tool, "name": f"{tool['name']}-{i}"} for i in range(70) for tool in tools][:200]
    out: dict[str, dict[str, float]] = {}
    for label, subject in ((f"{len(tools)} tools", tools), (f"{len(many)} tools", many)):
        canonical, naive = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            schema_hash(subject)
            canonical.append(time.perf_counter() - started)
            started = time.perf_counter()
            hashlib.sha256(json.dumps(subject, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
            naive.append(time.perf_counter() - started)
        out[label] = {"rfc8785_ms": _median(canonical) * 1000, "json_dumps_ms": _median(naive) * 1000}
    return out


# --- SSE decoding -----------------------------------------------------------------------------


def sse_costs(repeats: int) -> dict[str, dict[str, float]]:
    """The probe's SSE decoder on one large ``tools/list`` event arriving in 16 KB
    chunks (as httpx hands them over), against ``json.loads`` of the same body: the
    decoder's cost must grow with the body, not with its square."""
    from functions.probe.wire import SseDecoder

    out: dict[str, dict[str, float]] = {}
    for size_kb in (64, 1024):
        body = json.dumps({"jsonrpc": "2.0", "id": 2, "result": {"tools": [
            {"name": f"tool-{i}", "description": "d" * 200, "inputSchema": {"type": "object"}}
            for i in range(size_kb * 1024 // 260)]}})
        stream = f"event: message\ndata: {body}\n\n".encode()
        chunks = [stream[i:i + 16384] for i in range(0, len(stream), 16384)]
        decoder_s, loads_s = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            decoder = SseDecoder()
            events = [event for chunk in chunks for event in decoder.feed(chunk)]
            decoder_s.append(time.perf_counter() - started)
            assert len(events) == 1, "the decoder lost the event"
            started = time.perf_counter()
            json.loads(body)
            loads_s.append(time.perf_counter() - started)
        out[f"{len(stream) // 1024} KB in {len(chunks)} chunks"] = {
            "decoder_ms": _median(decoder_s) * 1000, "json_loads_ms": _median(loads_s) * 1000}
    return out


# --- report -----------------------------------------------------------------------------------


def run_benchmark(import_runs: int = 7, probes: int = 150) -> dict[str, Any]:
    imports = cold_imports(import_runs)
    reads = first_reads(import_runs)
    with server() as url:
        times = per_probe(url, probes)
        hashes = hash_costs(url, max(20, probes // 3))
    sse = sse_costs(max(5, probes // 15))
    return {"imports": imports, "reads": reads, "probe_ms": times, "hash": hashes, "sse": sse, "import_runs": import_runs,
            "probes": probes}


def report(figures: dict[str, Any]) -> str:
    imports = figures["imports"]
    base, probe, sdk = imports["httpx (baseline)"], imports["probe handler"], imports["MCP SDK client"]
    shipped_base, shipped = imports["httpx (baseline), as shipped"], imports["probe handler, as shipped"]
    lines = [
        f"**Cold import** (median of {figures['import_runs']} fresh interpreters):",
        "",
        "| import | time | ratio to httpx |",
        "|---|---:|---:|",
        f"| httpx (baseline), bytecode cached | {base * 1000:.1f} ms | 1.00x |",
        f"| probe handler, bytecode cached | {probe * 1000:.1f} ms | {probe / base:.2f}x |",
        f"| MCP SDK client, bytecode cached | {sdk * 1000:.1f} ms | {sdk / base:.2f}x |",
        f"| httpx (baseline), from the probe's zip (no .pyc) | {shipped_base * 1000:.1f} ms | 1.00x |",
        f"| probe handler, from the probe's zip (no .pyc) | {shipped * 1000:.1f} ms | {shipped / shipped_base:.2f}x |",
        "",
        f"The SDK client would cost {sdk / probe:.1f}x the probe's import. The package as shipped (no"
        f" bytecode) costs {shipped / probe:.1f}x the cached import on every cold start.",
        "",
        f"**First signed request and first forged token** (bytecode cached): botocore's signer "
        f"{imports['botocore signer (first signed request)'] * 1000:.1f} ms, awscrt's "
        f"{imports['awscrt signer (alternative)'] * 1000:.1f} ms "
        f"({imports['botocore signer (first signed request)'] / imports['awscrt signer (alternative)']:.1f}x), "
        f"once per execution environment, on its first secret read (which signs with it, as its direct "
        f"targets' requests do); cryptography and an RSA key "
        f"{imports['forged-token key (first edge probe)'] * 1000:.1f} ms, once per environment that probes the edge. "
        f"The probe handler's own import ({probe * 1000:.1f} ms) pays neither.",
        "",
        f"**Cold start** (as shipped, what a fresh environment pays before its first request): the probe's "
        f"import ({shipped * 1000:.1f} ms) and its first secret read "
        f"({figures['reads'][SHIPPED_READS] * 1000:.1f} ms), of which botocore's signer is "
        f"{(figures['reads'][SHIPPED_READS] - figures['reads'][SIGNER_LOADED_READS]) * 1000:.1f} ms: "
        f"{(shipped + figures['reads'][SHIPPED_READS]) / (shipped + figures['reads'][SIGNER_LOADED_READS]):.2f}x "
        f"the same start with the signer already loaded.",
        "",
        f"**First invocation's secret read** (the client secret, moto on loopback; "
        f"median of {figures['import_runs']} fresh interpreters, after importing the probe from its zip):",
        "",
        "| reads | time | ratio to boto3 |",
        "|---|---:|---:|",
        *[f"| {name} | {seconds * 1000:.1f} ms | {seconds / figures['reads'][BOTO3_READS]:.2f}x |"
          for name, seconds in figures["reads"].items()],
        "",
        f"**Per probe, warm process** (loopback, fresh connection each time, {figures['probes']} rounds):",
        "",
        "| variant | median | p95 | median ratio to 2 plain POSTs | median ratio to 1 plain POST |",
        "|---|---:|---:|---:|---:|",
    ]
    times = figures["probe_ms"]
    two, one = _median(times["plain httpx, 2 POSTs"]), _median(times["plain httpx, 1 POST"])
    for name, values in times.items():
        median = _median(values)
        lines.append(f"| {name} | {median:.2f} ms | {_p95(values):.2f} ms | {median / two:.2f}x | {median / one:.2f}x |")
    lines += ["", "**Schema hash** (median):", "", "| tools | RFC 8785 + SHA-256 | json.dumps(sort_keys) + SHA-256 | ratio |",
              "|---|---:|---:|---:|"]
    for label, cost in figures["hash"].items():
        lines.append(f"| {label} | {cost['rfc8785_ms']:.3f} ms | {cost['json_dumps_ms']:.3f} ms "
                     f"| {cost['rfc8785_ms'] / cost['json_dumps_ms']:.1f}x |")
    lines += ["", "**SSE decoding** of one `tools/list` event in 16 KB chunks (median):", "",
              "| body | SseDecoder | json.loads of the body | ratio |", "|---|---:|---:|---:|"]
    for label, cost in figures["sse"].items():
        lines.append(f"| {label} | {cost['decoder_ms']:.2f} ms | {cost['json_loads_ms']:.2f} ms "
                     f"| {cost['decoder_ms'] / cost['json_loads_ms']:.2f}x |")
    return "\n".join(lines)


def run(quick: bool = False) -> dict[str, Any]:
    figures = run_benchmark(import_runs=3 if quick else 7, probes=40 if quick else 150)
    return {"title": "Probe: cold import and per-probe overhead over plain httpx", "markdown": report(figures)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--import-runs", type=int, default=7)
    parser.add_argument("--probes", type=int, default=150, help="rounds of each per-probe variant")
    parser.add_argument("--json", action="store_true", help="print raw figures as JSON")
    args = parser.parse_args(argv)
    figures = run_benchmark(args.import_runs, args.probes)
    print(json.dumps(figures) if args.json else report(figures))


if __name__ == "__main__":
    main()
