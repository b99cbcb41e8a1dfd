"""devkit/conformance.py: reading the suite's results and comparing two runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devkit.conformance import (
    SEVERITY,
    Check,
    ConformanceRunError,
    ScenarioResult,
    differences,
    parse_checks,
    read_results,
    run_suite,
    verdict_table,
)

STATUSES = sorted(SEVERITY)


def write_checks(folder: Path, scenario: str, checks: list[dict[str, object]],
                 stamp: str = "2026-12-06T02-30-55-653Z") -> None:
    result = folder / f"server-{scenario}-{stamp}"
    result.mkdir(parents=True)
    (result / "checks.json").write_text(json.dumps(checks))


def test_results_are_read_per_scenario_from_the_suites_folders(tmp_path: Path) -> None:
    write_checks(tmp_path, "dns-rebinding-protection", [
        {"id": "localhost-host-rebinding-rejected", "status": "SUCCESS"},
        {"id": "localhost-host-valid-accepted", "status": "FAILURE", "errorMessage": "got 403"}])
    write_checks(tmp_path, "server-initialize", [{"id": "server-initialize", "status": "SUCCESS"}])
    results = read_results(tmp_path)
    assert set(results) == {"dns-rebinding-protection", "server-initialize"}
    rebinding = results["dns-rebinding-protection"]
    assert rebinding.verdict == "fail"
    assert rebinding.checks["localhost-host-valid-accepted"].message == "got 403"
    assert results["server-initialize"].passed


def test_a_warning_does_not_fail_a_scenario() -> None:
    assert parse_checks("tools-list", [{"id": "tools-name-format", "status": "WARNING"}]).passed


def test_a_repeated_check_id_keeps_its_most_severe_status() -> None:
    result = parse_checks("s", [{"id": "a", "status": "SUCCESS"}, {"id": "a", "status": "FAILURE"},
                                {"id": "a", "status": "WARNING"}])
    assert result.checks["a"].status == "FAILURE"


@pytest.mark.parametrize("raw", [{"id": "a"}, [{"status": "SUCCESS"}], [{"id": "a", "status": "PASSED"}], [3]])
def test_checks_the_suite_does_not_write_that_way_are_refused(raw: object) -> None:
    with pytest.raises(ConformanceRunError, match="checks.json"):
        parse_checks("s", raw)


def test_a_result_folder_named_otherwise_is_refused(tmp_path: Path) -> None:
    (tmp_path / "server-odd").mkdir()
    (tmp_path / "server-odd" / "checks.json").write_text("[]")
    with pytest.raises(ConformanceRunError, match="does not name that way"):
        read_results(tmp_path)


def test_an_unknown_requirement_set_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="2025-11-25"):
        run_suite("http://127.0.0.1:1/mcp", tmp_path, requirements="2025-06-18")


results_strategy = st.dictionaries(
    st.sampled_from(["ping", "tools-list", "dns-rebinding-protection"]),
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(STATUSES), max_size=3),
    max_size=3,
).map(lambda raw: {s: ScenarioResult(s, {i: Check(i, st_) for i, st_ in checks.items()}) for s, checks in raw.items()})


@given(results_strategy)
def test_a_run_has_no_differences_with_itself(results: dict[str, ScenarioResult]) -> None:
    assert differences(results, results) == []


@given(results_strategy, results_strategy)
def test_differences_name_exactly_the_checks_whose_status_differs(a: dict[str, ScenarioResult],
                                                                  b: dict[str, ScenarioResult]) -> None:
    found = differences(a, b)
    expected: set[tuple[str, str | None]] = set()
    for s in set(a) | set(b):
        if s not in a or s not in b:
            expected.add((s, None))
            continue
        for i in set(a[s].checks) | set(b[s].checks):
            sa = a[s].checks[i].status if i in a[s].checks else None
            sb = b[s].checks[i].status if i in b[s].checks else None
            if sa != sb:
                expected.add((s, i))
    assert {(d.scenario, d.check) for d in found} == expected
    assert len(differences(b, a)) == len(found)


def test_the_verdict_table_has_a_row_per_scenario_and_a_column_per_run() -> None:
    ok = ScenarioResult("ping", {"ping": Check("ping", "SUCCESS")})
    bad = ScenarioResult("ping", {"ping": Check("ping", "FAILURE")})
    table = verdict_table({"direct": {"ping": ok}, "edge": {"ping": bad}}).splitlines()
    assert table[0].split() == ["scenario", "direct", "edge"]
    assert table[1].split() == ["ping", "pass", "(0/1", "failed)", "fail", "(1/1", "failed)"]


@pytest.mark.parametrize(("direct", "edge", "worse"), [
    ("SUCCESS", "FAILURE", True), ("SUCCESS", "WARNING", True), ("WARNING", "FAILURE", True),
    ("SUCCESS", "absent", True), ("ran", "absent", True),
    ("FAILURE", "SUCCESS", False), ("absent", "SUCCESS", False), ("WARNING", "SUCCESS", False),
])
def test_a_difference_knows_whether_the_edge_did_worse(direct: str, edge: str, worse: bool) -> None:
    from devkit.conformance import Difference

    assert Difference("s", "c", direct, edge).worse_at_edge is worse


def test_the_lock_file_pins_the_suite_version_package_json_names() -> None:
    from devkit.conformance import SUITE_PACKAGE, SUITE_SOURCE, suite_version

    lock = json.loads((SUITE_SOURCE / "package-lock.json").read_text())
    assert lock["packages"][""]["dependencies"][SUITE_PACKAGE] == suite_version()
    assert lock["packages"][f"node_modules/{SUITE_PACKAGE}"]["version"] == suite_version()
