"""The stack's AWS resources in the moto server, and a replicator for global tables.

``provision(plan)`` creates, under the program's names and in the program's regions,
every SQS queue (attributes, redrive and redrive-allow policies included), DynamoDB
table (with a copy in each replica region), SNS topic, and the probe client secret
in Secrets Manager (the operator creates that one on AWS; locally it holds the dev
issuer's secret for the probe client). Each alert topic also gets a local "tap"
queue subscribed to it, where the status page and the tests read published alerts.

``python -m local.aws.resources replicate --plan PLAN`` replicates between the regional
copies of each global table the way DynamoDB global tables do: it reads each copy's
stream and applies a change made in one region to the others (last writer wins),
skipping the changes it wrote itself. Only the items some reader needs from another
region are replicated (``REPLICATED_PREFIXES``: the alert claims, which every consumer
writes in the home region's copy and which replicate from there as on AWS, and the region
health streaks, which every consumer counts as votes). Everything else a consumer writes
is read only in its own region, where the status page reads it too: copying it three
times over made the emulator the bottleneck of the whole topology (a put costs moto
about 12 ms for a probe history item).
"""

from __future__ import annotations

import argparse
import faulthandler
import hashlib
import json
import logging
import signal
import threading
import time
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from functions.results.store import HEALTH_PK_PREFIX
from local.plan import FAKE_AWS_CREDENTIALS, LocalPlan, TableSpec, TopicSpec

log = logging.getLogger("local.aws")
TAP_SUFFIX = "-local-tap"
REPLICATION_POLL_S = 0.5  # global tables replicate within about a second
# Partition key prefixes read across regions (functions/results/store.py: alert claims,
# region health streaks).
REPLICATED_PREFIXES = ("ALERT#", HEALTH_PK_PREFIX)
BATCH_WRITE_MAX = 25  # DynamoDB BatchWriteItem limit


def client(plan: LocalPlan, service: str, region: str) -> Any:
    return boto3.client(
        service, region_name=region, endpoint_url=plan.moto_url,
        aws_access_key_id=FAKE_AWS_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_AWS_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=FAKE_AWS_CREDENTIALS["AWS_SESSION_TOKEN"],
        config=Config(retries={"max_attempts": 3, "mode": "standard"}),
    )


def tap_queue_name(topic: TopicSpec) -> str:
    return topic.name + TAP_SUFFIX


def _create_table(plan: LocalPlan, table: TableSpec, region: str) -> None:
    ddb = client(plan, "dynamodb", region)
    keys = [{"AttributeName": table.hash_key, "KeyType": "HASH"}]
    if table.range_key:
        keys.append({"AttributeName": table.range_key, "KeyType": "RANGE"})
    kwargs: dict[str, Any] = {
        "TableName": table.name,
        "KeySchema": keys,
        "AttributeDefinitions": [{"AttributeName": a["name"], "AttributeType": a["type"]} for a in table.attributes],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if table.stream_view_type or table.replica_regions:
        kwargs["StreamSpecification"] = {"StreamEnabled": True,
                                         "StreamViewType": table.stream_view_type or "NEW_AND_OLD_IMAGES"}
    ddb.create_table(**kwargs)
    if table.ttl_attribute:
        ddb.update_time_to_live(TableName=table.name, TimeToLiveSpecification={
            "Enabled": True, "AttributeName": table.ttl_attribute})


def provision(plan: LocalPlan) -> None:
    """Create every resource of the plan in the (fresh) moto server."""
    for q in plan.queues:
        client(plan, "sqs", q.region).create_queue(QueueName=q.name, Attributes=q.attributes)
    for table in plan.tables:
        for region in table.copy_regions:
            _create_table(plan, table, region)
    for topic in plan.topics:
        sns = client(plan, "sns", topic.region)
        sns.create_topic(Name=topic.name)
        sqs = client(plan, "sqs", topic.region)
        tap_url = sqs.create_queue(QueueName=tap_queue_name(topic))["QueueUrl"]
        tap_arn = sqs.get_queue_attributes(QueueUrl=tap_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic.arn, Protocol="sqs", Endpoint=tap_arn)
    for region, by_name in plan.secrets.items():
        sm = client(plan, "secretsmanager", region)
        for name, value in by_name.items():
            sm.create_secret(Name=name, SecretString=value)


def read_alerts(plan: LocalPlan, topic: TopicSpec, max_messages: int = 10) -> list[dict[str, Any]]:
    """Alerts published to ``topic`` since the last read (the SNS envelopes), removed from the tap."""
    sqs = client(plan, "sqs", topic.region)
    url = sqs.get_queue_url(QueueName=tap_queue_name(topic))["QueueUrl"]
    alerts: list[dict[str, Any]] = []
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=max_messages, WaitTimeSeconds=0)
        batch = messages.get("Messages") or []
        if not batch:
            return alerts
        for m in batch:
            alerts.append(json.loads(m["Body"]))
        sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)])


# --- global tables ---------------------------------------------------------------------------


def _image_digest(image: dict[str, Any] | None) -> str:
    return hashlib.sha256(json.dumps(image, sort_keys=True, default=str).encode()).hexdigest() if image else "deleted"


class TableReplicator:
    """Copies each change of one regional copy of a table to every other copy."""

    def __init__(self, plan: LocalPlan, table: TableSpec, prefixes: tuple[str, ...] = REPLICATED_PREFIXES):
        self.plan, self.table, self.prefixes = plan, table, prefixes
        self.regions = table.copy_regions
        self.ddb = {r: client(plan, "dynamodb", r) for r in self.regions}
        self.streams = {r: client(plan, "dynamodbstreams", r) for r in self.regions}
        self.iterators: dict[tuple[str, str], str | None] = {}
        # (region, key) -> digest of the image this replicator wrote there: its own
        # writes come back on that region's stream and must not be copied again.
        self.own_writes: dict[tuple[str, str], list[str]] = {}
        self.copied = 0

    def start(self) -> None:
        for region in self.regions:
            stream_arn = self.ddb[region].describe_table(TableName=self.table.name)["Table"]["LatestStreamArn"]
            shards = self.streams[region].describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
            for shard in shards:
                iterator = self.streams[region].get_shard_iterator(
                    StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")
                self.iterators[(region, shard["ShardId"])] = iterator["ShardIterator"]

    def _key(self, keys: dict[str, Any]) -> str:
        return json.dumps(keys, sort_keys=True)

    def poll_once(self, stop: threading.Event | None = None) -> int:
        """Read each copy's new stream records and write the net changes to the other copies."""
        copied = 0
        for (region, shard), iterator in list(self.iterators.items()):
            if iterator is None or (stop is not None and stop.is_set()):
                continue
            response = self.streams[region].get_records(ShardIterator=iterator)
            self.iterators[(region, shard)] = response.get("NextShardIterator")
            # Net change per key in this read (last writer wins), then one batch per target.
            changes: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {}
            for record in response.get("Records", []):
                change = record["dynamodb"]
                partition = next(iter(change["Keys"][self.table.hash_key].values()), "")
                if self.prefixes and not str(partition).startswith(self.prefixes):
                    continue
                key = self._key(change["Keys"])
                image = change.get("NewImage") if record["eventName"] != "REMOVE" else None
                echoes = self.own_writes.get((region, key), [])
                if _image_digest(image) in echoes:
                    echoes.remove(_image_digest(image))
                    continue
                changes[key] = (change["Keys"], image)
            if changes:
                self._write(region, changes)
                copied += len(changes)
        self.copied += copied
        return copied

    def _write(self, source: str, changes: dict[str, tuple[dict[str, Any], dict[str, Any] | None]]) -> None:
        requests = [{"DeleteRequest": {"Key": keys}} if image is None else {"PutRequest": {"Item": image}}
                    for keys, image in changes.values()]
        for target in self.regions:
            if target == source:
                continue
            for key, (_, image) in changes.items():
                self.own_writes.setdefault((target, key), []).append(_image_digest(image))
            for start in range(0, len(requests), BATCH_WRITE_MAX):
                pending: Any = {self.table.name: requests[start:start + BATCH_WRITE_MAX]}
                while pending:
                    pending = self.ddb[target].batch_write_item(RequestItems=pending).get("UnprocessedItems")


def replicate(plan: LocalPlan, stop: threading.Event, ready_file: Path | None = None) -> None:
    replicators = [TableReplicator(plan, t) for t in plan.tables if t.replica_regions]
    for r in replicators:
        r.start()
    if ready_file is not None:
        ready_file.write_text("ready")
    while not stop.is_set():
        for r in replicators:
            try:
                r.poll_once(stop)
            except Exception as exc:  # the emulator going away at shutdown
                log.warning(json.dumps({"replicationError": f"{type(exc).__name__}: {exc}"}))
        stop.wait(REPLICATION_POLL_S)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Provision the local AWS emulator, or replicate its global tables.")
    parser.add_argument("command", choices=["provision", "replicate"])
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--ready-file", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: every thread's stack to the log
    plan = LocalPlan.read(args.plan)
    if args.command == "provision":
        provision(plan)
        return
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    started = time.monotonic()
    replicate(plan, stop, args.ready_file)
    log.info(json.dumps({"replicator": "stopped", "uptimeS": round(time.monotonic() - started)}))


if __name__ == "__main__":
    main()
