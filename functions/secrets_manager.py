"""Secrets Manager's ``GetSecretValue`` as one signed HTTPS request: standard library only.

Why not boto3: importing it and building a client costs about 300 ms of CPU (botocore's
modules, then the service model and endpoint rules it loads), paid by every cold start of
an origin, which reads its secret at start-up, and of a probe, which reads its secrets on
its first invocation. One ``GetSecretValue`` needs far less: a JSON body, Signature
Version 4 (``sign``; the tests check it against botocore's own signer and against moto
verifying signatures), the credentials Lambda hands the function, and a bounded retry.

Every function package ships this file as its own ``secrets_manager`` module
(``functions/<package>/secrets_manager.py`` links here, as ``contract.py`` does).

- Credentials, as Lambda provides them (botocore's order): ``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY`` and ``AWS_SESSION_TOKEN`` in the environment (zip and image
  functions), else the container credentials endpoint (``AWS_CONTAINER_CREDENTIALS_FULL_URI``
  with ``AWS_CONTAINER_AUTHORIZATION_TOKEN[_FILE]``), which SnapStart functions get instead.
- Endpoint: ``AWS_ENDPOINT_URL_SECRETS_MANAGER``, then ``AWS_ENDPOINT_URL`` (botocore's
  names: the local run and the tests point them at moto), else the region's public one.
- Bounded: each attempt's socket operations time out, at most ``MAX_ATTEMPTS`` attempts
  (transport errors, 5xx, throttling), jittered backoff, all within ``deadline_s``;
  anything else fails at once with the service's error code and message.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import ipaddress
import json
import os
import random
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from .tls import NoRedirect, client_context

SERVICE = "secretsmanager"  # the signing name and the endpoint prefix
TARGET = "secretsmanager.GetSecretValue"
CONTENT_TYPE = "application/x-amz-json-1.1"
ALGORITHM = "AWS4-HMAC-SHA256"
TIMEOUT_S = 3.0  # per socket operation (connect, each read)
DEADLINE_S = 8.0  # every attempt and backoff together: inside Lambda's 10 s init phase
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


Opener = Callable[[urllib.request.Request, float], tuple[int, bytes]]


def _open(request: urllib.request.Request, timeout: float) -> tuple[int, bytes]:
    """(status, body) of ``request``; an HTTP error status is an answer, not an exception."""
    try:
        with _opener().open(request, timeout=timeout) as response:
            return response.status, response.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read(MAX_RESPONSE_BYTES + 1)


_built: urllib.request.OpenerDirector | None = None


def _opener() -> urllib.request.OpenerDirector:
    global _built
    if _built is None:
        # No proxy handler: Lambda has no proxy, and reading proxy settings costs a scan
        # of the environment per request.
        _built = urllib.request.OpenerDirector()
        for handler in (urllib.request.HTTPHandler(), urllib.request.HTTPSHandler(context=client_context()), NoRedirect(),
                        urllib.request.HTTPDefaultErrorHandler(), urllib.request.HTTPErrorProcessor()):
            _built.add_handler(handler)
    return _built


# --- Signature Version 4 -------------------------------------------------------------------

def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signing_key(secret_key: str, date: str, region: str, service: str) -> bytes:
    return _hmac(_hmac(_hmac(_hmac(f"AWS4{secret_key}".encode(), date), region), service), "aws4_request")


def canonical_host(url: str) -> str:
    """The Host header botocore signs: the URL's host, its port only when not the scheme's default."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    default = {"https": 443, "http": 80}.get(parts.scheme)
    return host if parts.port in (None, default) else f"{host}:{parts.port}"


def sign(url: str, headers: Mapping[str, str], body: bytes, credentials: Credentials, region: str,
         service: str, now: datetime.datetime) -> dict[str, str]:
    """``headers`` plus Host, X-Amz-Date, X-Amz-Security-Token (with a session token) and
    Authorization, for a POST of ``body`` to ``url`` (path "/", no query, as AWS JSON
    APIs are called). Every header given is signed, as botocore signs them."""
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    date = amz_date[:8]
    signed = {"host": canonical_host(url), **{k.lower(): v for k, v in headers.items()}, "x-amz-date": amz_date}
    if credentials.token:
        signed["x-amz-security-token"] = credentials.token
    names = sorted(signed)
    canonical_headers = "".join(f"{name}:{' '.join(signed[name].split())}\n" for name in names)
    signed_names = ";".join(names)
    path = urlsplit(url).path or "/"
    canonical_request = "\n".join(["POST", path, "", canonical_headers, signed_names,
                                   hashlib.sha256(body).hexdigest()])
    scope = f"{date}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join([ALGORITHM, amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()])
    signature = hmac.new(signing_key(credentials.secret_key, date, region, service), string_to_sign.encode(),
                         hashlib.sha256).hexdigest()
    out = {**headers, "Host": signed["host"], "X-Amz-Date": amz_date}
    if credentials.token:
        out["X-Amz-Security-Token"] = credentials.token
    out["Authorization"] = (f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
                            f"SignedHeaders={signed_names}, Signature={signature}")
    return out


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


def credentials_from(environ: Mapping[str, str], opener: Opener = _open) -> Credentials:
    """The function's credentials: the environment's keys, else the container credentials endpoint."""
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
        status, body = opener(request, TIMEOUT_S)
    except (OSError, ValueError) as exc:
        raise SecretReadError(f"container credentials endpoint: {type(exc).__name__}: {str(exc)[:200]}") from None
    try:
        doc = json.loads(body) if status == 200 else None
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
        doc = json.loads(body)
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
    credentials = credentials_from(env, opener)
    body = json.dumps({"SecretId": secret_id}).encode()
    give_up_at = time.monotonic() + deadline_s
    problem = ""
    for attempt in range(MAX_ATTEMPTS):
        if attempt:
            pause = random.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** attempt))
            if time.monotonic() + pause + TIMEOUT_S > give_up_at:
                break  # another attempt could not finish in time
            time.sleep(pause)
        headers = sign(url, {"Content-Type": CONTENT_TYPE, "X-Amz-Target": TARGET}, body, credentials, region,
                       SERVICE, datetime.datetime.now(datetime.UTC))
        request = urllib.request.Request(url, data=body, method="POST", headers={**headers, "User-Agent": user_agent})
        try:
            status, answer = opener(request, min(TIMEOUT_S, max(0.1, give_up_at - time.monotonic())))
        except (OSError, ValueError) as exc:  # refused, reset, timed out, name not resolved
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
        doc = json.loads(answer)
    except ValueError:
        raise SecretReadError("answer is not JSON") from None
    value = doc.get("SecretString") if isinstance(doc, dict) else None
    if not isinstance(value, str):
        raise SecretReadError(f"{secret_id!r} has no SecretString (a binary secret?)")
    return value
