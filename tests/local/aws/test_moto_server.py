"""The local AWS emulator: DynamoDB transactions all-or-nothing and safe under concurrent clients."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from moto import mock_aws

from local.aws import moto_server
from local.supervisor import ServiceSpec, Supervisor, free_ports

TABLE = "results"


def _create(ddb: Any) -> None:
    ddb.create_table(
        TableName=TABLE, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )


def _marker_and_history(request_id: str) -> list[dict[str, Any]]:
    return [
        {"Put": {"TableName": TABLE, "Item": {"pk": {"S": f"REQUEST#{request_id}"}, "sk": {"S": "REQUEST"}},
                 "ConditionExpression": "attribute_not_exists(pk)"}},
        {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "HISTORY#x"}, "sk": {"S": request_id}}}},
    ]


@pytest.fixture
def patched(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setattr(moto_server.DynamoDBBackend, "transact_write_items", moto_server.transact_write_items)
    monkeypatch.setattr(moto_server.Table, "query", moto_server.query)
    monkeypatch.setattr(moto_server.Table, "all_items", moto_server.all_items)
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        _create(ddb)
        yield ddb


def _stream_events(ddb: Any) -> list[str]:
    from moto.dynamodb.models import dynamodb_backends

    shard = dynamodb_backends["123456789012"]["us-east-1"].tables[TABLE].stream_shard
    assert shard is not None
    return [record.record["eventName"] for record in shard.items]


def test_a_transaction_whose_condition_fails_writes_nothing_and_streams_nothing(patched: Any) -> None:
    patched.transact_write_items(TransactItems=_marker_and_history("r1"))
    assert _stream_events(patched) == ["INSERT", "INSERT"]
    with pytest.raises(ClientError) as info:
        patched.transact_write_items(TransactItems=_marker_and_history("r1"))
    reasons = [r["Code"] for r in info.value.response["CancellationReasons"]]
    assert reasons == ["ConditionalCheckFailed", "None"]
    assert len(patched.query(TableName=TABLE, KeyConditionExpression="pk = :p",
                             ExpressionAttributeValues={":p": {"S": "HISTORY#x"}})["Items"]) == 1
    assert _stream_events(patched) == ["INSERT", "INSERT"]


def test_updates_and_deletes_apply_together(patched: Any) -> None:
    patched.put_item(TableName=TABLE, Item={"pk": {"S": "a"}, "sk": {"S": "1"}, "v": {"N": "1"}})
    patched.transact_write_items(TransactItems=[
        {"Update": {"TableName": TABLE, "Key": {"pk": {"S": "a"}, "sk": {"S": "1"}}, "UpdateExpression": "SET v = :v",
                    "ConditionExpression": "v = :old", "ExpressionAttributeValues": {":v": {"N": "2"}, ":old": {"N": "1"}}}},
        {"Delete": {"TableName": TABLE, "Key": {"pk": {"S": "b"}, "sk": {"S": "1"}}}},
    ])
    item = patched.get_item(TableName=TABLE, Key={"pk": {"S": "a"}, "sk": {"S": "1"}})["Item"]
    assert item["v"] == {"N": "2"}


def test_concurrent_transactions_through_the_server_never_fail(tmp_path: Path) -> None:
    """Moto's own server answered 500 to some of these (shared state mutated under a deep copy)."""
    (port,) = free_ports(1)
    with Supervisor(tmp_path) as sup:
        sup.start_all([ServiceSpec(name="emulator", argv=("-m", "local.aws.moto_server", "--port", str(port)),
                                   port=port, ready_path="/moto-api/")])
        ddb = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{port}",
                           aws_access_key_id="t", aws_secret_access_key="t",
                           config=Config(retries={"max_attempts": 1}, max_pool_connections=20))
        _create(ddb)
        errors: list[Exception] = []

        def writer(n: int) -> None:
            for i in range(25):
                try:
                    ddb.transact_write_items(TransactItems=_marker_and_history(f"w{n}-{i}"))
                except Exception as exc:
                    errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        history = ddb.query(TableName=TABLE, KeyConditionExpression="pk = :p",
                            ExpressionAttributeValues={":p": {"S": "HISTORY#x"}})["Items"]
        assert len(history) == 200


def test_a_query_reads_its_partition_in_order_with_pages_and_conditions(patched: Any) -> None:
    for pk in ("a", "b", "c"):
        for n in range(30):
            patched.put_item(TableName=TABLE, Item={"pk": {"S": pk}, "sk": {"S": f"{n % 2}#{n:03d}"}})

    def query(**kw: Any) -> list[str]:
        out: list[str] = []
        while True:
            page = patched.query(TableName=TABLE, Limit=7, **kw)
            out += [i["sk"]["S"] for i in page["Items"]]
            if "LastEvaluatedKey" not in page:
                return out
            kw["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    odd = sorted(f"1#{n:03d}" for n in range(1, 30, 2))
    assert query(KeyConditionExpression="pk = :p AND begins_with(sk, :s)",
                 ExpressionAttributeValues={":p": {"S": "b"}, ":s": {"S": "1#"}}) == odd
    assert query(KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "c"}},
                 ScanIndexForward=False)[:3] == ["1#029", "1#027", "1#025"]
    assert query(KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "nothing"}}) == []
    # A scan still sees every partition.
    assert len(patched.scan(TableName=TABLE)["Items"]) == 90
