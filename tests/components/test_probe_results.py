"""ProbeResults under Pulumi mocks: the results table of the prod stack, a global table in its
home region with a replica in every other probe region, and what changes when probe regions do."""

from __future__ import annotations

from tests.components.test_probe_fleet import CONFIG, PROBE_REGIONS, actions_on, consumer_function, role_statements
from tests.harness import ProgramRun, Resource, run_program


def test_results_table_is_a_global_table_with_a_replica_in_every_other_probe_region(prod: ProgramRun):
    table = prod.one("aws:dynamodb/table:Table")
    assert table.region == PROBE_REGIONS[0]
    assert [r["regionName"] for r in table["replicas"]] == sorted(PROBE_REGIONS[1:])  # sorted: order is no change
    assert table["streamEnabled"] is True and table["streamViewType"] == "NEW_AND_OLD_IMAGES"
    assert table["billingMode"] == "PAY_PER_REQUEST"
    assert (table["hashKey"], table["rangeKey"]) == ("pk", "sk")
    assert table["ttl"] == {"attributeName": "expiresAt", "enabled": True}
    assert prod.outputs["resultsTable"] == table["name"] == "acme-mcp-prod-probe-results"


def table_of(run: ProgramRun) -> Resource:
    return run.one("aws:dynamodb/table:Table")


def test_reordering_or_removing_probe_regions_changes_no_tables_home_only_its_replicas(prod: ProgramRun):
    # Given prod's table (home us-east-1, set in the stack file)
    before = table_of(prod)
    # When probeRegions is reordered, or loses its first region (the home)
    reordered = run_program("prod", config_overrides={"probeRegions": list(reversed(PROBE_REGIONS))})
    without_home = run_program("prod", config_overrides={"probeRegions": PROBE_REGIONS[1:]})
    # Then the table keeps its logical name, region and every input: reordering changes nothing ...
    for run in (reordered, without_home):
        after = table_of(run)
        assert (after.name, after.region, after["name"]) == (before.name, before.region, before["name"]) \
            == (before.name, CONFIG.probes.table_home_region, before["name"])
        assert {k: v for k, v in after.inputs.items() if k != "replicas"} == \
            {k: v for k, v in before.inputs.items() if k != "replicas"}
    assert table_of(reordered)["replicas"] == before["replicas"]
    # ... and losing a probe region only changes the replicas (an in-place update), the home kept
    assert [r["regionName"] for r in table_of(without_home)["replicas"]] == sorted(PROBE_REGIONS[1:])
    # every remaining consumer still writes its own region's copy, and claims its alerts in the home's
    home = before.region
    for region in PROBE_REGIONS[1:]:
        consumer = consumer_function(without_home, region)
        access = actions_on(role_statements(without_home, consumer["role"]))
        assert access["dynamodb:PutItem"] == {f"arn:aws:dynamodb:{r}:123456789012:table/{before['name']}"
                                              for r in (region, home)}
        assert consumer["environment"]["variables"]["ALERT_CLAIM_REGION"] == home


def test_without_a_home_region_the_table_lives_in_the_first_probe_region_as_before_with_a_warning(caplog):
    run = run_program("prod", config_overrides={"resultsTableHomeRegion": None,
                                                "probeRegions": ["eu-west-1", "us-east-1"]})
    table = table_of(run)
    assert table.region == "eu-west-1" and [r["regionName"] for r in table["replicas"]] == ["us-east-1"]
    assert any("resultsTableHomeRegion is not set" in r.getMessage() and "set it to eu-west-1" in r.getMessage()
               for r in caplog.records if r.levelname == "WARNING")


def test_a_stack_that_sets_the_home_region_gets_no_warning(caplog):
    run_program("prod")
    assert not [r for r in caplog.records if "resultsTableHomeRegion" in r.getMessage()]
