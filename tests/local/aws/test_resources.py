"""The stack's resources in a moto server, and global-table replication between regional copies."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pytest

from components.probe_fleet import queue_name
from functions.results.store import health_pk, streak_sk
from local.aws.resources import TableReplicator, client, provision, read_alerts
from local.plan import LocalPlan, Options, build_plan
from local.supervisor import ServiceSpec, Supervisor, free_ports
from tests.harness import ProgramRun


@pytest.fixture(scope="module")
def plan(prod: ProgramRun, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlan]:
    """The plan's resources in the emulator process the topology runs."""
    (port,) = free_ports(1)
    with Supervisor(tmp_path_factory.mktemp("emulator")) as sup:
        sup.start_all([ServiceSpec(name="aws-emulator", argv=("-m", "local.aws.moto_server", "--port", str(port)),
                                   port=port, ready_path="/moto-api/")])
        built = build_plan(Options(), run=prod)
        local = dataclasses.replace(built, ports=dataclasses.replace(built.ports, moto=port))
        provision(local)
        yield local


def test_queues_are_created_under_the_programs_names_with_their_attributes(plan: LocalPlan) -> None:
    for q in plan.queues:
        sqs = client(plan, "sqs", q.region)
        url = sqs.get_queue_url(QueueName=q.name)["QueueUrl"]
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        assert attrs["VisibilityTimeout"] == q.attributes["VisibilityTimeout"]
        if "RedrivePolicy" in q.attributes:
            assert json.loads(attrs["RedrivePolicy"])["deadLetterTargetArn"].endswith("quarantine-" + q.region)
    names = {q.name for q in plan.queues}
    assert {queue_name(plan.server_id, "results", r, plan.stack) for r in plan.probe_regions} <= names
    assert {queue_name(plan.server_id, "dlq", r, plan.stack) for r in plan.probe_regions} <= names
    assert all(f"-{plan.stack}-" in name for name in names)  # several stacks in one account never collide


def test_alerts_published_to_a_topic_reach_its_tap(plan: LocalPlan) -> None:
    topic = plan.topics[0]
    client(plan, "sns", topic.region).publish(TopicArn=topic.arn, Subject="down", Message="origin eu-west-1 is down")
    alerts = read_alerts(plan, topic)
    assert [(a["Subject"], a["Message"]) for a in alerts] == [("down", "origin eu-west-1 is down")]
    assert read_alerts(plan, topic) == []


def test_the_probe_client_secret_is_in_every_probe_region(plan: LocalPlan) -> None:
    for region in plan.probe_regions:
        (probe,) = [fn for fn in plan.functions if fn.region == region and "CLIENT_SECRET_NAME" in fn.environment]
        sm = client(plan, "secretsmanager", region)
        secret = sm.get_secret_value(SecretId=probe.environment["CLIENT_SECRET_NAME"])
        assert secret["SecretString"] == plan.issuer.clients["acme-mcp-probe"]


def test_changes_in_any_regional_copy_reach_every_other_copy_once(plan: LocalPlan) -> None:
    (table,) = plan.tables
    replicator = TableReplicator(plan, table, prefixes=())  # everything, as a global table does
    replicator.start()
    regions = table.copy_regions
    key = {"pk": {"S": "LATEST#acme-mcp"}, "sk": {"S": "TARGET#eu-west-1#edge@eu-west-1"}}

    def items() -> dict[str, dict | None]:
        return {r: client(plan, "dynamodb", r).get_item(TableName=table.name, Key=key).get("Item") for r in regions}

    def settle() -> None:
        while replicator.poll_once():
            pass

    client(plan, "dynamodb", "eu-west-1").put_item(TableName=table.name, Item={**key, "v": {"N": "1"}})
    settle()
    assert all(item == {**key, "v": {"N": "1"}} for item in items().values())
    client(plan, "dynamodb", table.region).update_item(
        TableName=table.name, Key=key, UpdateExpression="SET v = :v", ExpressionAttributeValues={":v": {"N": "2"}})
    settle()
    assert all(item["v"] == {"N": "2"} for item in items().values() if item)
    copied = replicator.copied
    settle()
    assert replicator.copied == copied  # its own writes are not copied back (no ping-pong)
    client(plan, "dynamodb", "ap-northeast-1").delete_item(TableName=table.name, Key=key)
    settle()
    assert all(item is None for item in items().values())


def test_by_default_only_alert_claims_and_health_streaks_are_replicated(plan: LocalPlan) -> None:
    (table,) = plan.tables
    replicator = TableReplicator(plan, table)
    replicator.start()
    claim = {"pk": {"S": "ALERT#acme-mcp"}, "sk": {"S": "target-down#origin@eu-west-1"}, "state": {"S": "claimed"}}
    streak = {"pk": {"S": health_pk("acme-mcp", "us-east-1")}, "sk": {"S": streak_sk("eu-west-1", "edge")},
              "failures": {"N": "2"}}
    local_only = {"pk": {"S": "HISTORY#acme-mcp#eu-west-1#edge@eu-west-1"}, "sk": {"S": "2026-11-29T10:00:00Z#r"}}
    ddb = client(plan, "dynamodb", "eu-west-1")
    for item in (claim, streak, local_only):
        ddb.put_item(TableName=table.name, Item=item)
    while replicator.poll_once():
        pass
    for region in table.copy_regions:
        other = client(plan, "dynamodb", region)
        for replicated in (claim, streak):
            key = {k: replicated[k] for k in ("pk", "sk")}
            assert other.get_item(TableName=table.name, Key=key).get("Item") == replicated
        found = other.get_item(TableName=table.name, Key=local_only).get("Item")
        assert (found is not None) == (region == "eu-west-1")
