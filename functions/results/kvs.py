"""The published region health: one key of the stack's CloudFront KeyValueStore.

Read with ``DescribeKeyValueStore`` (the store's ETag) then ``GetKey`` (the value),
in that order, so the value is never older than the ETag: a write with that ETag
either lands on exactly the state read, or fails with ``ConflictException`` because
someone wrote since. Written with ``PutKey`` (``IfMatch``: the ETag read).

The KeyValueStore API is SigV4A-signed (boto3 needs ``awscrt``, botocore's ``crt``
extra) and its endpoint is derived from the store's ARN
(``https://<account>.cloudfront-kvs.global.api.aws``), so an ``endpoint_url`` would
still get the account prepended to its host; ``route_to`` sends the requests to a
fixed URL instead (the local topology's emulator, local/cloudfront/key_value_store.py).
"""

from __future__ import annotations

from typing import Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from botocore.exceptions import BotoCoreError, ClientError

from .health import REGION_HEALTH_KEY


class HealthStoreError(RuntimeError):
    """The KeyValueStore could not be read or written (the next outcome tries again)."""


class Published(NamedTuple):
    etag: str
    value: str | None  # None: the key does not exist


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


class HealthStore:
    def __init__(self, client: Any, arn: str, key: str = REGION_HEALTH_KEY):
        self.client, self.arn, self.key = client, arn, key

    def read(self) -> Published:
        try:
            etag = str(self.client.describe_key_value_store(KvsARN=self.arn)["ETag"])
            try:
                value: str | None = str(self.client.get_key(KvsARN=self.arn, Key=self.key)["Value"])
            except ClientError as exc:
                if _code(exc) != "ResourceNotFoundException":
                    raise
                value = None  # the store exists (described above); the key does not, yet
        except (ClientError, BotoCoreError) as exc:
            raise HealthStoreError(f"reading {self.key!r} from KeyValueStore {self.arn}: {exc}") from exc
        return Published(etag, value)

    def put(self, value: str, etag: str) -> str | None:
        """Write if the store is still at ``etag``: the new ETag, or None on a conflict."""
        try:
            return str(self.client.put_key(KvsARN=self.arn, Key=self.key, Value=value, IfMatch=etag)["ETag"])
        except ClientError as exc:
            if _code(exc) == "ConflictException":
                return None
            raise HealthStoreError(f"writing {self.key!r} to KeyValueStore {self.arn}: {exc}") from exc
        except BotoCoreError as exc:
            raise HealthStoreError(f"writing {self.key!r} to KeyValueStore {self.arn}: {exc}") from exc


def route_to(client: Any, endpoint_url: str) -> None:
    """Send every request of a ``cloudfront-keyvaluestore`` client to ``endpoint_url``
    (scheme and host:port; the request's path and query are kept), before signing."""
    target = urlsplit(endpoint_url)
    if target.scheme not in ("http", "https") or not target.netloc:
        raise ValueError(f"{endpoint_url!r} is not an http(s) URL")

    def before_sign(request: Any, **_: Any) -> None:
        parts = urlsplit(request.url)
        request.url = urlunsplit((target.scheme, target.netloc, parts.path, parts.query, ""))

    client.meta.events.register("before-sign.cloudfront-keyvaluestore", before_sign)
