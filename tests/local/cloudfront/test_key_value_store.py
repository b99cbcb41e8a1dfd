"""The local CloudFront KeyValueStore (local/cloudfront/key_value_store.py) driven by boto3's own
``cloudfront-keyvaluestore`` client, SigV4A-signed through awscrt, on loopback."""

from __future__ import annotations

import json
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from functions.results.kvs import route_to
from local.cloudfront import key_value_store
from local.cloudfront.key_value_store import KvsServer, StoreReader, serving

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


def test_every_change_is_logged_with_the_etags_before_and_after(client, caplog):
    caplog.set_level("INFO", logger="local.kvs")
    first = etag(client)
    put = client.put_key(KvsARN=ARN, Key="region-health", Value='{"v":1,"avoid":["eu-west-1"]}', IfMatch=first)
    deleted = client.delete_key(KvsARN=ARN, Key="region-health", IfMatch=put["ETag"])
    history = [r.getMessage() for r in caplog.records if r.name == "local.kvs" and "ETag KV" in r.getMessage()]
    assert history == [f'ETag {first} -> {put["ETag"]}: put region-health={{"v":1,"avoid":["eu-west-1"]}}',
                       f'ETag {put["ETag"]} -> {deleted["ETag"]}: delete region-health']


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
        key_value_store.KeyValueStore(store_file, OTHER_ARN)
    for damaged in ("{not json", json.dumps({"arn": ARN, "items": {}})):
        store_file.write_text(damaged)
        with pytest.raises(SystemExit, match="is not a KeyValueStore file"):
            key_value_store.KeyValueStore(store_file, ARN)


def test_the_reader_sees_each_change_and_rereads_the_file_only_when_it_changed(client, store_file, monkeypatch):
    reads: list[Path] = []
    original = key_value_store.read_items

    def counting(path: Path) -> dict[str, str] | None:
        reads.append(path)
        return original(path)

    monkeypatch.setattr(key_value_store, "read_items", counting)
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


def test_the_emulator_runs_as_a_topology_child_and_keeps_what_was_written_after_a_stop(tmp_path):
    from local.supervisor import Supervisor, free_ports

    port = free_ports(1)[0]
    store = tmp_path / "kvs.json"
    with Supervisor(tmp_path / "logs") as supervisor:
        supervisor.wait_ready(supervisor.start(key_value_store.service_spec(port, store, ARN)))
        client = kvs_client(f"http://127.0.0.1:{port}")
        client.put_key(KvsARN=ARN, Key="region-health", Value="kept", IfMatch=etag(client))
        supervisor.stop("kvs")
        assert supervisor.services["kvs"].process.returncode == 0  # a clean shutdown on SIGTERM
    assert StoreReader(store).get("region-health") == "kept"


def test_a_body_above_the_limit_is_refused_without_reading_it(server):
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
    conn.putrequest("POST", f"/key-value-stores/{urllib.parse.quote(ARN, safe='')}/keys")
    conn.putheader("Content-Length", str(key_value_store.MAX_BODY_BYTES + 1))
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 400 and response.getheader("x-amzn-ErrorType") == "ValidationException"
    assert response.getheader("Connection") == "close"
    conn.close()


# --- the store's semantics against a model, under any sequence of changes -------------

keys = st.sampled_from(["a", "b", "region-health"])
values = st.text(max_size=20) | st.just("x" * 1011)  # 1011 + len("region-health") = 1024


class StoreMachine(RuleBasedStateMachine):
    """Every change lands exactly when it carries the current ETag and fits the limits;
    a refused change leaves the items and the ETag as they were."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.TemporaryDirectory()
        self.store = key_value_store.KeyValueStore(Path(self.dir.name) / "kvs.json", ARN)
        self.model: dict[str, str] = {}
        self.etags = [self.store.state.etag]

    def teardown(self) -> None:
        self.dir.cleanup()

    def _apply(self, change: Any, fresh: bool, expected: dict[str, str] | None) -> None:
        before = self.store.state.etag
        tag = before if fresh else next((t for t in self.etags if t != before), "KVNEVERISSUED")
        try:
            result = change(tag)
        except key_value_store.KvsError as exc:
            assert not fresh or expected is None or exc.code != "ConflictException"
            assert self.store.state.etag == before
            return
        assert fresh and expected is not None and tag == before
        self.model = expected
        assert result["_etag"] not in self.etags
        self.etags.append(result["_etag"])

    @rule(key=keys, value=values, fresh=st.booleans())
    def put(self, key: str, value: str, fresh: bool) -> None:
        fits = len(key.encode()) + len(value.encode()) <= key_value_store.MAX_ITEM_BYTES
        self._apply(lambda tag: self.store.put(ARN, key, value, tag), fresh, {**self.model, key: value} if fits else None)

    @precondition(lambda self: len(self.etags) > 1)
    @rule(key=keys, fresh=st.booleans())
    def delete(self, key: str, fresh: bool) -> None:
        expected = {k: v for k, v in self.model.items() if k != key} if key in self.model else None
        self._apply(lambda tag: self.store.delete(ARN, key, tag), fresh, expected)

    @rule(puts=st.dictionaries(keys, values, max_size=2), deletes=st.lists(keys, max_size=2), fresh=st.booleans())
    def update(self, puts: dict[str, str], deletes: list[str], fresh: bool) -> None:
        expected = {k: v for k, v in self.model.items() if k not in deletes} | puts
        fits = all(len(k.encode()) + len(v.encode()) <= key_value_store.MAX_ITEM_BYTES for k, v in puts.items())
        body = {"Puts": [{"Key": k, "Value": v} for k, v in puts.items()], "Deletes": [{"Key": k} for k in deletes]}
        self._apply(lambda tag: self.store.update(ARN, body, tag), fresh, expected if fits else None)

    @invariant()
    def matches_the_model_and_its_file(self) -> None:
        assert self.store.state.items == self.model
        assert key_value_store.read_items(self.store.path) == self.model
        assert StoreReader(self.store.path).get("region-health") == self.model.get("region-health")


StoreMachine.TestCase.settings = hsettings(max_examples=40, stateful_step_count=15, deadline=None)
test_the_store_behaves_as_its_model_under_any_sequence_of_changes = StoreMachine.TestCase
