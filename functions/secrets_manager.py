"""Secrets Manager's ``GetSecretValue`` as one signed HTTPS request, without boto3.

Why not boto3: importing it and building a client costs about 300 ms of CPU (botocore's
modules, then the service model and endpoint rules it loads), paid by every cold start of
a probe, which reads its secret on its first invocation. One ``GetSecretValue`` needs far
less: a JSON body, Signature Version 4, the credentials Lambda hands the function, and a
bounded retry. The signature is botocore's own ``SigV4Auth`` (``aws_sign``), from the
Lambda runtime's botocore (the package ships none), imported on the first signed request
of a process, never at import; the transport is the standard library's.

Every function package that reads secrets ships this file as its own ``secrets_manager``
module (``functions/<package>/secrets_manager.py`` links here, as ``contract.py`` does).

- Credentials, as Lambda provides them (botocore's order): ``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY`` and ``AWS_SESSION_TOKEN`` in the environment (zip and image
  functions), else the container credentials endpoint (``AWS_CONTAINER_CREDENTIALS_FULL_URI``
  with ``AWS_CONTAINER_AUTHORIZATION_TOKEN[_FILE]``), which SnapStart functions get instead.
- Endpoint: ``AWS_ENDPOINT_URL_SECRETS_MANAGER``, then ``AWS_ENDPOINT_URL`` (botocore's
  names: the local run and the tests point them at moto), else the region's public one.
- Bounded: ``deadline_s`` holds for the whole read: every attempt and backoff, and within
  an attempt the connect, the TLS handshake, the send and each read of the answer (a server
  that trickles its headers or body is cut off at the deadline, not after a timeout per
  read); name resolution too, in a helper thread the deadline stops waiting for.
  At most ``MAX_ATTEMPTS`` attempts (transport errors, 5xx, throttling), jittered backoff;
  anything else fails at once with the service's error code and message.
- Every answer that is not what was asked for (not JSON, JSON nested too deep to parse, the
  wrong shape) is a ``SecretReadError``, never another exception.
"""

from __future__ import annotations

import http.client
import io
import ipaddress
import json
import os
import random
import re
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .tls import client_context

SERVICE = "secretsmanager"  # the signing name and the endpoint prefix
TARGET = "secretsmanager.GetSecretValue"
CONTENT_TYPE = "application/x-amz-json-1.1"
TIMEOUT_S = 3.0  # at most per socket operation (connect, each read), never past the deadline
DEADLINE_S = 8.0  # the whole read, every attempt and backoff together: inside Lambda's 10 s init phase
MAX_ATTEMPTS = 3
BACKOFF_BASE_S, BACKOFF_CAP_S = 0.1, 1.0
MAX_RESPONSE_BYTES = 1024 * 1024  # a secret is at most 64 KB; its JSON answer far below this
# botocore's throttling error codes that Secrets Manager can answer, and its own 5xx code.
RETRYABLE_CODES = frozenset({"ThrottlingException", "Throttling", "TooManyRequestsException",
                             "RequestLimitExceeded", "InternalServiceError", "InternalFailure",
                             "ServiceUnavailable"})
# Where http (not https) may serve credentials: loopback, and the ECS/EKS agents' addresses
# (botocore's rule), so that a wrong variable cannot send the token in clear elsewhere.
CONTAINER_HOSTS = frozenset({"169.254.170.2", "169.254.170.23", "fd00:ec2::23", "localhost"})
ECS_CREDENTIALS_HOST = "http://169.254.170.2"
# The partitions whose DNS suffix is not amazonaws.com, by region prefix (botocore's
# data/partitions.json; the tests compare every region it lists with botocore's endpoint).
PARTITION_DNS_SUFFIXES = (("cn-", "amazonaws.com.cn"), ("eusc-", "amazonaws.eu"), ("us-isob-", "sc2s.sgov.gov"),
                          ("us-isof-", "csp.hci.ic.gov"), ("us-iso-", "c2s.ic.gov"), ("eu-isoe-", "cloud.adc-e.uk"))


class SecretReadError(Exception):
    """The secret could not be read; the message says why (never the secret)."""


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str
    token: str | None = None

    def __repr__(self) -> str:  # never the secret key or the token in a log line or traceback
        return f"Credentials(access_key={self.access_key!r})"


def parse_json(data: bytes | str) -> Any:
    """The JSON value of ``data``; ``ValueError`` for anything else, JSON nested deeper than
    the parser's recursion limit included (``json`` raises ``RecursionError`` for that)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None


# --- the exchange: one request, one deadline ---------------------------------------------------

# (request, seconds the whole exchange may take) -> (status, body)
Opener = Callable[[urllib.request.Request, float], tuple[int, bytes]]


def _time_left(at: float) -> float:
    left = at - time.monotonic()
    if left <= 0:
        raise TimeoutError("timed out: the read's deadline passed")
    return min(left, TIMEOUT_S)


class _DeadlineSocket:
    """A connected socket whose every send and read gets at most the time left before ``at``:
    ``http.client`` reads the status line, each header line and the body through it, so a
    server that trickles a byte at a time is cut off at ``at``, not after a timeout per read."""

    def __init__(self, sock: socket.socket, at: float) -> None:
        self._sock, self._at = sock, at
        self._files, self._closed = 0, False  # as a socket: closed once closed and its files too

    def sendall(self, data: Any) -> None:
        self._sock.settimeout(_time_left(self._at))
        self._sock.sendall(data)

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        self._sock.settimeout(_time_left(self._at))
        return self._sock.recv_into(buffer, nbytes, flags)

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        self._files += 1
        return io.BufferedReader(socket.SocketIO(self, "rb"))  # type: ignore[arg-type]

    def _decref_socketios(self) -> None:  # what SocketIO.close calls
        self._files -= 1
        if self._closed and self._files <= 0:
            self._sock.close()

    def close(self) -> None:  # the connection closes it before its answer is read when that will close
        self._closed = True
        if self._files <= 0:
            self._sock.close()


def resolve_within(host: str, port: int, timeout: float | None) -> list[Any]:
    """``getaddrinfo``'s answers for ``host`` within ``timeout`` seconds (None: unbounded).
    ``getaddrinfo`` has no timeout of its own, so it runs in a helper thread that the caller
    stops waiting for (the thread ends on its own). ``TimeoutError`` when it did not finish,
    its own ``OSError`` when it failed. The probe's HTTP client resolves through it too."""
    outcome: list[Any] = []

    def lookup() -> None:
        try:
            outcome.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            outcome.append(exc)

    resolver = threading.Thread(target=lookup, name=f"resolve {host}", daemon=True)
    resolver.start()
    resolver.join(timeout)
    if not outcome:
        raise TimeoutError(f"timed out resolving {host}")
    if isinstance(outcome[0], OSError):
        raise outcome[0]
    answers: list[Any] = outcome[0]
    return answers


def _resolve(host: str, port: int, at: float) -> list[Any]:
    """The host's socket addresses by ``at``."""
    return [info[4] for info in resolve_within(host, port, _time_left(at))]


class _Bounded(http.client.HTTPConnection):
    """Resolves and connects within the time left, shakes hands over TLS within what is then
    left (CPython bounds a handshake as a whole by the socket's timeout), then sends and
    reads through a ``_DeadlineSocket``."""

    at = 0.0
    tls: ssl.SSLContext | None = None

    def connect(self) -> None:
        failure: OSError = OSError(f"{self.host} has no address")
        for address in _resolve(self.host, self.port, self.at):  # the next one (IPv6, then IPv4...) on failure
            try:
                self.sock = socket.create_connection(address[:2], _time_left(self.at))
                break
            except OSError as exc:
                failure = exc
        else:
            raise failure
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls is not None:
            self.sock.settimeout(_time_left(self.at))
            self.sock = self.tls.wrap_socket(self.sock, server_hostname=self.host)
        self.sock = _DeadlineSocket(self.sock, self.at)  # type: ignore[assignment]


class _BoundedHTTPS(_Bounded):
    default_port = http.client.HTTPS_PORT  # Host without :443, as botocore signs it


def _open(request: urllib.request.Request, seconds: float) -> tuple[int, bytes]:
    """(status, body) of ``request``, the whole exchange within ``seconds``. Any status is an
    answer, a 3xx too (no redirect is followed): AWS's endpoints answer where they are asked,
    and one that redirects is misconfigured, which its answer says better than wherever it
    points."""
    parts = urlsplit(request.full_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {request.full_url[:100]!r}")
    connection = _BoundedHTTPS(parts.hostname, parts.port) if parts.scheme == "https" else _Bounded(parts.hostname,
                                                                                                  parts.port)
    if parts.scheme == "https":
        connection.tls = client_context()
    connection.at = time.monotonic() + seconds
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request(request.get_method(), target, body=request.data,  # type: ignore[arg-type]
                           headers={name.title(): value for name, value in request.header_items()})
        response = connection.getresponse()
        try:
            return response.status, response.read(MAX_RESPONSE_BYTES + 1)
        finally:
            response.close()
    except http.client.HTTPException as exc:  # a malformed answer, or one cut short
        raise OSError(f"{type(exc).__name__}: {str(exc)[:200]}") from None
    finally:
        connection.close()


# --- Signature Version 4 -------------------------------------------------------------------

def aws_sign(method: str, url: str, headers: Mapping[str, str], body: bytes, credentials: Credentials,
             service: str, region: str) -> dict[str, str]:
    """``headers`` plus the SigV4 headers botocore's ``SigV4Auth`` adds (``X-Amz-Date``,
    ``X-Amz-Security-Token`` with a session token, ``Authorization``) to ``method`` of
    ``body`` at ``url``: every header given is signed, and the Host the URL names. botocore
    is imported here, on the first signed request of a process (about 200 ms of CPU:
    ``bench/probe_bench.py``), never at import."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
    SigV4Auth(credentials, service, region).add_auth(request)
    return dict(request.headers.items())


# --- where and as whom ---------------------------------------------------------------------

def region_of(environ: Mapping[str, str]) -> str:
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    if not region:
        raise SecretReadError("no region: AWS_REGION is not set (Lambda sets it)")
    return region


def endpoint_url(region: str, environ: Mapping[str, str]) -> str:
    configured = environ.get("AWS_ENDPOINT_URL_SECRETS_MANAGER") or environ.get("AWS_ENDPOINT_URL")
    if configured:
        return configured.rstrip("/") + "/"
    suffix = next((dns for prefix, dns in PARTITION_DNS_SUFFIXES if region.startswith(prefix)), "amazonaws.com")
    return f"https://{SERVICE}.{region}.{suffix}/"


def credentials_from(environ: Mapping[str, str], opener: Opener = _open, seconds: float = TIMEOUT_S) -> Credentials:
    """The function's credentials: the environment's keys, else the container credentials
    endpoint (its exchange within ``seconds``)."""
    key, secret = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
    if key and secret:
        return Credentials(key, secret, environ.get("AWS_SESSION_TOKEN") or None)
    full, relative = environ.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"), environ.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
    if not full and not relative:
        raise SecretReadError("no AWS credentials: neither AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY nor "
                              "AWS_CONTAINER_CREDENTIALS_FULL_URI is set (Lambda sets one of them)")
    url = full or f"{ECS_CREDENTIALS_HOST}{relative}"
    _check_credentials_url(url)
    token = environ.get("AWS_CONTAINER_AUTHORIZATION_TOKEN")
    if not token and (path := environ.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")):
        try:
            with open(path, encoding="utf-8") as file:
                token = file.read().strip()
        except OSError as exc:
            raise SecretReadError(f"cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: {exc.strerror}") from None
    request = urllib.request.Request(url, headers={"Authorization": token} if token else {})
    try:
        status, body = opener(request, seconds)
    except (OSError, ValueError) as exc:
        raise SecretReadError(f"container credentials endpoint: {type(exc).__name__}: {str(exc)[:200]}") from None
    try:
        doc = parse_json(body) if status == 200 else None
    except ValueError:
        doc = None
    key, secret, token = (doc.get(name) if isinstance(doc, dict) else None
                          for name in ("AccessKeyId", "SecretAccessKey", "Token"))
    if not isinstance(key, str) or not key or not isinstance(secret, str) or not secret \
            or not isinstance(token, str | None):
        raise SecretReadError(f"container credentials endpoint answered {status} without credentials")
    return Credentials(key, secret, token or None)


def _check_credentials_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme == "https":
        return
    host = parts.hostname or ""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if parts.scheme != "http" or not (loopback or host in CONTAINER_HOSTS):
        raise SecretReadError(f"container credentials URL must be https, or http to loopback or the container "
                              f"agent's address: not {parts.scheme}://{host}")


# --- the call ------------------------------------------------------------------------------

def _error_of(status: int, body: bytes) -> tuple[str, str]:
    """(code, message) of an AWS error answer (JSON, as Secrets Manager answers, or the
    XML of a front end that refused the request); the status when it is neither."""
    try:
        doc = parse_json(body)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        text = body[:2000].decode("utf-8", "replace")
        if code_match := re.search(r"<Code>([^<]{1,100})</Code>", text):
            message_match = re.search(r"<Message>([^<]{0,300})</Message>", text)
            return code_match[1], message_match[1] if message_match else ""
        return f"HTTP {status}", text[:200]
    code = str(doc.get("__type") or f"HTTP {status}").rpartition("#")[2]
    return code, str(doc.get("message") or doc.get("Message") or "")[:300]


def get_secret_string(secret_id: str, environ: Mapping[str, str] | None = None, *, opener: Opener = _open,
                      deadline_s: float = DEADLINE_S, user_agent: str = "mcp-edge") -> str:
    """The ``SecretString`` of the secret's current version (``secret_id``: its name or ARN)."""
    env = os.environ if environ is None else environ
    region = region_of(env)
    url = endpoint_url(region, env)
    give_up_at = time.monotonic() + deadline_s
    credentials = credentials_from(env, opener, min(TIMEOUT_S, deadline_s))
    body = json.dumps({"SecretId": secret_id}).encode()
    problem = ""
    for attempt in range(MAX_ATTEMPTS):
        if attempt:
            pause = random.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** attempt))
            if time.monotonic() + pause + TIMEOUT_S > give_up_at:
                break  # another attempt could not finish in time
            time.sleep(pause)
        left = give_up_at - time.monotonic()
        if left <= 0:
            break
        try:
            headers = aws_sign("POST", url, {"Content-Type": CONTENT_TYPE, "X-Amz-Target": TARGET}, body, credentials,
                               SERVICE, region)
        except ImportError as exc:  # no botocore: not on Lambda's Python runtime
            raise SecretReadError(f"cannot sign the request: {exc}") from None
        request = urllib.request.Request(url, data=body, method="POST", headers={**headers, "User-Agent": user_agent})
        try:
            status, answer = opener(request, left)  # the whole exchange within what is left
        except (OSError, ValueError) as exc:  # refused, reset, timed out (the deadline too), name not resolved
            problem = f"{type(exc).__name__}: {str(exc)[:200]}"
            continue
        if status == 200:
            return _secret_string(secret_id, answer)
        code, message = _error_of(status, answer)
        problem = f"{code}: {message}" if message else code
        if status < 500 and status != 429 and code not in RETRYABLE_CODES:
            break  # not found, access denied, bad request: asking again changes nothing
    raise SecretReadError(problem or "no attempt could be made in time")


def _secret_string(secret_id: str, answer: bytes) -> str:
    if len(answer) > MAX_RESPONSE_BYTES:
        raise SecretReadError(f"answer larger than {MAX_RESPONSE_BYTES} bytes")
    try:
        doc = parse_json(answer)
    except ValueError as exc:
        raise SecretReadError(f"answer is not JSON ({exc})") from None
    value = doc.get("SecretString") if isinstance(doc, dict) else None
    if not isinstance(value, str):
        raise SecretReadError(f"{secret_id!r} has no SecretString (a binary secret?)")
    return value
