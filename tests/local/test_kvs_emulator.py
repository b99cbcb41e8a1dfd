"""The local CloudFront KeyValueStore (local/kvs_emulator.py) driven by boto3's own
``cloudfront-keyvaluestore`` client, SigV4A-signed through awscrt, on loopback."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from functions.results.kvs import route_to
from local import kvs_emulator
from local.kvs_emulator import KvsServer, StoreReader, serving

ARN = "arn:aws:cloudfront::123456789012:key-value-store/0b1c2d3e-1111-2222-3333-444455556666"
OTHER_ARN = "arn:aws:cloudfront::123456789012:key-value-store/ffffffff-1111-2222-3333-444455556666"


def kvs_client(url: str) -> Any:
    client = boto3.client("cloudfront-keyvaluestore", region_name="eu-west-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    route_to(client, url)
    return client


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    return tmp_path / "kvs.json"


@pytest.fixture
def server(store_file: Path) -> Iterator[KvsServer]:
    with serving(store_file, ARN) as srv:
        yield srv


@pytest.fixture
def client(server: KvsServer) -> Any:
    return kvs_client(server.url)


def etag(client: Any) -> str:
    return str(client.describe_key_value_store(KvsARN=ARN)["ETag"])


def error_code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


def test_a_new_store_is_described_empty_with_an_etag(client):
    described = client.describe_key_value_store(KvsARN=ARN)
    assert described["KvsARN"] == ARN and described["ItemCount"] == 0 and described["TotalSizeInBytes"] == 0
    assert described["Status"] == "READY" and described["ETag"]


def test_put_then_get_and_list_return_the_value_and_every_change_moves_the_etag(client):
    first = etag(client)
    put = client.put_key(KvsARN=ARN, Key="region-health", Value='{"v":1}', IfMatch=first)
    assert put["ETag"] != first and put["ItemCount"] == 1 and put["TotalSizeInBytes"] == len("region-health") + 7
    assert etag(client) == put["ETag"]
    got = client.get_key(KvsARN=ARN, Key="region-health")
    assert (got["Key"], got["Value"], got["ItemCount"]) == ("region-health", '{"v":1}', 1)
    assert client.list_keys(KvsARN=ARN)["Items"] == [{"Key": "region-health", "Value": '{"v":1}'}]
    deleted = client.delete_key(KvsARN=ARN, Key="region-health", IfMatch=put["ETag"])
    assert deleted["ItemCount"] == 0 and deleted["ETag"] not in (first, put["ETag"])


@pytest.mark.parametrize("operation", ["put", "delete", "update"])
def test_a_change_with_a_stale_etag_is_a_conflict_and_changes_nothing(client, operation):
    stale = etag(client)
    current = client.put_key(KvsARN=ARN, Key="k", Value="one", IfMatch=stale)["ETag"]
    calls = {
        "put": lambda: client.put_key(KvsARN=ARN, Key="k", Value="two", IfMatch=stale),
        "delete": lambda: client.delete_key(KvsARN=ARN, Key="k", IfMatch=stale),
        "update": lambda: client.update_keys(KvsARN=ARN, IfMatch=stale, Puts=[{"Key": "k", "Value": "two"}]),
    }
    with pytest.raises(client.exceptions.ConflictException) as exc:
        calls[operation]()
    assert exc.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
    assert client.get_key(KvsARN=ARN, Key="k")["Value"] == "one" and etag(client) == current


def test_update_keys_applies_puts_and_deletes_at_once_or_not_at_all(client):
    tag = client.update_keys(KvsARN=ARN, IfMatch=etag(client),
                             Puts=[{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}])["ETag"]
    with pytest.raises(client.exceptions.ValidationException):
        client.update_keys(KvsARN=ARN, IfMatch=tag, Deletes=[{"Key": "a"}],
                           Puts=[{"Key": "c", "Value": "3"}, {"Key": "d", "Value": "x" * 1024}])
    assert etag(client) == tag
    assert {i["Key"] for i in client.list_keys(KvsARN=ARN)["Items"]} == {"a", "b"}
    done = client.update_keys(KvsARN=ARN, IfMatch=tag, Deletes=[{"Key": "a"}], Puts=[{"Key": "c", "Value": "3"}])
    assert done["ItemCount"] == 2
    assert {i["Key"]: i["Value"] for i in client.list_keys(KvsARN=ARN)["Items"]} == {"b": "2", "c": "3"}


def test_key_plus_value_may_reach_one_kilobyte_and_no_more(client):
    key = "region-health"
    tag = client.put_key(KvsARN=ARN, Key=key, Value="v" * (1024 - len(key)), IfMatch=etag(client))["ETag"]
    with pytest.raises(client.exceptions.ValidationException) as exc:
        client.put_key(KvsARN=ARN, Key=key, Value="v" * (1025 - len(key)), IfMatch=tag)
    assert "1024" in str(exc.value)
    with pytest.raises(client.exceptions.ValidationException):
        client.put_key(KvsARN=ARN, Key="k" * 513, Value="", IfMatch=tag)
    assert etag(client) == tag


def test_another_store_and_a_missing_key_are_not_found(client):
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.describe_key_value_store(KvsARN=OTHER_ARN)
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.get_key(KvsARN=ARN, Key="region-health")
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.delete_key(KvsARN=ARN, Key="region-health", IfMatch=etag(client))


def test_list_keys_pages_in_key_order(client):
    puts = [{"Key": f"k{i:02d}", "Value": str(i)} for i in range(7)]
    client.update_keys(KvsARN=ARN, IfMatch=etag(client), Puts=puts)
    pages = list(client.get_paginator("list_keys").paginate(KvsARN=ARN, PaginationConfig={"PageSize": 3}))
    assert [len(p["Items"]) for p in pages] == [3, 3, 1]
    assert [i["Key"] for p in pages for i in p["Items"]] == [p["Key"] for p in puts]


def test_a_request_not_signed_with_sigv4a_is_denied(server):
    quoted = urllib.parse.quote(ARN, safe="")
    request = urllib.request.Request(f"{server.url}/key-value-stores/{quoted}",
                                     headers={"Authorization": "AWS4-HMAC-SHA256 Credential=testing/..."})
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(request, timeout=5)
    assert exc.value.code == 403 and exc.value.headers["x-amzn-ErrorType"] == "AccessDeniedException"
    assert "SigV4A" in json.loads(exc.value.read())["message"]


def test_the_store_survives_a_restart_and_its_file_is_only_ever_whole(store_file):
    with serving(store_file, ARN) as srv:
        client = kvs_client(srv.url)
        tag = client.put_key(KvsARN=ARN, Key="region-health", Value="x", IfMatch=etag(client))["ETag"]
    assert [p.name for p in store_file.parent.iterdir()] == [store_file.name]  # no temporary file left
    with serving(store_file, ARN) as srv:
        client = kvs_client(srv.url)
        assert etag(client) == tag and client.get_key(KvsARN=ARN, Key="region-health")["Value"] == "x"
    with pytest.raises(SystemExit, match="holds the store"):
        kvs_emulator.KeyValueStore(store_file, OTHER_ARN)


def test_the_reader_sees_each_change_and_rereads_the_file_only_when_it_changed(client, store_file, monkeypatch):
    reads: list[Path] = []
    original = kvs_emulator.read_items

    def counting(path: Path) -> dict[str, str] | None:
        reads.append(path)
        return original(path)

    monkeypatch.setattr(kvs_emulator, "read_items", counting)
    reader = StoreReader(store_file)
    assert reader.get("region-health") is None
    tag = client.put_key(KvsARN=ARN, Key="region-health", Value="one", IfMatch=etag(client))["ETag"]
    assert [reader.get("region-health") for _ in range(5)] == ["one"] * 5
    client.put_key(KvsARN=ARN, Key="region-health", Value="two", IfMatch=tag)
    assert reader.get("region-health") == "two" and reader.get("other") is None
    assert len(reads) == 3  # the empty store, then each of the two changes


def test_the_reader_of_a_missing_or_damaged_file_reads_no_keys(tmp_path):
    path = tmp_path / "kvs.json"
    reader = StoreReader(path)
    assert reader.get("region-health") is None
    path.write_text("{not json")
    assert reader.get("region-health") is None
    path.write_text(json.dumps({"items": {"region-health": 5}}))
    assert reader.get("region-health") is None
