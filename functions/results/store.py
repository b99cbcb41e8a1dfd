"""The results table (DynamoDB; on AWS, this region's replica of the global table).

One table, string keys ``pk``/``sk``, TTL attribute ``expiresAt`` (epoch seconds):

=============================================  ==================================  ==========================
pk                                             sk                                  item
=============================================  ==================================  ==========================
``REQUEST#<requestId>``                        ``REQUEST``                         idempotency marker
``HISTORY#<server>#<probeRegion>#<target>``    ``<ISO time>#<requestId>``          one per probe outcome
``LATEST#<server>``                            ``TARGET#<probeRegion>#<target>``   latest state of a target
``LATEST#<server>``                            ``SKEW#<probeRegion>``              skew state of a probe region
``ALERT#<server>``                             ``<dedup key>``                     alert claim (dedup window)
``HEALTH#<server>#<originRegion>``             ``STREAK#<probeRegion>#<kind>``     region health streak
``HEALTH#<server>``                            ``PUBLISHED``                       mirror of the edge's document
=============================================  ==================================  ==========================

``<target>`` is ``edge@<region>`` or ``origin@<region>``; ``<kind>`` is ``edge`` or
``origin`` (the target without its region, which the partition key names).

A streak item (``health.evolve_streak``) counts the consecutive failures and successes
of the newest outcomes of one probe region's target for one origin region; only that
probe region's consumer writes it, in its own region's copy. The consumer reads every
probe region's streaks for an origin region with one query of its partition (and,
when its own vote would complete a change, each other probe region's in that region's
copy: ``owned_streaks``), and carries a region-avoided/restored alert in ``pendingAlerts`` until
it is published, like the latest items. The mirror holds the KeyValueStore document
(``value``, absent when there is none), its ``etag`` and when it last matched the
store (``readAtMs``): consumers decide against it and call the KeyValueStore API only
to write a change or to refresh a mirror older than a few minutes (see consumer.py).

History is written in one transaction with the request marker (``attribute_not_exists``), so a redelivered
message, or Lambda running the same invocation twice, writes nothing twice. The
marker also says whether the outcome was counted in the metrics (``countedBy``:
``pending`` until one delivery claims it, after every other step succeeded), so an
outcome whose first delivery failed halfway is counted by the retry, and once. Latest
and skew items change by optimistic concurrency (a ``version`` attribute), and carry
the alerts their change raised (``pendingAlerts``) until those are published: a
consumer that dies between the write and the publish leaves the alert for the
redelivery, instead of losing it.

Conditional writes on a global table hold within one region's replica only: two
consumers of different probe regions claiming the same alert in their own replicas
would both win (replication settles the item afterwards, last writer wins), and one
outage would page once per probe region. So alert claims (``ALERT#`` items: claim,
mark sent, release), for every alert kind (target down and recovered, drift, skew,
region avoided and restored), are written in one place, the table's home region
(``claims_client``), where DynamoDB serializes them: one change pages once, whichever
probe regions see it. Everything else is written in the consumer's own replica (the
other probe regions' streaks are also read in theirs: ``owned_streaks``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from .envelope import ProbeOutcome, TargetRef
from .state import Alert, iso_ms

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()
DAY_S = 86400
# Markers outlive the longest time a message can wait in a queue (DLQ: 14 days).
MIN_MARKER_TTL_S = 15 * DAY_S
# Streaks are read across regions (every consumer counts every probe region's votes).
HEALTH_PK_PREFIX = "HEALTH#"
COUNT_PENDING = "pending"


class ConcurrentUpdateError(RuntimeError):
    """Optimistic concurrency lost too often; the message is retried later."""


class StreakReadError(RuntimeError):
    """Another probe region's copy of its streaks could not be read (this region's replica still can)."""


def _to_dynamo(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: _to_dynamo(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_to_dynamo(v) for v in value]
    return value


def _from_dynamo(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _from_dynamo(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_dynamo(v) for v in value]
    return value


def serialize(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(v) for k, v in _to_dynamo(item).items()}


def deserialize(attributes: dict[str, Any]) -> dict[str, Any]:
    return _from_dynamo({k: _deserializer.deserialize(v) for k, v in attributes.items()})


def _condition_failed(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


# --- the key layout above, in one place (the local status page reads it too) ----------


def request_key(request_id: str) -> dict[str, str]:
    return {"pk": f"REQUEST#{request_id}", "sk": "REQUEST"}


def history_pk(server_id: str, probe_region: str, target_label: str) -> str:
    return f"HISTORY#{server_id}#{probe_region}#{target_label}"


def latest_pk(server_id: str) -> str:
    return f"LATEST#{server_id}"


def target_sk_prefix(probe_region: str) -> str:
    return f"TARGET#{probe_region}#"


def target_sk(probe_region: str, target: TargetRef) -> str:
    return target_sk_prefix(probe_region) + target.label


def skew_sk(probe_region: str) -> str:
    return f"SKEW#{probe_region}"


def health_pk(server_id: str, origin_region: str) -> str:
    return f"{HEALTH_PK_PREFIX}{server_id}#{origin_region}"


def streak_sk_prefix(probe_region: str = "") -> str:
    return f"STREAK#{probe_region}#" if probe_region else "STREAK#"


def streak_sk(probe_region: str, target_kind: str) -> str:
    return streak_sk_prefix(probe_region) + target_kind


def published_key(server_id: str) -> dict[str, str]:
    return {"pk": f"{HEALTH_PK_PREFIX}{server_id}", "sk": "PUBLISHED"}


def alert_pk(server_id: str) -> str:
    return f"ALERT#{server_id}"


def alert_key(alert: Alert) -> dict[str, str]:
    return {"pk": alert_pk(alert.server_id), "sk": alert.dedup_key}


def history_key(outcome: ProbeOutcome) -> dict[str, str]:
    iso = iso_ms(outcome.timestamp)
    if outcome.target is None:
        pk = f"HISTORY#INVALID-EVENT#{outcome.probe_region}"
    else:
        pk = history_pk(outcome.target.server_id, outcome.probe_region, outcome.target.label)
    return {"pk": pk, "sk": f"{iso}#{outcome.request_id}"}


def history_item(outcome: ProbeOutcome, queue: str, expires_at: int) -> dict[str, Any]:
    target = outcome.target
    item: dict[str, Any] = {
        **history_key(outcome),
        "requestId": outcome.request_id,
        "condition": outcome.condition,
        "status": outcome.status,
        "probeRegion": outcome.probe_region,
        "invokeCount": outcome.invoke_count,
        "queue": queue,
        "expiresAt": expires_at,
        "latencyMs": outcome.latency_ms,
        "schemaHash": outcome.schema_hash,
        "toolCount": outcome.tool_count,
        "era": outcome.era,
        "protocolVersion": outcome.protocol_version,
        "servedRegion": outcome.served_region,
        "httpStatus": outcome.http_status,
        "contentType": outcome.content_type,
        "errorType": outcome.error_type,
        "errorMessage": outcome.error_message,
        "promiseCheck": outcome.promise_check,
        "promiseStatus": outcome.promise_status,
        "promiseHttpStatus": outcome.promise_http_status,
        "result": outcome.result,
    }
    if target is not None:
        item.update(serverId=target.server_id, endpoint=target.endpoint, target=target.target,
                    targetRegion=target.target_region)
    else:
        item["requestPayload"] = repr(outcome.request_payload)[:2000]
    return item


class ResultsStore:
    def __init__(
        self,
        table_name: str,
        client: Any,
        *,
        history_ttl_s: int,
        dedup_window_s: int = 3600,
        clock: Callable[[], float] = time.time,
        claims_client: Any = None,
        region_client: Callable[[str], Any] | None = None,
    ):
        self.table = table_name
        self.client = client
        # The table's home region's client (None: this consumer runs there, ``client`` is it).
        self.claims_client = claims_client
        # Region -> the client of the table's copy there (None: not known), where that probe
        # region's consumer writes its streaks (``owned_streaks``).
        self.region_client = region_client
        self.history_ttl_s = history_ttl_s
        self.dedup_window_s = dedup_window_s
        self.clock = clock

    # --- history ----------------------------------------------------------------------

    def record_history(self, outcome: ProbeOutcome, queue: str) -> bool:
        """Write the history item once per request id; False if it was already written."""
        epoch = int(outcome.timestamp.timestamp())
        marker = {
            **request_key(outcome.request_id),
            "history": history_key(outcome),
            "countedBy": COUNT_PENDING,
            "expiresAt": epoch + max(self.history_ttl_s, MIN_MARKER_TTL_S),
        }
        try:
            self.client.transact_write_items(TransactItems=[
                {"Put": {"TableName": self.table, "Item": serialize(marker),
                         "ConditionExpression": "attribute_not_exists(pk)"}},
                {"Put": {"TableName": self.table,
                         "Item": serialize(history_item(outcome, queue, epoch + self.history_ttl_s))}},
            ])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons") or []
            if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                return False
            if not reasons and "ConditionalCheckFailed" in str(exc):
                return False
            raise
        return True

    def claim_count(self, request_id: str, token: str) -> bool:
        """True if this delivery (``token``, unique per attempt) is the one that counts the
        outcome in the metrics: the first claim wins; the same token wins again, so a
        call botocore retried after a lost response still counts, and a claim whose
        answer was lost is recognised by reading the marker back. Markers written
        before ``countedBy`` existed were counted when their history was written."""
        try:
            self.client.update_item(
                TableName=self.table,
                Key=serialize(request_key(request_id)),
                UpdateExpression="SET countedBy = :token",
                ConditionExpression="countedBy = :pending OR countedBy = :token",
                ExpressionAttributeValues=serialize({":token": token, ":pending": COUNT_PENDING}),
            )
        except ClientError as exc:
            if _condition_failed(exc):
                return False
            marker = self.get(**request_key(request_id))
            if marker is not None and marker.get("countedBy") == token:
                return True  # the claim took effect; only its answer was lost
            raise
        return True

    # --- latest and skew state (optimistic concurrency) ------------------------------

    def get(self, pk: str, sk: str, *, client: Any = None) -> dict[str, Any] | None:
        response = (client or self.client).get_item(TableName=self.table, Key=serialize({"pk": pk, "sk": sk}), ConsistentRead=True)
        return deserialize(response["Item"]) if "Item" in response else None

    def put_versioned(self, item: dict[str, Any], previous_version: int | None) -> bool:
        """Write ``item`` if the stored version is still ``previous_version`` (None: no item)."""
        item = {**item, "expiresAt": int(self.clock()) + self.history_ttl_s}
        if previous_version is None:
            condition, values = "attribute_not_exists(pk)", None
        else:
            condition, values = "version = :v", serialize({":v": previous_version})
        kwargs: dict[str, Any] = {"TableName": self.table, "Item": serialize(item), "ConditionExpression": condition}
        if values:
            kwargs["ExpressionAttributeValues"] = values
        try:
            self.client.put_item(**kwargs)
        except ClientError as exc:
            if _condition_failed(exc):
                return False
            raise
        return True

    def latest_targets(self, server_id: str, probe_region: str) -> list[dict[str, Any]]:
        return self._query(latest_pk(server_id), target_sk_prefix(probe_region))

    def streaks(self, server_id: str, origin_region: str) -> list[dict[str, Any]]:
        """Every probe region's streaks for one origin region (this region's replica)."""
        return self._query(health_pk(server_id, origin_region), streak_sk_prefix())

    def owned_streaks(self, server_id: str, origin_region: str, probe_region: str) -> list[dict[str, Any]] | None:
        """``probe_region``'s streaks for one origin region, read in that region's copy of the
        table, where its consumer writes them (so never behind replication); None when no
        client for that region is known. ``StreakReadError`` when that copy does not answer."""
        try:
            client = self.region_client(probe_region) if self.region_client is not None else None
            if client is None:
                return None
            return self._query(health_pk(server_id, origin_region), streak_sk_prefix(probe_region), client=client)
        except (ClientError, BotoCoreError) as exc:  # making the client included (no endpoint for the region)
            raise StreakReadError(f"{probe_region}'s streaks for {origin_region}: {type(exc).__name__}: {exc}") from exc

    def _query(self, pk: str, sk_prefix: str, client: Any = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": serialize({":pk": pk, ":prefix": sk_prefix}),
            "ConsistentRead": True,
        }
        while True:
            page = (client or self.client).query(**kwargs)
            items.extend(deserialize(i) for i in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def get_published(self, server_id: str) -> dict[str, Any] | None:
        key = published_key(server_id)
        return self.get(key["pk"], key["sk"])

    def put_published(self, server_id: str, etag: str, value: str | None, read_at_ms: int) -> None:
        """Mirror what the KeyValueStore holds (just read, or just written). Last writer
        wins: a mirror left behind by a race is refreshed from the store itself."""
        item = {**published_key(server_id), "etag": etag, "value": value, "readAtMs": read_at_ms}
        self.client.put_item(TableName=self.table, Item=serialize(item))

    def add_pending(self, pk: str, sk: str, alert: Alert) -> None:
        """Park ``alert`` on an existing item until it is published; the version moves,
        so a concurrent ``put_versioned`` from an older read cannot drop it."""
        self.client.update_item(
            TableName=self.table,
            Key=serialize({"pk": pk, "sk": sk}),
            UpdateExpression="SET pendingAlerts.#id = :alert, version = version + :one",
            ConditionExpression="attribute_exists(pendingAlerts)",
            ExpressionAttributeNames={"#id": alert.id},
            ExpressionAttributeValues=serialize({":alert": alert.to_dict(), ":one": 1}),
        )

    def remove_pending(self, pk: str, sk: str, alert_id: str) -> None:
        try:
            self.client.update_item(
                TableName=self.table,
                Key=serialize({"pk": pk, "sk": sk}),
                UpdateExpression="REMOVE pendingAlerts.#id",
                ConditionExpression="attribute_exists(pendingAlerts.#id)",
                ExpressionAttributeNames={"#id": alert_id},
            )
        except ClientError as exc:
            if not _condition_failed(exc):
                raise

    # --- alert claims (one alert per change, across probe regions) --------------------
    # All in the home region's copy of the table, read back strongly consistent there.

    @property
    def claims(self) -> Any:
        return self.client if self.claims_client is None else self.claims_client

    def claim_alert(self, alert: Alert) -> str:
        """``claimed`` (publish it), ``resend`` (we claimed it before but may not have
        published), ``sent`` (we did) or ``suppressed`` (another observer did)."""
        now = int(self.clock())
        key = alert_key(alert)
        claim = {**key, "alertId": alert.id, "kind": alert.kind, "state": "claimed", "claimedAt": now,
                 "expiresAt": now + self.dedup_window_s}
        try:
            self.claims.put_item(
                TableName=self.table,
                Item=serialize(claim),
                # TTL deletion is lazy (hours to days): an expired claim counts as absent.
                ConditionExpression="attribute_not_exists(pk) OR expiresAt < :now",
                ExpressionAttributeValues=serialize({":now": now}),
            )
            return "claimed"
        except ClientError as exc:
            if not _condition_failed(exc):
                raise
        existing = self.get(key["pk"], key["sk"], client=self.claims) or {}
        if existing.get("alertId") != alert.id:
            return "suppressed"
        return "sent" if existing.get("state") == "sent" else "resend"

    def mark_sent(self, alert: Alert) -> None:
        self.claims.update_item(
            TableName=self.table,
            Key=serialize(alert_key(alert)),
            UpdateExpression="SET #state = :sent",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=serialize({":sent": "sent"}),
        )

    def release_claim(self, alert: Alert) -> None:
        """Undo a claim whose publish failed, so the retry (or another region) can alert."""
        try:
            self.claims.delete_item(
                TableName=self.table,
                Key=serialize(alert_key(alert)),
                ConditionExpression="alertId = :id",
                ExpressionAttributeValues=serialize({":id": alert.id}),
            )
        except ClientError as exc:
            if not _condition_failed(exc):
                raise
