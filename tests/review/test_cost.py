"""The monthly estimate: the committed prod estimate is the program's, lines computed by
hand from the price table agree, each part scales with the setting that drives it, and
what the estimate reads from the resource graph is what the program deploys."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from devkit.mock_program import ProgramRun
from edge.regions import AWS_REGIONS
from review import cost
from review.cost import (
    PARTS,
    CostError,
    Fleet,
    Function,
    Origin,
    Rounds,
    Schedule,
    StackFacts,
    Table,
    Traffic,
    committed_estimate,
    compare,
    cost_path,
    estimate,
    estimate_diff,
    facts_from_run,
    load_prices,
    probe_rounds,
    refresh_command,
)
from review.variants import SPREAD_REGIONS

PRICES = load_prices()
SECONDS_IN_730_HOURS = 730 * 3600
NO_TRAFFIC = Traffic(requests_per_month=0)

# Lines that are one per probe invocation (the rest of the probe part is per region).
PER_INVOCATION_PROBE_LINES = ("probe requests", "probe duration", "queue requests",
                              "consumer requests", "consumer duration")


def per_invocation_probe_cost(e: cost.Estimate) -> float:
    return sum(line.usd for line in e.lines if line.part == "probes" and line.item.startswith(PER_INVOCATION_PROBE_LINES))


def synthetic_stack(n_regions: int = 2, *, memory_mb: int = 1024, architecture: str = "arm64",
                    provisioned_min: int = 2, provisioned_max: int = 100, interval_s: int = 60) -> StackFacts:
    """A stack shaped as the program builds one (probes in every origin region, each
    probing the edge pinned to every origin region and every origin directly); the
    test below checks that shape against the program's own resource graph."""
    regions = SPREAD_REGIONS[:n_regions]
    origins = tuple(Origin(r, Function(r, memory_mb, architecture), provisioned_min, provisioned_max, 0.7) for r in regions)
    fleets = tuple(
        Fleet(r, Function(r, 256, "arm64"), Function(r, 256, "arm64"),
              tuple(Schedule(kind, t, interval_s) for kind in ("edge", "origin") for t in regions), 2,
              rounds=Rounds(interval_s, 60 - interval_s))
        for r in regions
    )
    per_region = {r: 1 for r in regions}
    return StackFacts(
        stack="synthetic", origins=origins, router=Function("us-east-1", 128, "x86_64"), viewer_functions=1,
        key_value_stores=0, price_class="PriceClass_All", fleets=fleets, table=Table(tuple(regions), ()),
        history_ttl_days=30, log_retention_days={r: 30 for r in regions}, alarms=per_region, kms_keys=per_region,
        secrets=per_region, queues=per_region,
    )


# --- the committed estimate ---------------------------------------------------------


def test_committed_prod_estimate_is_the_programs_estimate(prod: ProgramRun):
    path = cost_path("prod")
    committed = path.read_text() if path.exists() else ""
    diff = estimate_diff(committed, committed_estimate(prod), "prod")
    assert not diff, (
        "plans/prod.cost.txt differs from the estimate of the program as it is now.\n"
        f"If the change is intended, refresh it with:\n    {refresh_command('prod')}\n"
        f"and commit it with the change. Diff (committed -> program):\n{diff}"
    )


def test_cli_write_then_check_then_stale(prod: ProgramRun, tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setattr(cost, "_run_for", lambda stack: prod)
    assert cost.main(["--stack", "prod", "--write", "--plans-dir", str(tmp_path)]) == 0
    assert (tmp_path / "prod.cost.txt").read_text() == committed_estimate(prod)
    assert cost.main(["--stack", "prod", "--check", "--plans-dir", str(tmp_path)]) == 0
    (tmp_path / "prod.cost.txt").write_text("stale\n")
    capsys.readouterr()
    assert cost.main(["--stack", "prod", "--check", "--plans-dir", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("--- plans/prod.cost.txt (committed)") and "-stale" in out
    assert refresh_command("prod") in err


def test_json_has_every_part_the_total_and_the_assumptions(prod: ProgramRun, monkeypatch, capsys):
    monkeypatch.setattr(cost, "_run_for", lambda stack: prod)
    assert cost.main(["--stack", "prod", "--json", "--compare", "--requests-per-month", "2000000"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["currency"] == "USD"
    assert set(doc["monthly"]) == set(PARTS)
    # Each part is rounded to cents on its own: their sum may differ from the total by half a cent each.
    assert doc["total"] == pytest.approx(sum(doc["monthly"].values()), abs=0.005 * len(doc["monthly"]))
    assert doc["assumptions"]["requests_per_month"] == 2_000_000
    assert [o["option"].split(",")[0].split(" (")[0] for o in doc["compare"]] == [
        "provisioned concurrency", "SnapStart", "on-demand only", "Fargate Spot"]
    assert [o["mechanism"] for o in doc["served_region"] if o["true_on_aws"]] == ["Lambda@Edge origin-response trigger"]
    assert doc["served_region"][0]["monthly"] > 0 and "not deployed" in doc["served_region_verdict"]


def test_the_table_marks_assumptions_and_shows_the_square_law(prod: ProgramRun):
    text = committed_estimate(prod)
    assert "--requests-per-month 1,000,000 (assumption)" in text
    assert "probe invocations a month: 8,409,600" in text  # 4 probe regions x 8 targets x 43,800 x 6 rounds
    assert "grows with the square of the region count" in text
    for part in PARTS:
        assert f"\n{part} (" in text


def test_bad_traffic_flags_are_refused_naming_the_flag():
    with pytest.raises(CostError, match="--consumer-batch = 11"):
        Traffic(consumer_batch=11)
    with pytest.raises(CostError, match="--streaming-share = 1.5 must be between 0 and 1"):
        Traffic(streaming_share=1.5)
    with pytest.raises(CostError, match="--requests-per-month = -1"):
        Traffic(requests_per_month=-1)
    with pytest.raises(CostError, match="--response-kb = inf must be a finite number"):
        Traffic(response_kb=float("inf"))


def test_unknown_stack_is_an_error_not_a_traceback(capsys):
    assert cost.main(["--stack", "no-such-stack"]) == 2
    assert "Pulumi.no-such-stack.yaml does not exist" in capsys.readouterr().err


def test_a_bad_stack_file_is_reported_by_key_before_the_program_runs(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setattr(cost, "run_program", lambda *a, **kw: pytest.fail("the program ran"))
    bad = stack_file_with(tmp_path, "bad", probeIntervalSeconds=7)
    assert cost.main(["--stack", str(bad)]) == 2
    assert "mcp-edge:probeIntervalSeconds = 7: must be one of 10, 12, 15, 20, 30, 60 seconds" in capsys.readouterr().err


# --- the price table ------------------------------------------------------------------


def test_every_price_names_unit_region_date_and_aws_page():
    prices = list(PRICES)
    assert prices
    for price in prices:
        assert price.unit and price.region and price.as_of
        assert price.source.startswith("https://aws.amazon.com/")


def test_every_aws_region_has_a_cloudfront_geography_priced_for_requests_and_bytes():
    for region in AWS_REGIONS:
        geo = cost.geography(region)
        for price_id in ("cloudfront.https_requests", "cloudfront.data_out"):
            assert PRICES.lookup(price_id, geo) == (PRICES.lookup(price_id, geo)[0], True), (region, price_id)
            assert PRICES.lookup(price_id, geo)[0].region == geo


def test_lambda_prices_differ_by_architecture_and_lambda_at_edge_has_its_own():
    for kind in ("duration", "provisioned", "provisioned_duration"):
        assert PRICES.rate(f"lambda.{kind}.arm64") < PRICES.rate(f"lambda.{kind}.x86_64")
    assert PRICES.rate("lambda_edge.requests") > PRICES.rate("lambda.requests")
    assert PRICES.rate("lambda_edge.duration") > PRICES.rate("lambda.duration.x86_64")


def test_a_regional_price_for_us_east_1_only_stands_in_and_says_so():
    price, exact = PRICES.lookup("lambda.requests", "eu-west-1")
    assert price.region == "us-east-1" and not exact
    assert PRICES.lookup("lambda.requests", "us-east-1")[1]
    assert PRICES.lookup("kms.key", "eu-west-1") == (PRICES.lookup("kms.key")[0], True)
    e = estimate(synthetic_stack(2), Traffic(), PRICES)
    assert "lambda.requests" in e.reference_priced[SPREAD_REGIONS[0]]  # eu-central-1
    with pytest.raises(CostError, match="no price 'nothing'"):
        PRICES.lookup("nothing", "us-east-1")


GOOD_PRICE = {"id": '"x"', "usd": "1", "per": "1", "unit": '"u"', "region": '"us-east-1"', "as_of": '"2026-12-01"',
              "source": '"https://aws.amazon.com/x/"'}


@pytest.mark.parametrize(("change", "error"), [
    ({"source": '"https://example.com/"'}, "must be an AWS pricing page"),
    ({"region": '"mars-1"'}, "region = 'mars-1' must be an AWS region"),
    ({"as_of": '"last week"'}, "as_of = 'last week' must be a date"),
    ({"per": "0"}, "per = 0 must be a number > 0"),
    ({"unit": None}, "missing \\['unit'\\]"),
])
def test_a_price_without_its_unit_region_date_or_aws_page_is_refused(tmp_path: Path, change, error):
    fields = {k: v for k, v in {**GOOD_PRICE, **change}.items() if v is not None}
    table = tmp_path / "prices.toml"
    table.write_text("[[price]]\n" + "".join(f"{k} = {v}\n" for k, v in fields.items()))
    with pytest.raises(CostError, match=error):
        load_prices(table)
    table.write_text("[[price]]\n" + "".join(f"{k} = {v}\n" for k, v in GOOD_PRICE.items()))
    assert load_prices(table).rate("x", "us-east-1") == 1


# --- lines by hand ----------------------------------------------------------------------


@pytest.mark.parametrize(("memory_mb", "architecture"), [(1024, "arm64"), (2048, "x86_64")])
def test_one_provisioned_instance_for_a_month(memory_mb: int, architecture: str):
    facts = dataclasses.replace(synthetic_stack(1, memory_mb=memory_mb, architecture=architecture, provisioned_min=1),
                                fleets=())
    e = estimate(facts, NO_TRAFFIC, PRICES)
    rate = PRICES.rate(f"lambda.provisioned.{architecture}", "us-east-1")
    # 730 h x 3600 s x (memory / 1024) GB x the GB-s price
    assert e.part("provisioned_concurrency") == pytest.approx(730 * 3600 * memory_mb / 1024 * rate)
    assert e.part("provisioned_concurrency") == pytest.approx(
        {"arm64": 2_628_000 * 0.0000033334, "x86_64": 5_256_000 * 0.0000041667}[architecture])


def test_a_million_probe_invocations():
    facts = synthetic_stack(1)  # one fleet, two targets
    e = estimate(facts, Traffic(), PRICES)
    invocations = facts.probe_invocations_per_month
    assert invocations == 2 * 43_800
    per_million = per_invocation_probe_cost(e) * 1_000_000 / invocations
    t, gb = Traffic(), 256 / 1024
    by_hand = (
        0.20  # probe requests: $0.20 per million
        + 1_000_000 * t.probe_duration_ms / 1000 * gb * 0.0000133334  # probe duration, arm64
        + 3 * 0.40  # SQS: the destination's send, the mapping's receive and delete
        + 0.20  # consumer requests (one outcome per batch)
        + 1_000_000 * t.consumer_duration_ms / 1000 * gb * 0.0000133334  # consumer duration, arm64
    )
    assert per_million == pytest.approx(by_hand)


def test_a_replicated_write_is_billed_in_every_replica():
    facts = synthetic_stack(3)
    e = estimate(facts, Traffic(), PRICES)
    outcomes_per_fleet = 6 * 43_800  # 2 x 3 targets every minute
    writes = {line.region: line.quantity for line in e.lines if line.item.startswith("writes")}
    # Own replica: a two-put transaction (2 units each) and one put; each other replica:
    # the three replicated puts and, later, the two replicated TTL deletes.
    own, other = 2 * 2 + 1, 3 + 2
    assert writes == {r: outcomes_per_fleet * (own + 2 * other) for r in SPREAD_REGIONS[:3]}
    assert e.item("writes") == pytest.approx(sum(writes.values()) * 0.625 / 1_000_000)
    single = estimate(synthetic_stack(1), Traffic(), PRICES)
    assert [line.quantity for line in single.lines if line.item.startswith("writes")] == [2 * 43_800 * own]


def test_region_health_adds_the_streak_write_in_every_replica_and_its_reads():
    # Given the synthetic stack of test_a_replicated_write_is_billed_in_every_replica, with region health on
    plain = synthetic_stack(3)
    facts = dataclasses.replace(plain, fleets=tuple(dataclasses.replace(f, health_probe_regions=3) for f in plain.fleets))
    e, before = estimate(facts, Traffic(), PRICES), estimate(plain, Traffic(), PRICES)
    outcomes_per_fleet = 6 * 43_800
    writes = {line.region: line.quantity for line in e.lines if line.item.startswith("writes")}
    # Then the streak put is one more unit in its own replica and one more replicated put in each other
    own, other = 2 * 2 + 1 + 1, 3 + 1 + 2
    assert writes == {r: outcomes_per_fleet * (own + 2 * other) for r in SPREAD_REGIONS[:3]}
    # And each outcome reads the streak and the mirror, and queries six streaks (6 KB: two units)
    health_reads = [line for line in e.lines if line.item.startswith("reads (region health")]
    assert {line.region: line.quantity for line in health_reads} == {r: outcomes_per_fleet * (2 + 2) for r in SPREAD_REGIONS[:3]}
    assert e.total > before.total


def test_lambda_at_edge_and_the_viewer_function_run_on_every_edge_request():
    facts = dataclasses.replace(synthetic_stack(1), fleets=())
    e = estimate(facts, Traffic(requests_per_month=1_000_000), PRICES)
    assert e.item("Lambda@Edge router requests") == pytest.approx(0.60)
    assert e.item("Lambda@Edge router duration") == pytest.approx(1_000_000 * 0.002 * 128 / 1024 * 0.00005001)
    assert e.item("CloudFront Function invocations") == pytest.approx(0.10)
    assert e.item("KeyValueStore") == 0
    with_store = estimate(dataclasses.replace(facts, key_value_stores=1), Traffic(requests_per_month=1_000_000), PRICES)
    assert with_store.item("KeyValueStore reads") == pytest.approx(0.03)


def test_the_served_region_trigger_is_priced_per_edge_request_like_the_router_and_is_the_only_true_mechanism():
    facts = dataclasses.replace(synthetic_stack(1), fleets=())
    e = estimate(facts, Traffic(requests_per_month=1_000_000), PRICES)
    options = cost.served_region_options(e, PRICES)
    [true] = [o for o in options if o.true_on_aws]
    assert true.name == "Lambda@Edge origin-response trigger"
    assert true.monthly == pytest.approx(0.60 + 1_000_000 * 0.001 * 128 / 1024 * 0.00005001)
    assert all(o.monthly == 0 for o in options if not o.true_on_aws)
    # Twice the edge requests, twice the price: it is billed per request, not a monthly fee.
    twice = estimate(facts, Traffic(requests_per_month=2_000_000), PRICES)
    assert cost.served_region_options(twice, PRICES)[0].monthly == pytest.approx(2 * true.monthly)
    assert "not deployed" in cost.served_region_verdict(options)


def test_the_committed_estimate_shows_the_served_region_mechanisms_and_the_verdict(prod: ProgramRun):
    text = cost.committed_estimate(prod)
    section = text[text.index("## Naming the serving region"):text.index("## Prices used")]
    assert "Lambda@Edge origin-response trigger" in section and "viewer-response" in section
    assert "Web Adapter" in section and "Verdict:" in section


def test_viewers_outside_the_price_class_are_billed_at_an_included_edge():
    facts = dataclasses.replace(synthetic_stack(4), fleets=())  # eu-central-1, us-west-2, ap-southeast-2, sa-east-1
    everywhere = {line.region for line in estimate(facts, Traffic(), PRICES).lines if line.part == "cloudfront"}
    assert everywhere == {"europe", "north_america", "australia", "south_america"}
    cheap = dataclasses.replace(facts, price_class="PriceClass_100")
    assert {line.region for line in estimate(cheap, Traffic(), PRICES).lines if line.part == "cloudfront"} == {
        "europe", "north_america"}


def test_the_probe_interval_is_what_the_rounds_workflow_runs(prod: ProgramRun):
    facts = facts_from_run(prod)
    interval = prod.outputs["topology"]["probeIntervalSeconds"]
    assert {s.interval_s for f in facts.fleets for s in f.schedules} == {interval}
    assert {f.rounds for f in facts.fleets} == {Rounds(interval, 60 - interval)}


def test_the_rounds_workflow_is_priced_once_a_minute_per_probe_region(prod: ProgramRun):
    e = estimate(facts_from_run(prod), Traffic(), PRICES)
    starts = [line for line in e.lines if line.item.startswith("rounds workflow starts")]
    assert len(starts) == len(prod.outputs["topology"]["probeFleets"])
    assert {line.quantity for line in starts} == {43_800}
    durations = [line for line in e.lines if line.item.startswith("rounds workflow duration")]
    # to the last round's offset plus the invokes, at Express's 64 MB
    assert [line.quantity for line in durations] == pytest.approx([43_800 * 50.5 * 64 / 1024] * len(starts))


def test_a_schedule_without_a_rounds_workflow_cannot_be_priced(prod: ProgramRun):
    schedule = prod.of_type("aws:scheduler/schedule:Schedule")[0]
    without = copy.copy(prod)
    without.resources = [r for r in prod.resources if r.type != "aws:sfn/stateMachine:StateMachine"]
    with pytest.raises(CostError, match="probe rounds workflow"):
        probe_rounds(without, schedule)


# --- scaling properties -------------------------------------------------------------------

regions_counts = st.integers(min_value=1, max_value=len(SPREAD_REGIONS) - 1)


@settings(max_examples=30, deadline=None)
@given(n=regions_counts, minimum=st.integers(1, 40), memory=st.sampled_from([128, 512, 1024, 1769, 3008, 4096]),
       architecture=st.sampled_from(["arm64", "x86_64"]))
def test_twice_the_provisioned_minimum_or_memory_is_twice_the_provisioned_line(n, minimum, memory, architecture):
    base = estimate(synthetic_stack(n, provisioned_min=minimum, memory_mb=memory, architecture=architecture),
                    NO_TRAFFIC, PRICES)
    double_min = estimate(synthetic_stack(n, provisioned_min=2 * minimum, memory_mb=memory, architecture=architecture),
                          NO_TRAFFIC, PRICES)
    double_memory = estimate(synthetic_stack(n, provisioned_min=minimum, memory_mb=2 * memory, architecture=architecture),
                             NO_TRAFFIC, PRICES)
    assert double_min.part("provisioned_concurrency") == pytest.approx(2 * base.part("provisioned_concurrency"))
    assert double_memory.part("provisioned_concurrency") == pytest.approx(2 * base.part("provisioned_concurrency"))
    # Origin duration (the probes' calls) doubles with memory too.
    assert double_memory.item("duration") == pytest.approx(2 * base.item("duration"))


@settings(max_examples=30, deadline=None)
@given(n=regions_counts, interval=st.sampled_from([10, 12]))
def test_rounds_five_times_as_far_apart_are_a_fifth_of_the_probe_invocations(n, interval):
    every = estimate(synthetic_stack(n, interval_s=interval), Traffic(), PRICES)
    fifth = estimate(synthetic_stack(n, interval_s=5 * interval), Traffic(), PRICES)
    assert fifth.derived["probe_invocations"] == pytest.approx(every.derived["probe_invocations"] / 5, abs=1)
    assert per_invocation_probe_cost(fifth) == pytest.approx(per_invocation_probe_cost(every) / 5)


@settings(max_examples=30, deadline=None)
@given(n=regions_counts, interval=st.sampled_from([10, 12, 15, 20, 30, 60]))
def test_one_more_region_grows_the_probe_part_as_the_square_of_the_region_count(n, interval):
    now = estimate(synthetic_stack(n, interval_s=interval), Traffic(), PRICES)
    more = estimate(synthetic_stack(n + 1, interval_s=interval), Traffic(), PRICES)
    assert now.derived["probe_invocations"] == round(2 * n * n * 43_800 * 60 / interval)
    ratio = ((n + 1) / n) ** 2
    assert more.derived["probe_invocations"] == pytest.approx(now.derived["probe_invocations"] * ratio, abs=1)
    assert per_invocation_probe_cost(more) == pytest.approx(per_invocation_probe_cost(now) * ratio)
    # The whole probe part grows faster than the region count (per-region polling and
    # per-target metrics come on top of the per-invocation lines).
    assert more.part("probes") > now.part("probes") * (n + 1) / n


@settings(max_examples=20, deadline=None)
@given(requests=st.floats(0, 1e9), n=regions_counts)
def test_parts_add_up_to_the_total_and_none_is_negative(requests, n):
    e = estimate(synthetic_stack(n), Traffic(requests_per_month=requests), PRICES)
    assert all(usd >= 0 for usd in e.monthly.values())
    assert e.total == pytest.approx(sum(line.usd for line in e.lines))


@settings(max_examples=20, deadline=None)
@given(requests=st.floats(0, 1e10), n=regions_counts)
def test_auto_scaling_keeps_the_minimum_and_never_passes_the_maximum(requests, n):
    facts = synthetic_stack(n, provisioned_min=2, provisioned_max=20)
    e = estimate(facts, Traffic(requests_per_month=requests), PRICES)
    for origin in e.derived["origins"].values():
        assert 2 <= origin["provisioned_instances"] <= 20


# --- the origin's cold-start options beside the Fargate Spot rule of thumb ----------------------


def test_compare_shows_four_options_with_the_same_rest_of_the_stack():
    facts, traffic = synthetic_stack(2), Traffic()
    options = compare(facts, traffic, PRICES)
    assert len(options) == 4 and all(o.reasoning for o in options)
    rests = {round(o.stack_monthly - o.origin_monthly, 6) for o in options}
    assert len(rests) == 1
    today = estimate(facts, traffic, PRICES)
    assert options[0].stack_monthly == pytest.approx(today.total)
    on_demand = options[2].origin_monthly
    # SnapStart is on-demand plus the snapshot cache (a month of 1 GB per region) and restores.
    cache = 2 * 730 * 3600 * 1.0 * PRICES.rate("lambda.snapstart_cache")
    assert options[1].origin_monthly > on_demand + cache
    # Fargate Spot: 0.5 vCPU and 1 GB for 730 hours, plus a public address, per region.
    per_region = 730 * (0.5 * PRICES.rate("fargate_spot.vcpu") + 1.0 * PRICES.rate("fargate_spot.memory")
                        + PRICES.rate("vpc.public_ipv4"))
    assert options[3].origin_monthly == pytest.approx(2 * per_region)


# --- what the resource graph says ------------------------------------------------------------


def test_facts_are_what_the_program_deploys(prod: ProgramRun):
    facts = facts_from_run(prod)
    regions = set(facts.origin_regions)
    assert regions == set(prod.outputs["originUrls"])
    for fleet in facts.fleets:
        # The edge pinned to every origin region and every origin directly: the shape
        # synthetic_stack() assumes.
        assert sorted((s.target, s.target_region) for s in fleet.schedules) == sorted(
            (kind, r) for kind in ("edge", "origin") for r in regions)
        assert fleet.event_source_mappings == 2
        # Region health is on in prod: every probe region's consumer counts every probe region's votes.
        assert fleet.health_probe_regions == len(facts.fleets)
    assert facts.router.architecture == "x86_64" and facts.router.region == "us-east-1"
    fn_by_region = {fn.region: fn for fn in prod.of_type("aws:lambda/function:Function")
                    if fn.name.endswith("-function") and "origin" in fn.name}
    for origin in facts.origins:
        assert origin.function.memory_mb == fn_by_region[origin.region].inputs["memorySize"]
    assert sum(facts.alarms.values()) == len(prod.of_type("aws:cloudwatch/metricAlarm:MetricAlarm"))
    assert sum(facts.kms_keys.values()) == len(prod.of_type("aws:kms/key:Key"))
    # The probes' client secret, and the origin secret in every origin and probe region (prod: the same four).
    # The probes' client secret in each probe region (no origin secret any more).
    assert facts.secrets == {fleet.region: 1 for fleet in facts.fleets}
    assert facts.table is not None and set(facts.table.regions) == {f.region for f in facts.fleets}


def test_one_region_stack_has_a_sixteenth_of_prods_probe_invocations(prod: ProgramRun, one_region: ProgramRun):
    four, one = facts_from_run(prod), facts_from_run(one_region)
    assert (len(four.origins), len(one.origins)) == (4, 1)
    assert four.probe_invocations_per_month == 16 * one.probe_invocations_per_month
    # one-region turns provisioned concurrency off: today is on-demand, and --compare says so
    assert estimate(one, Traffic(), PRICES).part("provisioned_concurrency") == 0
    today, _, on_demand, _ = compare(one, Traffic(), PRICES)
    assert today.name == "today (no provisioned concurrency)"
    assert today.origin_monthly == pytest.approx(on_demand.origin_monthly)


def test_architecture_doc_shows_the_committed_prod_estimate(prod: ProgramRun):
    e, options, _ = cost.committed_figures(prod)
    doc = cost.DOC_FILE.read_text()
    assert cost.doc_summary(e, options) in doc, f"refresh it with: {refresh_command('prod')}"


def test_readme_names_the_command_next_to_the_offline_plan():
    readme = (cost.PROJECT_ROOT / "README.md").read_text()
    review_block = readme.split("### Code review without credentials", 1)[1].split("```", 2)[1]
    assert "review.plan --stack prod" in review_block and "review.cost --stack prod" in review_block


def stack_file_with(tmp_path: Path, name: str, **changes: object) -> Path:
    """A copy of Pulumi.prod.yaml with some mcp-edge keys changed (and a custom domain of its own:
    CloudFront gives a domain to one distribution, so two stacks of the project cannot share it)."""
    doc = yaml.safe_load((cost.PROJECT_ROOT / "Pulumi.prod.yaml").read_text())
    doc["config"]["mcp-edge:customDomain"] = f"mcp-{name}.acme.example"
    doc["config"].update({f"mcp-edge:{key}": value for key, value in changes.items()})
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def json_estimate(capsys, *argv: str) -> dict:
    capsys.readouterr()
    assert cost.main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_stack_file_path_is_priced_from_its_own_settings(prod: ProgramRun, tmp_path: Path, capsys):
    # Given prod's file with probe rounds every 30 s (a third as many as prod's), and one with 2048 MB origins
    three = stack_file_with(tmp_path, "three", probeIntervalSeconds=30)
    big = stack_file_with(tmp_path, "big", originMemoryMb=2048, originOverrides=[])
    # When each is priced through the command
    three_doc, big_doc = json_estimate(capsys, "--stack", str(three)), json_estimate(capsys, "--stack", str(big))
    # Then the probe invocations are a third of prod's, from the rounds workflows the program made
    assert prod.outputs["topology"]["probeIntervalSeconds"] == 10
    assert three_doc["derived"]["probe_invocations"] == facts_from_run(prod).probe_invocations_per_month / 3
    # And every origin keeps 2 provisioned instances of 2 GB for 730 hours
    rate = PRICES.rate("lambda.provisioned.arm64")
    assert big_doc["monthly"]["provisioned_concurrency"] == pytest.approx(4 * 2 * 2 * 2_628_000 * rate, abs=0.01)
    assert {o["memory_mb"] for o in big_doc["derived"]["origins"].values()} == {2048}


def test_traffic_beyond_the_scaling_maximum_spills_to_on_demand():
    facts = dataclasses.replace(synthetic_stack(1, provisioned_min=2, provisioned_max=4), fleets=())
    # 1e9 requests of 200 ms in a month: a mean concurrency of about 76, far above 4 instances
    e = estimate(facts, Traffic(requests_per_month=1e9, streaming_share=0), PRICES)
    origin = e.derived["origins"][SPREAD_REGIONS[0]]
    assert origin["provisioned_instances"] == 4
    busy = 1e9 * 0.2
    capacity = 4 * 730 * 3600
    assert e.item("duration on provisioned instances") == pytest.approx(capacity * 1.0 * PRICES.rate("lambda.provisioned_duration.arm64"))
    assert e.item("duration on demand (spillover)") == pytest.approx((busy - capacity) * PRICES.rate("lambda.duration.arm64"))


@given(busy=st.floats(0, 1e12), minimum=st.integers(0, 50), extra=st.integers(0, 50),
       target=st.floats(0.05, 1.0))
def test_provisioned_instances_follow_the_utilization_target_within_the_bounds(busy, minimum, extra, target):
    origin = Origin("us-east-1", Function("us-east-1", 1024, "arm64"), minimum, minimum + extra, target)
    instances = cost.provisioned_instances(origin, busy)
    if minimum == 0:
        assert instances == 0
    else:
        assert minimum <= instances <= minimum + extra
        if instances < minimum + extra:  # not capped: enough for the mean concurrency at the target
            assert instances * target * 730 * 3600 >= busy * (1 - 1e-9)


def test_compare_prices_snapstart_and_on_demand_as_stacks_in_those_modes_are_priced(
        prod: ProgramRun, variant_runs: dict[str, ProgramRun]):
    # Given prod, and the same stack deployed with originColdStart snapstart and none
    from review.variants import WITHOUT_PROVISIONED
    from tests.harness import run_program

    none_run = run_program("prod", config_overrides={**WITHOUT_PROVISIONED, "originColdStart": "none"})
    traffic = Traffic()
    options = {o.name: o for o in cost.compare(facts_from_run(prod), traffic, PRICES)}
    snapstart_facts = facts_from_run(variant_runs["snapstart"])
    assert all(o.snapstart and o.provisioned_min == 0 for o in snapstart_facts.origins)
    snapstart = cost.estimate(snapstart_facts, traffic, PRICES)
    on_demand = cost.estimate(facts_from_run(none_run), traffic, PRICES)
    # Then --compare's columns are what those stacks' own estimates say their origins cost
    assert options["SnapStart, no provisioned concurrency"].origin_monthly == pytest.approx(
        snapstart.part("provisioned_concurrency") + snapstart.part("origin_invocations"), abs=1e-9)
    assert options["on-demand only"].origin_monthly == pytest.approx(
        on_demand.part("provisioned_concurrency") + on_demand.part("origin_invocations"), abs=1e-9)
    # And a SnapStart stack's estimate bills the snapshot cache and the restores
    items = {line.item for line in snapstart.lines if line.part == "origin_invocations"}
    assert any(i.startswith("SnapStart snapshot cache") for i in items)
    assert any(i.startswith("SnapStart restores") for i in items)
    assert snapstart.part("provisioned_concurrency") == 0
    today = cost.compare(snapstart_facts, traffic, PRICES)[0]
    assert today.name == "today (SnapStart)" and today.origin_monthly == pytest.approx(
        options["SnapStart, no provisioned concurrency"].origin_monthly)


def test_an_image_stack_says_its_ecr_storage_is_not_estimated(prod: ProgramRun, variant_runs: dict[str, ProgramRun]):
    image = facts_from_run(variant_runs["image"])
    assert all(o.image for o in image.origins) and not any(o.image for o in facts_from_run(prod).origins)
    text = cost.render(cost.estimate(image, Traffic(), PRICES), PRICES)
    assert "- ECR storage and scans of the origin images (ap-northeast-1, ap-southeast-1, eu-west-1, us-east-1" in text
    assert "ECR storage" not in cost.render(cost.estimate(facts_from_run(prod), Traffic(), PRICES), PRICES)


# --- the web ACL -----------------------------------------------------------------------------


def test_the_web_acl_costs_its_fee_its_rules_and_every_edge_request():
    facts = dataclasses.replace(synthetic_stack(1), fleets=(), web_acls=(cost.WebAcl("acl", 6, 16),))
    e = estimate(facts, Traffic(requests_per_month=1_000_000), PRICES)
    assert e.item("WAF web ACL") == pytest.approx(5.00)
    assert e.item("WAF rules") == pytest.approx(6 * 1.00)
    assert e.item("WAF requests inspected") == pytest.approx(0.60)
    assert e.item("WAF body inspection") == 0
    assert e.part("firewall") == pytest.approx(11.60)
    deeper = dataclasses.replace(facts, web_acls=(cost.WebAcl("acl", 6, 48),))
    # Two more 16 KB steps at $0.30 per million each.
    assert estimate(deeper, Traffic(requests_per_month=1_000_000), PRICES).item(
        "WAF body inspection") == pytest.approx(0.60)
    assert estimate(dataclasses.replace(facts, web_acls=()), Traffic(), PRICES).part("firewall") == 0


def test_the_prod_web_acl_is_priced_from_the_program(prod: ProgramRun):
    (acl,) = facts_from_run(prod).web_acls
    assert acl == cost.WebAcl("acme-mcp-prod-edge", len(prod.one("aws:wafv2/webAcl:WebAcl")["rules"]), 16)


# --- the operators' view: alarms per metric read, the dashboard, metrics and traces ----------


def test_the_observability_facts_are_what_the_program_deploys(prod: ProgramRun):
    facts = facts_from_run(prod)
    alarms = prod.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")
    math_alarms = [a for a in alarms if a.inputs.get("metricQueries")]
    assert math_alarms  # the errors-while-probes-green alarms
    # A metric-math alarm is billed for each metric it reads (4: errors, invocations, two probe targets).
    assert sum(facts.alarm_metrics.values()) == len(alarms) + 3 * len(math_alarms)
    (dashboard,) = prod.of_type("aws:cloudwatch/dashboard:Dashboard")
    assert facts.dashboards == {dashboard.region: 1}
    assert facts.cloudfront_metric_subscriptions == 1
    assert all(o.tracing for o in facts.origins)


def observability_lines(e: cost.Estimate, item: str) -> list[cost.Line]:
    return [line for line in e.lines if line.part == "observability" and line.item.startswith(item)]


def test_the_edge_metrics_count_every_dimension_set_in_every_edge_region():
    facts = synthetic_stack(3)
    e = estimate(facts, Traffic(edge_decisions_seen=2, mcp_methods_seen=5, tools_called=10), PRICES)
    lines = observability_lines(e, "edge EMF metrics")
    assert {line.region for line in lines} == set(facts.origin_regions)
    # 2 decisions x (Requests and GateMilliseconds by decision + Requests by each of 5 methods, 10 tools and
    # the 2 Client values, probe and other)
    assert {line.quantity for line in lines} == {2 * (2 + 5 + 10 + 2)}
    assert lines[0].usd == pytest.approx(38 * PRICES.rate("cloudwatch.custom_metric", "us-east-1"))
    more_tools = estimate(facts, Traffic(edge_decisions_seen=2, mcp_methods_seen=5, tools_called=20), PRICES)
    assert observability_lines(more_tools, "edge EMF metrics")[0].quantity == 2 * (2 + 5 + 20 + 2)


def test_xray_traces_follow_lambdas_default_sampling_and_only_with_tracing_on():
    traced = dataclasses.replace(synthetic_stack(1), origins=tuple(
        dataclasses.replace(o, tracing=True) for o in synthetic_stack(1).origins))
    busy = Traffic(requests_per_month=10_000_000)
    (line,) = observability_lines(estimate(traced, busy, PRICES), "X-Ray traces")
    requests = estimate(traced, busy, PRICES).derived["origins"][traced.origins[0].region]["requests"]
    reservoir = 730 * 3600  # one a second
    assert line.quantity == pytest.approx(reservoir + 0.05 * (requests - reservoir), rel=1e-6)
    assert not observability_lines(estimate(synthetic_stack(1), busy, PRICES), "X-Ray traces")


def test_a_metric_math_alarm_is_billed_per_metric_and_the_dashboard_once():
    facts = dataclasses.replace(synthetic_stack(1), alarms={"us-east-1": 2}, alarm_metrics={"us-east-1": 5},
                                dashboards={"us-east-1": 1}, cloudfront_metric_subscriptions=1)
    e = estimate(facts, NO_TRAFFIC, PRICES)
    alarm_rate = PRICES.rate("cloudwatch.alarm", "us-east-1")
    assert e.part("alarms", "us-east-1") == pytest.approx(5 * alarm_rate)
    assert observability_lines(e, "CloudWatch dashboard")[0].usd == pytest.approx(
        PRICES.rate("cloudwatch.dashboard", "us-east-1"))
    assert observability_lines(e, "CloudFront additional metrics")[0].quantity == 8
