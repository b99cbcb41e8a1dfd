"""The consumer exactly as the program uploads it: its zip (from the program's resource
inputs under mocks) run in a fresh interpreter, with the environment the program
sets, against moto server holding a table built from the program's table definition."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from tests.functions.results.conftest import (
    HASH_A,
    HASH_B,
    T0,
    MotoServer,
    Record,
    extract_function_package,
    failure,
    probe_result,
    run_in_package,
    sqs_event,
)
from tests.harness import ProgramRun

REGION = "us-east-1"  # the first probe region of the prod stack: the table's home

SCRIPT = """
import json, pathlib, sys
import results.handler as h
assert pathlib.Path(h.__file__).is_relative_to(pathlib.Path.cwd()), h.__file__
import boto3, aws_lambda_powertools
assert pathlib.Path(boto3.__file__).is_relative_to(pathlib.Path.cwd()), "boto3 must be the pinned, packaged one"

class Context:
    function_name = "acme-mcp-probe-consumer"; memory_limit_in_mb = 256; aws_request_id = "c-1"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:acme-mcp-probe-consumer"
    def get_remaining_time_in_millis(self): return 30000

results = [h.handler(json.loads(line), Context()) for line in pathlib.Path("events.jsonl").read_text().splitlines()]
print(json.dumps(results))
"""


def create_from_program(prod: ProgramRun, moto: MotoServer) -> dict[str, str]:
    """The table, topic and an inbox for the topic, as the program defines them; the
    consumer's environment as the program sets it."""
    table = prod.one("aws:dynamodb/table:Table")
    assert table.region == REGION
    dynamodb = moto.client("dynamodb", REGION)
    key_types = {table["hashKey"]: "HASH", table["rangeKey"]: "RANGE"}
    dynamodb.create_table(
        TableName=table["name"],
        KeySchema=[{"AttributeName": name, "KeyType": kind} for name, kind in key_types.items()],
        AttributeDefinitions=[{"AttributeName": a["name"], "AttributeType": a["type"]} for a in table["attributes"]],
        BillingMode=table["billingMode"],
    )
    dynamodb.update_time_to_live(TableName=table["name"], TimeToLiveSpecification={
        "Enabled": table["ttl"]["enabled"], "AttributeName": table["ttl"]["attributeName"]})
    consumer = next(f for f in prod.of_type("aws:lambda/function:Function")
                    if f.region == REGION and "-consumer-function" in f.name)
    env = dict(consumer["environment"]["variables"])
    topic_name = env["ALERT_TOPIC_ARN"].rsplit(":", 1)[-1]
    sns, sqs = moto.client("sns", REGION), moto.client("sqs", REGION)
    assert sns.create_topic(Name=topic_name)["TopicArn"] == env["ALERT_TOPIC_ARN"]
    inbox = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    inbox_arn = sqs.get_queue_attributes(QueueUrl=inbox, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=env["ALERT_TOPIC_ARN"], Protocol="sqs", Endpoint=inbox_arn)
    env["INBOX_URL"] = inbox
    return env


def test_shipped_consumer_writes_history_and_alerts_once(prod: ProgramRun, moto_server: MotoServer, tmp_path: Path):
    package = extract_function_package(prod, f"probes-{REGION}-consumer-function", tmp_path / "pkg")
    env = create_from_program(prod, moto_server)
    inbox = env.pop("INBOX_URL")
    results_arn = f"arn:aws:sqs:{REGION}:123456789012:acme-mcp-probe-results-{REGION}"
    first = Record(response=probe_result(HASH_A), at=T0, probe_region=REGION)
    changed = Record(response=probe_result(HASH_B), at=T0 + dt.timedelta(minutes=1), probe_region=REGION)
    failed = failure(at=T0 + dt.timedelta(minutes=2), probe_region=REGION)
    batches: list[dict[str, Any]] = [
        sqs_event(first.json(), queue_arn=results_arn),
        sqs_event(changed.json(), "poison", queue_arn=results_arn, message_ids=["m-ok", "m-poison"]),
        sqs_event(changed.json(), queue_arn=results_arn),  # redelivered
        sqs_event(failed.json(), queue_arn=env["DEAD_LETTER_QUEUE_ARN"]),
    ]
    (package / "events.jsonl").write_text("\n".join(json.dumps(b) for b in batches))

    responses = run_in_package(package, SCRIPT, {**env, **moto_server.env(REGION)})

    assert responses[1] == {"batchItemFailures": [{"itemIdentifier": "m-poison"}]}
    assert all(r == {"batchItemFailures": []} for i, r in enumerate(responses) if i != 1)
    dynamodb = moto_server.client("dynamodb", REGION)
    items = dynamodb.scan(TableName=env["TABLE_NAME"])["Items"]
    history = [i for i in items if i["pk"]["S"].startswith("HISTORY#")]
    assert sorted(i["status"]["S"] for i in history) == ["failed", "healthy", "healthy"]
    sqs = moto_server.client("sqs", REGION)
    alerts = sqs.receive_message(QueueUrl=inbox, MaxNumberOfMessages=10).get("Messages", [])
    kinds = [json.loads(m["Body"])["MessageAttributes"]["alertType"]["Value"] for m in alerts]
    assert kinds == ["schema-drift"]


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


def test_shipped_consumer_holds_the_awscrt_botocore_signs_sigv4a_with_built_for_its_architecture(prod: ProgramRun):
    """The KeyValueStore API is SigV4A-signed: botocore needs the exact awscrt its ``crt``
    extra pins, as a native module for the function's architecture (arm64: ELF AArch64)."""
    import re
    import zipfile

    function = next(f for f in prod.of_type("aws:lambda/function:Function")
                    if f.region == REGION and "-consumer-function" in f.name)
    assert function["architectures"] == ["arm64"]
    with zipfile.ZipFile(function["code"].path) as zf:
        names = zf.namelist()
        botocore_meta = next(n for n in names if re.fullmatch(r"botocore-[^/]+\.dist-info/METADATA", n))
        pinned = re.search(r"Requires-Dist: awscrt ?\(?==([\d.]+)\)? ?; extra == .crt.", zf.read(botocore_meta).decode())
        shipped = [n for n in names if re.fullmatch(r"awscrt-[^/]+\.dist-info/METADATA", n)]
        native = [n for n in names if re.fullmatch(r"_awscrt\.[^/]*\.so", n)]
        assert pinned and len(shipped) == 1 and len(native) == 1, (pinned, shipped, native)
        assert shipped[0] == f"awscrt-{pinned.group(1)}.dist-info/METADATA"
        elf = zf.read(native[0])[:20]
    assert elf[:4] == b"\x7fELF" and int.from_bytes(elf[18:20], "little") == 183  # EM_AARCH64
