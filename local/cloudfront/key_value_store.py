"""A CloudFront KeyValueStore on loopback (moto has none), and the local edge's reader.

``python -m local.cloudfront.key_value_store --port PORT --file STORE.json --arn ARN`` (ready when
``GET /healthz`` answers) serves the
subset of the CloudFront KeyValueStore REST API (botocore's service model
``cloudfront-keyvaluestore`` 2022-07-26) that boto3's client uses:

=========================  ======  ===========================================
operation                  method  path (``{arn}`` percent-encoded)
=========================  ======  ===========================================
DescribeKeyValueStore      GET     ``/key-value-stores/{arn}``
ListKeys                   GET     ``/key-value-stores/{arn}/keys``
UpdateKeys                 POST    ``/key-value-stores/{arn}/keys``
GetKey                     GET     ``/key-value-stores/{arn}/keys/{key}``
PutKey                     PUT     ``/key-value-stores/{arn}/keys/{key}``
DeleteKey                  DELETE  ``/key-value-stores/{arn}/keys/{key}``
=========================  ======  ===========================================

As on AWS: every change needs the store's current ETag in ``If-Match`` (a stale one
is a ``ConflictException``, 409) and answers the new one in ``ETag``; keys are 1-512
bytes and key + value at most 1 KB (``ValidationException``, 400); the store holds at
most 5 MB (``ServiceQuotaExceededException``, 402); another ARN is a
``ResourceNotFoundException`` (404), and so is a missing key. Requests must be
SigV4A-signed (``AWS4-ECDSA-P256-SHA256``, with ``X-Amz-Region-Set``), so a client
without awscrt fails here as it would on AWS; the signature itself is not verified.
Errors carry ``x-amzn-ErrorType`` and a JSON ``message``, which botocore parses into
``ClientError`` codes.

The store persists to one JSON file, replaced atomically on every change (each change
is logged, with the ETags before and after, so the log is the store's history), so the
local edge reads it with ``StoreReader`` (no HTTP on the viewer's path, as the
CloudFront Function reads its KeyValueStore at the edge).

boto3 derives the API endpoint from the store's ARN (``<account>.<endpoint host>``),
so local clients route their requests here with ``functions.results.kvs.route_to``.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import logging
import os
import secrets
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from local.supervisor import ServiceSpec

log = logging.getLogger("local.kvs")
MAX_KEY_BYTES = 512
MAX_ITEM_BYTES = 1024  # key + value
MAX_STORE_BYTES = 5 * 1024 * 1024
MAX_LIST_RESULTS = 50  # ListKeys' MaxResults bound in the service model
MAX_BODY_BYTES = 4 * 1024 * 1024
SIGV4A = "AWS4-ECDSA-P256-SHA256"
HEALTHZ = "/healthz"  # readiness, for the supervisor (not part of the AWS API)


class KvsError(Exception):
    STATUS = {"ValidationException": 400, "ServiceQuotaExceededException": 402, "AccessDeniedException": 403,
              "ResourceNotFoundException": 404, "ConflictException": 409, "InternalServerException": 500}

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message, self.status = code, message, self.STATUS[code]


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _size(key: str, value: str) -> int:
    return len(key.encode()) + len(value.encode())


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a reader sees the old file or the new one, never part."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class StoreState:
    arn: str
    etag: str
    created: str
    last_modified: str
    items: dict[str, str]

    @property
    def total_bytes(self) -> int:
        return sum(_size(k, v) for k, v in self.items.items())

    def to_json(self) -> str:
        return json.dumps({"arn": self.arn, "etag": self.etag, "created": self.created,
                           "lastModified": self.last_modified, "items": self.items}, indent=1, sort_keys=True)


def read_items(path: Path) -> dict[str, str] | None:
    """The items of a store file; None when it is missing or not a store file."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    items = doc.get("items") if isinstance(doc, dict) else None
    if not isinstance(items, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in items.items()):
        return None
    return items


class KeyValueStore:
    """One store, persisted to ``path``; every method is one API operation."""

    def __init__(self, path: Path, arn: str):
        self.path, self.arn = Path(path), arn
        self.lock = threading.Lock()
        self.state = self._load()

    def _load(self) -> StoreState:
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            now = _now()
            state = StoreState(self.arn, self._new_etag(), now, now, {})
            write_atomically(self.path, state.to_json())
            return state
        except ValueError:
            raise SystemExit(f"{self.path} is not a KeyValueStore file: delete it or use another --file") from None
        if not isinstance(doc, dict) or doc.get("arn") != self.arn:
            held = doc.get("arn") if isinstance(doc, dict) else None
            raise SystemExit(f"{self.path} holds the store {held!r}, not {self.arn!r}: use another --file")
        items = read_items(self.path)
        if items is None or not all(isinstance(doc.get(k), str) for k in ("etag", "created", "lastModified")):
            raise SystemExit(f"{self.path} is not a KeyValueStore file: delete it or use another --file")
        return StoreState(self.arn, doc["etag"], doc["created"], doc["lastModified"], items)

    @staticmethod
    def _new_etag() -> str:
        return "KV" + base64.b32encode(secrets.token_bytes(10)).decode().rstrip("=")

    def _check_arn(self, arn: str) -> None:
        if arn != self.arn:
            raise KvsError("ResourceNotFoundException", f"Key value store {arn} does not exist")

    def _check_etag(self, if_match: str | None) -> None:
        if not if_match:
            raise KvsError("ValidationException", "If-Match (the store's ETag) is required")
        if if_match != self.state.etag:
            raise KvsError("ConflictException",
                           f"Pre-condition failed: ETag {if_match} is not the store's current ETag")

    @staticmethod
    def _check_item(key: Any, value: Any) -> None:
        if not isinstance(key, str) or not 1 <= len(key.encode()) <= MAX_KEY_BYTES:
            raise KvsError("ValidationException", f"Key must be 1-{MAX_KEY_BYTES} bytes")
        if not isinstance(value, str):
            raise KvsError("ValidationException", "Value must be a string")
        if _size(key, value) > MAX_ITEM_BYTES:
            raise KvsError("ValidationException",
                           f"Key and value together are {_size(key, value)} bytes; at most {MAX_ITEM_BYTES} are allowed")

    def _commit(self, items: dict[str, str]) -> dict[str, Any]:
        total = sum(_size(k, v) for k, v in items.items())
        if total > MAX_STORE_BYTES:
            raise KvsError("ServiceQuotaExceededException", f"the store would hold {total} bytes; at most {MAX_STORE_BYTES}")
        state = StoreState(self.arn, self._new_etag(), self.state.created, _now(), items)
        write_atomically(self.path, state.to_json())
        # The store's history in its log (the region-health document's, in a local run).
        changes = [f"put {k}={v}" for k, v in items.items() if self.state.items.get(k) != v]
        changes += [f"delete {k}" for k in self.state.items if k not in items]
        log.info("ETag %s -> %s: %s", self.state.etag, state.etag, "; ".join(changes) or "no change")
        self.state = state
        return {"ItemCount": len(items), "TotalSizeInBytes": total, "_etag": state.etag}

    def describe(self, arn: str) -> dict[str, Any]:
        self._check_arn(arn)
        s = self.state
        return {"KvsARN": s.arn, "ItemCount": len(s.items), "TotalSizeInBytes": s.total_bytes, "Created": s.created,
                "LastModified": s.last_modified, "Status": "READY", "_etag": s.etag}

    def get(self, arn: str, key: str) -> dict[str, Any]:
        self._check_arn(arn)
        if key not in self.state.items:
            raise KvsError("ResourceNotFoundException", f"Key {key} does not exist")
        return {"Key": key, "Value": self.state.items[key], "ItemCount": len(self.state.items),
                "TotalSizeInBytes": self.state.total_bytes}

    def list(self, arn: str, next_token: str | None, max_results: int | None) -> dict[str, Any]:
        self._check_arn(arn)
        limit = MAX_LIST_RESULTS if max_results is None else max_results
        if not 1 <= limit <= MAX_LIST_RESULTS:
            raise KvsError("ValidationException", f"MaxResults must be between 1 and {MAX_LIST_RESULTS}")
        keys = sorted(self.state.items)
        start = 0
        if next_token:
            try:
                start = keys.index(base64.urlsafe_b64decode(next_token.encode()).decode())
            except (ValueError, UnicodeDecodeError):
                raise KvsError("ValidationException", "NextToken is not one this store issued") from None
        page = keys[start:start + limit]
        out: dict[str, Any] = {"Items": [{"Key": k, "Value": self.state.items[k]} for k in page]}
        if start + limit < len(keys):
            out["NextToken"] = base64.urlsafe_b64encode(keys[start + limit].encode()).decode()
        return out

    def put(self, arn: str, key: str, value: Any, if_match: str | None) -> dict[str, Any]:
        self._check_arn(arn)
        self._check_item(key, value)
        self._check_etag(if_match)
        return self._commit({**self.state.items, key: value})

    def delete(self, arn: str, key: str, if_match: str | None) -> dict[str, Any]:
        self._check_arn(arn)
        self._check_etag(if_match)
        if key not in self.state.items:
            raise KvsError("ResourceNotFoundException", f"Key {key} does not exist")
        return self._commit({k: v for k, v in self.state.items.items() if k != key})

    def update(self, arn: str, body: Any, if_match: str | None) -> dict[str, Any]:
        self._check_arn(arn)
        puts = (body.get("Puts") or []) if isinstance(body, dict) else None
        deletes = (body.get("Deletes") or []) if isinstance(body, dict) else None
        if not isinstance(puts, list) or not isinstance(deletes, list):
            raise KvsError("ValidationException", "Puts and Deletes must be lists")
        items = dict(self.state.items)
        for entry in deletes:
            if not isinstance(entry, dict) or not isinstance(entry.get("Key"), str):
                raise KvsError("ValidationException", "every Deletes entry needs a Key")
            items.pop(entry["Key"], None)
        for entry in puts:
            if not isinstance(entry, dict):
                raise KvsError("ValidationException", "every Puts entry needs a Key and a Value")
            self._check_item(entry.get("Key"), entry.get("Value"))
            items[entry["Key"]] = entry["Value"]
        self._check_etag(if_match)
        return self._commit(items)


class Handler(BaseHTTPRequestHandler):
    server: KvsServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall between them

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _answer(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self.close_connection = True  # the unread body would be taken for the next request
                raise KvsError("ValidationException", f"request body above {MAX_BODY_BYTES} bytes")
            raw = self.rfile.read(length) if length else b""
            result = self._dispatch(method, raw)
        except KvsError as exc:
            log.info("%s %s: %s %s", method, self.path, exc.code, exc.message)
            self._answer(exc.status, {"__type": exc.code, "message": exc.message}, {"x-amzn-ErrorType": exc.code})
            return
        etag = result.pop("_etag", None)
        self._answer(200, result, {"ETag": etag} if etag else None)

    def _dispatch(self, method: str, raw: bytes) -> dict[str, Any]:
        url = urlsplit(self.path)
        if url.path == HEALTHZ and method == "GET":
            return {"ok": True, "arn": self.server.store.arn}
        segments = [unquote(s) for s in url.path.split("/")[1:]]
        if len(segments) < 2 or segments[0] != "key-value-stores" or len(segments) > 4 \
                or (len(segments) >= 3 and segments[2] != "keys"):
            raise KvsError("ResourceNotFoundException", f"no such resource: {url.path}")
        auth = self.headers.get("Authorization", "")
        if not auth.startswith(SIGV4A + " ") or not self.headers.get("X-Amz-Region-Set"):
            raise KvsError("AccessDeniedException",
                           "the CloudFront KeyValueStore API takes SigV4A-signed requests only "
                           "(boto3 signs them with awscrt: pip install 'botocore[crt]')")
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            raise KvsError("ValidationException", "request body is not JSON") from None
        store, arn, if_match = self.server.store, segments[1], self.headers.get("If-Match")
        with store.lock:
            if len(segments) == 2 and method == "GET":
                return store.describe(arn)
            if len(segments) == 3 and method == "GET":
                query = parse_qs(url.query)
                token = query.get("NextToken", [None])[0]
                max_results = query.get("MaxResults", [None])[0]
                if max_results is not None and not max_results.isdigit():
                    raise KvsError("ValidationException", "MaxResults must be an integer")
                return store.list(arn, token, int(max_results) if max_results else None)
            if len(segments) == 3 and method == "POST":
                return store.update(arn, body, if_match)
            if len(segments) == 4:
                key = segments[3]
                if method == "GET":
                    return store.get(arn, key)
                if method == "PUT":
                    return store.put(arn, key, body.get("Value") if isinstance(body, dict) else None, if_match)
                if method == "DELETE":
                    return store.delete(arn, key, if_match)
        raise KvsError("ValidationException", f"{method} is not an operation on {url.path}")

    def do_GET(self) -> None:
        self._handle("GET")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


class KvsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], store: KeyValueStore):
        self.store = store
        super().__init__(address, Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


@contextmanager
def serving(path: Path, arn: str, host: str = "127.0.0.1", port: int = 0) -> Iterator[KvsServer]:
    """The emulator in a thread of this process (tests, benchmarks)."""
    server = KvsServer((host, port), KeyValueStore(path, arn))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="kvs-emulator", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class StoreReader:
    """What the local edge reads: ``get(key)`` from the store file, reread only when the
    file changed (its inode, size or modification time), so a lookup per request costs
    a ``stat``. A missing or unreadable file reads as no keys (the edge fails static)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._stamp: tuple[int, int, int] | None = None
        self._items: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        try:
            st = os.stat(self.path)
        except OSError:
            self._stamp, self._items = None, {}
            return None
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        if stamp != self._stamp:
            self._items = read_items(self.path) or {}
            self._stamp = stamp
        return self._items.get(key)


def service_spec(port: int, path: Path, arn: str, name: str = "kvs") -> ServiceSpec:
    """How the local topology runs the emulator under its supervisor."""
    return ServiceSpec(name=name, argv=("-m", "local.cloudfront.key_value_store", "--port", str(port), "--file", str(path),
                                        "--arn", arn), port=port, port_option="--base-port", ready_path=HEALTHZ)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m local.cloudfront.key_value_store", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--file", type=Path, required=True, help="the store's JSON file (created if missing)")
    parser.add_argument("--arn", required=True, help="the ARN of the one store served")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    server = KvsServer((args.host, args.port), KeyValueStore(args.file, args.arn))
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    log.info("KeyValueStore %s on %s, stored in %s", args.arn, server.url, args.file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
