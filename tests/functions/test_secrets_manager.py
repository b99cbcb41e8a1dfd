"""GetSecretValue without boto3 (functions/secrets_manager.py): signed by botocore's SigV4Auth,
moto verifying signatures accepts it (keys and session tokens, as Lambda gives them) and
refuses a wrong one; credentials from the environment or the container endpoint
(SnapStart); bounded retries; every failure a clear error, never the secret."""

from __future__ import annotations

import http.server
import json
import socketserver
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from functions import secrets_manager
from functions.secrets_manager import (
    TARGET,
    SecretReadError,
    credentials_from,
    endpoint_url,
    get_secret_string,
)
from tests.loopback import ThreadedSocketServer

REGION = "eu-west-1"
DOCUMENT = json.dumps({"current": "c" * 48, "previous": ""})
ALLOW_READ = json.dumps({"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": "*"}]})

# --- the signature -------------------------------------------------------------------------


def test_the_host_signed_is_the_host_sent_on_https_default_port():
    # botocore signs the Host without :443; the connection must send it that way too.
    connection = secrets_manager._BoundedHTTPS("secretsmanager.eu-west-1.amazonaws.com", None)
    connection.putrequest("POST", "/")
    assert b"Host: secretsmanager.eu-west-1.amazonaws.com" in connection._buffer  # type: ignore[attr-defined]
    other = secrets_manager._BoundedHTTPS("vpce.example", 8443)
    other.putrequest("POST", "/")
    assert b"Host: vpce.example:8443" in other._buffer  # type: ignore[attr-defined]


@dataclass
class Moto:
    url: str

    def client(self, service: str) -> Any:
        return boto3.client(service, region_name=REGION, endpoint_url=self.url, aws_access_key_id="admin",
                            aws_secret_access_key="admin")

    def env(self, key: str, secret: str, token: str | None = None) -> dict[str, str]:
        env = {"AWS_REGION": REGION, "AWS_ENDPOINT_URL": self.url, "AWS_ACCESS_KEY_ID": key,
               "AWS_SECRET_ACCESS_KEY": secret}
        return {**env, "AWS_SESSION_TOKEN": token} if token else env


@pytest.fixture(scope="module")
def moto() -> Iterator[Moto]:
    """moto's server on loopback holding a secret, a user and a role allowed to read it, and
    a user who may not."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        moto = Moto(f"http://{host}:{port}")
        moto.client("secretsmanager").create_secret(Name="acme-origin-secret", SecretString=DOCUMENT)
        iam = moto.client("iam")
        for user in ("reader", "stranger"):
            iam.create_user(UserName=user)
        iam.put_user_policy(UserName="reader", PolicyName="read", PolicyDocument=ALLOW_READ)
        iam.create_role(RoleName="origin", AssumeRolePolicyDocument="{}")
        iam.put_role_policy(RoleName="origin", PolicyName="read", PolicyDocument=ALLOW_READ)
        yield moto
    finally:
        server.stop()


def verify_signatures(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto checks every request's signature and the caller's IAM policy from now on (the
    credentials a test uses are made before: the admin's own requests are not signed by a
    key moto knows)."""
    import moto.settings

    monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)


def user_keys(moto: Moto, user: str) -> tuple[str, str]:
    key = moto.client("iam").create_access_key(UserName=user)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


def role_session(moto: Moto) -> tuple[str, str, str]:
    """Temporary credentials of the role, with a session token: what Lambda gives a function."""
    credentials = moto.client("sts").assume_role(RoleArn="arn:aws:iam::123456789012:role/origin",
                                                 RoleSessionName="origin-fn")["Credentials"]
    return credentials["AccessKeyId"], credentials["SecretAccessKey"], credentials["SessionToken"]


def test_a_function_role_session_reads_the_secret_with_a_verified_signature(moto: Moto, monkeypatch):
    key, secret, token = role_session(moto)
    verify_signatures(monkeypatch)
    assert get_secret_string("acme-origin-secret", moto.env(key, secret, token)) == DOCUMENT


def test_user_keys_without_a_session_token_read_it_too(moto: Moto, monkeypatch):
    key, secret = user_keys(moto, "reader")
    verify_signatures(monkeypatch)
    assert get_secret_string("acme-origin-secret", moto.env(key, secret)) == DOCUMENT


@pytest.mark.parametrize("forge", ["secret key", "session token"])
def test_a_wrong_signature_is_refused_and_reported_by_its_code(moto: Moto, monkeypatch, forge: str):
    key, secret, token = role_session(moto)
    verify_signatures(monkeypatch)
    env = moto.env(key, secret + "x", token) if forge == "secret key" else moto.env(key, secret, token[:-4] + "AAAA")
    with pytest.raises(SecretReadError, match="SignatureDoesNotMatch|InvalidClientTokenId") as raised:
        get_secret_string("acme-origin-secret", env)
    assert secret not in str(raised.value) and token not in str(raised.value)


def test_a_caller_the_policy_does_not_allow_is_refused_at_once(moto: Moto, monkeypatch):
    key, secret = user_keys(moto, "stranger")
    verify_signatures(monkeypatch)
    started = time.monotonic()
    with pytest.raises(SecretReadError, match="AccessDenied"):
        get_secret_string("acme-origin-secret", moto.env(key, secret))
    assert time.monotonic() - started < 1.0  # not retried: asking again changes nothing


def test_a_missing_secret_is_reported_by_the_service_code(moto: Moto):
    with pytest.raises(SecretReadError, match="ResourceNotFoundException"):
        get_secret_string("no-such-secret", moto.env("admin", "admin"))


def test_the_secret_is_read_by_its_arn_as_the_program_passes_it(moto: Moto):
    arn = moto.client("secretsmanager").describe_secret(SecretId="acme-origin-secret")["ARN"]
    assert get_secret_string(arn, moto.env("admin", "admin")) == DOCUMENT


def test_a_binary_secret_is_refused_naming_it(moto: Moto):
    moto.client("secretsmanager").create_secret(Name="binary-one", SecretBinary=b"\x00\x01")
    with pytest.raises(SecretReadError, match="'binary-one' has no SecretString"):
        get_secret_string("binary-one", moto.env("admin", "admin"))


# --- where, and as whom --------------------------------------------------------------------

def botocore_regions() -> list[str]:
    import os

    import botocore

    with open(os.path.join(os.path.dirname(botocore.__file__), "data", "partitions.json")) as file:
        partitions = json.load(file)["partitions"]
    return sorted(r for p in partitions for r in p["regions"] if not r.endswith("-global"))


@pytest.mark.parametrize("region", botocore_regions())
def test_the_endpoint_of_every_region_is_the_one_botocore_resolves(region: str, monkeypatch):
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SECRETS_MANAGER", "AWS_USE_FIPS_ENDPOINT",
                 "AWS_USE_DUALSTACK_ENDPOINT", "AWS_CONFIG_FILE", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")  # no profile's endpoint settings
    client = boto3.client("secretsmanager", region_name=region, aws_access_key_id="a", aws_secret_access_key="b")
    assert endpoint_url(region, {}) == client.meta.endpoint_url + "/"


def test_the_endpoint_is_the_regions_unless_botocores_variables_name_one():
    assert endpoint_url("eu-west-1", {}) == "https://secretsmanager.eu-west-1.amazonaws.com/"
    assert endpoint_url("eu-west-1", {"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}) == "http://127.0.0.1:1/"
    assert endpoint_url("eu-west-1", {"AWS_ENDPOINT_URL": "http://127.0.0.1:1",
                                      "AWS_ENDPOINT_URL_SECRETS_MANAGER": "http://127.0.0.1:2"}) == "http://127.0.0.1:2/"


def test_without_a_region_or_credentials_the_error_says_what_lambda_would_set():
    with pytest.raises(SecretReadError, match="AWS_REGION"):
        get_secret_string("x", {})
    with pytest.raises(SecretReadError, match="AWS_ACCESS_KEY_ID.*AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        get_secret_string("x", {"AWS_REGION": REGION})


class Answering(http.server.BaseHTTPRequestHandler):
    """A loopback endpoint's handler: answers with a status and a sized body, logs nothing."""

    def answer(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class CredentialsEndpoint(Answering):
    """A container credentials endpoint (as SnapStart functions get): the credentials for
    the right Authorization header, 401 otherwise."""

    token = "the-container-token"
    credentials: dict[str, str] = {}
    seen: list[str | None] = []

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        ok = self.headers.get("Authorization") == self.token
        self.answer(200 if ok else 401, json.dumps(self.credentials if ok else {"message": "unauthorized"}).encode())


@pytest.fixture
def container_endpoint(moto: Moto) -> Iterator[str]:
    key, secret, token = role_session(moto)
    CredentialsEndpoint.credentials = {"AccessKeyId": key, "SecretAccessKey": secret, "Token": token,
                                       "Expiration": "2040-01-01T00:00:00Z"}
    CredentialsEndpoint.seen = []
    server = ThreadedSocketServer(http.server.ThreadingHTTPServer, CredentialsEndpoint)
    try:
        yield f"http://127.0.0.1:{server.port}/2021-04-23/credentials"
    finally:
        server.close()


@pytest.mark.parametrize("token_from", ["variable", "file"])
def test_without_keys_the_container_endpoint_gives_the_credentials(moto: Moto, container_endpoint: str, monkeypatch,
                                                                   tmp_path, token_from: str):
    verify_signatures(monkeypatch)
    env = {"AWS_REGION": REGION, "AWS_ENDPOINT_URL": moto.url,
           "AWS_CONTAINER_CREDENTIALS_FULL_URI": container_endpoint}
    if token_from == "variable":
        env["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = CredentialsEndpoint.token
    else:
        (path := tmp_path / "token").write_text(CredentialsEndpoint.token + "\n")
        env["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = str(path)
    assert get_secret_string("acme-origin-secret", env) == DOCUMENT
    assert CredentialsEndpoint.seen == [CredentialsEndpoint.token]


def test_a_container_endpoint_that_refuses_is_a_clear_error(container_endpoint: str):
    with pytest.raises(SecretReadError, match="container credentials endpoint answered 401"):
        credentials_from({"AWS_CONTAINER_CREDENTIALS_FULL_URI": container_endpoint,
                          "AWS_CONTAINER_AUTHORIZATION_TOKEN": "wrong"})


@pytest.mark.parametrize("url", ["http://example.com/credentials", "ftp://127.0.0.1/x", "http://10.0.0.1/creds"])
def test_credentials_are_never_fetched_in_clear_from_elsewhere(url: str):
    with pytest.raises(SecretReadError, match="must be https, or http to loopback"):
        credentials_from({"AWS_CONTAINER_CREDENTIALS_FULL_URI": url, "AWS_CONTAINER_AUTHORIZATION_TOKEN": "t"})


# --- bounded, retried where asking again can help -------------------------------------------

class Scripted(Answering):
    """Answers POSTs from a script of (status, body) pairs, one per request; "hang" never answers."""

    script: list[tuple[int, bytes] | str] = []
    requests: list[dict[str, str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.requests.append(dict(self.headers))
        step = self.script.pop(0) if self.script else (500, b"{}")
        if step == "hang":
            time.sleep(5)
            return
        assert not isinstance(step, str)
        self.answer(*step, content_type="application/x-amz-json-1.1")


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    Scripted.script, Scripted.requests = [], []
    monkeypatch.setattr(secrets_manager, "BACKOFF_BASE_S", 0.01)
    server = ThreadedSocketServer(http.server.ThreadingHTTPServer, Scripted)
    try:
        yield {"AWS_REGION": REGION, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{server.port}",
               "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret"}
    finally:
        server.close()


def error(code: str, message: str = "m") -> bytes:
    return json.dumps({"__type": f"com.amazonaws.secretsmanager#{code}", "message": message}).encode()


FOUND = (200, json.dumps({"Name": "s", "SecretString": DOCUMENT}).encode())


@pytest.mark.parametrize("first", [(500, error("InternalServiceError")), (400, error("ThrottlingException")),
                                   (429, b"slow down"), (503, b"<html>busy</html>")],
                         ids=["internal error", "throttled", "429", "503 html"])
def test_a_passing_failure_is_asked_again(scripted, first):
    Scripted.script = [first, FOUND]
    assert get_secret_string("s", scripted) == DOCUMENT
    assert len(Scripted.requests) == 2
    # each attempt signed afresh, and sent as the JSON protocol asks
    assert all(r["X-Amz-Target"] == TARGET and r["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKID/")
               for r in Scripted.requests)


def test_attempts_are_bounded_and_the_last_problem_is_reported(scripted):
    Scripted.script = [(500, error("InternalServiceError", f"try {n}")) for n in range(10)]
    with pytest.raises(SecretReadError, match="InternalServiceError: try 2"):
        get_secret_string("s", scripted)
    assert len(Scripted.requests) == secrets_manager.MAX_ATTEMPTS


@pytest.mark.parametrize("status,code", [(400, "ResourceNotFoundException"), (400, "DecryptionFailure"),
                                         (400, "InvalidRequestException"), (403, "AccessDeniedException")])
def test_a_definite_refusal_is_not_asked_again(scripted, status: int, code: str):
    Scripted.script = [(status, error(code, "no")), FOUND]
    with pytest.raises(SecretReadError, match=f"{code}: no"):
        get_secret_string("s", scripted)
    assert len(Scripted.requests) == 1


def test_an_endpoint_that_never_answers_fails_within_the_deadline(scripted, monkeypatch):
    monkeypatch.setattr(secrets_manager, "TIMEOUT_S", 0.3)
    Scripted.script = ["hang"] * 5
    started = time.monotonic()
    with pytest.raises(SecretReadError, match="(?i)timeout|timed out"):
        get_secret_string("s", scripted, deadline_s=1.0)
    assert time.monotonic() - started < 2.0


def test_a_closed_port_is_a_clear_error(scripted):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SecretReadError, match="ConnectionRefused|URLError"):
        get_secret_string("s", {**scripted, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}, deadline_s=2.0)


@pytest.mark.parametrize("answer,problem", [(b"not json", "not JSON"), (b"[1]", "has no SecretString"),
                                            (b'{"SecretString": 3}', "has no SecretString")])
def test_an_answer_that_is_not_a_secret_is_refused(scripted, answer: bytes, problem: str):
    Scripted.script = [(200, answer)]
    with pytest.raises(SecretReadError, match=problem):
        get_secret_string("s", scripted)


def test_an_oversized_answer_is_refused_without_holding_it(scripted):
    Scripted.script = [(200, b'{"SecretString": "' + b"x" * (secrets_manager.MAX_RESPONSE_BYTES + 10) + b'"}')]
    with pytest.raises(SecretReadError, match="larger than"):
        get_secret_string("s", scripted)


def test_importing_the_reader_imports_no_aws_sdk():
    """A fresh interpreter imports this module without boto3 or botocore: botocore's signer
    loads on the first signed request only, and boto3 (about 300 ms of a cold start) never."""
    import subprocess
    import sys

    script = ("import sys, functions.secrets_manager as m; "
              "print(sorted(n for n in sys.modules if n.split('.')[0] in ('boto3', 'botocore', 'aws_lambda_powertools')))")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60,
                          cwd=root, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)})
    assert done.stdout.strip() == "[]"


def test_threads_may_read_at_once(scripted):
    Scripted.script = [FOUND, FOUND, FOUND, FOUND]
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(get_secret_string("s", scripted))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == [DOCUMENT] * 4


@pytest.mark.parametrize("answer", [b"{}", b"[]", b"nope", b'{"AccessKeyId": 3, "SecretAccessKey": "s"}',
                                    b'{"AccessKeyId": "a", "SecretAccessKey": ""}',
                                    b'{"AccessKeyId": "a", "SecretAccessKey": "s", "Token": 5}'])
def test_container_credentials_that_are_not_credentials_are_refused(answer: bytes):
    with pytest.raises(SecretReadError, match="answered 200 without credentials"):
        credentials_from({"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:1/credentials"},
                         opener=lambda request, timeout: (200, answer))


# --- hostile endpoints: one deadline for the whole read, every answer a SecretReadError --------

TRICKLE_PAUSE_S = 0.5


class Trickling(socketserver.StreamRequestHandler):
    """Reads the request, then answers a 200 with the secret one byte every 0.5 s: from its
    first byte (``part`` "headers") or after its headers in full ("body")."""

    part = "headers"
    started: list[float] = []

    def handle(self) -> None:
        length = 0
        while (line := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        self.rfile.read(length)
        body = json.dumps({"Name": "s", "SecretString": DOCUMENT}).encode()
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        fast, slow = (b"", head + body) if self.part == "headers" else (head, body)
        self.started.append(time.monotonic())
        try:
            self.wfile.write(fast)
            self.wfile.flush()
            for byte in slow:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(TRICKLE_PAUSE_S)
        except OSError:
            pass  # the client hung up: what it should do


@pytest.fixture
def trickling() -> Iterator[tuple[dict[str, str], type[Trickling]]]:
    Trickling.started = []
    server = ThreadedSocketServer(socketserver.ThreadingTCPServer, Trickling)
    try:
        yield ({"AWS_REGION": REGION, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{server.port}",
                "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret"}, Trickling)
    finally:
        server.close()


@pytest.mark.parametrize("part", ["headers", "body"])
def test_an_endpoint_trickling_its_answer_is_cut_off_by_the_deadline(trickling, monkeypatch, part: str):
    env, handler = trickling
    monkeypatch.setattr(handler, "part", part)
    # Each byte comes well within the per-read timeout: only a deadline over the whole exchange stops it.
    trickle_s = len(json.dumps({"Name": "s", "SecretString": DOCUMENT})) * TRICKLE_PAUSE_S
    assert trickle_s > 40 and TRICKLE_PAUSE_S < secrets_manager.TIMEOUT_S
    started = time.monotonic()
    with pytest.raises(SecretReadError, match="(?i)timed out"):
        get_secret_string("s", env, deadline_s=2.0)
    assert time.monotonic() - started < trickle_s / 2, "returned long before the trickle would have finished"
    assert len(handler.started) == 1  # the deadline passed within the first attempt: none after it


def test_a_container_credentials_endpoint_trickling_is_cut_off_too(trickling, monkeypatch):
    env, handler = trickling
    monkeypatch.setattr(handler, "part", "body")
    started = time.monotonic()
    with pytest.raises(SecretReadError, match="(?i)container credentials endpoint: .*timed out"):
        credentials_from({"AWS_CONTAINER_CREDENTIALS_FULL_URI": env["AWS_ENDPOINT_URL"] + "/credentials"},
                         seconds=1.0)
    assert time.monotonic() - started < 20


DEEP = 100_000  # far past the parser's recursion limit


@pytest.mark.parametrize("status", [200, 400, 500], ids=["success", "error", "500"])
@pytest.mark.parametrize("nesting", [b"[" * DEEP + b"]" * DEEP, b'{"a":' * DEEP + b"1" + b"}" * DEEP],
                         ids=["arrays", "objects"])
def test_an_answer_nested_too_deep_is_a_secret_read_error(scripted, status: int, nesting: bytes):
    Scripted.script = [(status, nesting)] * secrets_manager.MAX_ATTEMPTS
    with pytest.raises(SecretReadError, match="not JSON" if status == 200 else f"HTTP {status}"):
        get_secret_string("s", scripted)


def test_container_credentials_nested_too_deep_are_refused():
    with pytest.raises(SecretReadError, match="answered 200 without credentials"):
        credentials_from({"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:1/credentials"},
                         opener=lambda request, seconds: (200, b"[" * DEEP))


# --- over TLS, as on Lambda ----------------------------------------------------------------------


@pytest.fixture
def tls_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Any], str]]:
    """``serve(handler)``: an https endpoint on localhost answering with ``handler``, its
    certificate from a throwaway CA that the process's one client context trusts."""
    from functions import tls
    from tests.cimd import make_test_ca

    ca = make_test_ca(tmp_path / "ca")
    monkeypatch.setattr(tls, "_context", ssl.create_default_context(cafile=str(ca.ca_file)))
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(ca.cert_file, ca.key_file)

    class TLSServer(http.server.ThreadingHTTPServer):
        def get_request(self) -> tuple[Any, Any]:
            sock, address = super().get_request()
            return server_context.wrap_socket(sock, server_side=True), address

    servers: list[ThreadedSocketServer] = []

    def serve(handler: Any) -> str:
        servers.append(server := ThreadedSocketServer(TLSServer, handler))
        return f"https://localhost:{server.port}"

    try:
        yield serve
    finally:
        for server in servers:
            server.close()


def test_the_secret_is_read_over_tls_with_the_certificate_checked(scripted, tls_endpoint):
    Scripted.script = [FOUND]
    url = tls_endpoint(Scripted)
    assert get_secret_string("s", {**scripted, "AWS_ENDPOINT_URL": url}) == DOCUMENT
    (request,) = Scripted.requests
    assert request["Host"] == url.removeprefix("https://")  # the Host botocore signed
    assert "host;" in request["Authorization"] and request["X-Amz-Target"] == TARGET


def test_a_certificate_the_client_does_not_trust_is_refused(scripted, tls_endpoint, monkeypatch):
    from functions import tls

    url = tls_endpoint(Scripted)
    monkeypatch.setattr(tls, "_context", ssl.create_default_context())  # the system's store: not the test CA
    with pytest.raises(SecretReadError, match="(?i)certificate"):
        get_secret_string("s", {**scripted, "AWS_ENDPOINT_URL": url}, deadline_s=2.0)
    assert Scripted.requests == []


def test_an_endpoint_trickling_over_tls_is_cut_off_by_the_deadline(trickling, tls_endpoint):
    env, handler = trickling
    url = tls_endpoint(handler)
    started = time.monotonic()
    with pytest.raises(SecretReadError, match="(?i)timed out"):
        get_secret_string("s", {**env, "AWS_ENDPOINT_URL": url}, deadline_s=2.0)
    assert time.monotonic() - started < 20, "returned long before the trickle would have finished"


def test_a_resolver_that_hangs_is_cut_off_by_the_deadline(scripted, monkeypatch):
    import socket

    real = socket.getaddrinfo

    def hanging(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "slow-dns.example":
            time.sleep(30)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", hanging)
    started = time.monotonic()
    with pytest.raises(SecretReadError, match="timed out resolving slow-dns.example"):
        get_secret_string("s", {**scripted, "AWS_ENDPOINT_URL": "http://slow-dns.example:1"}, deadline_s=1.0)
    assert time.monotonic() - started < 15, "returned long before the resolver would have"


def test_a_name_that_does_not_resolve_is_a_clear_error(scripted, monkeypatch):
    import socket

    def unknown(host: Any, *args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    with pytest.raises(SecretReadError, match="gaierror: .*Name or service not known"):
        get_secret_string("s", {**scripted, "AWS_ENDPOINT_URL": "http://no-such-host.example:1"}, deadline_s=2.0)
