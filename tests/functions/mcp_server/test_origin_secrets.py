"""Where the origin secret comes from: Secrets Manager (moto's server on loopback), read
once at start-up (functions/secrets_manager.py: one signed request, no boto3); both
values of a rotation accepted; bad secrets refused at start-up naming ORIGIN_SECRET_ID."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from functions.mcp_server.origin_secrets import parse_origin_secret, with_origin_secrets
from functions.mcp_server.settings import Settings, SettingsError
from tests.functions.results.conftest import MotoServer, moto_server  # noqa: F401  (fixture)

BASE = {
    "AUTH_ISSUER": "https://auth.example/",
    "AUTH_AUDIENCE": "https://mcp.example/mcp",
    "AUTH_JWKS_URL": "https://auth.example/jwks.json",
    "ORIGIN_SECRET_ID": "acme-mcp-origin-secret",
}
CURRENT, PREVIOUS = "n" * 48, "o" * 48


@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch, moto_server: MotoServer) -> Iterator[Any]:  # noqa: F811
    """Secrets Manager as the origin's process sees it: the function's environment (region,
    credentials) and an endpoint that answers (moto on loopback)."""
    for name in ("AWS_ENDPOINT_URL_SECRETS_MANAGER", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in moto_server.env("eu-west-1").items():
        monkeypatch.setenv(name, value)
    from functions.mcp_server import origin_secrets

    monkeypatch.setattr(origin_secrets, "_read", {})  # a fresh environment: nothing read yet
    monkeypatch.setattr(origin_secrets, "_early", None)  # nor read early
    yield moto_server.client("secretsmanager", "eu-west-1")


def test_during_a_rotation_the_origin_accepts_both_stored_values(secrets):
    secrets.create_secret(Name=BASE["ORIGIN_SECRET_ID"], SecretString=json.dumps({"current": CURRENT, "previous": PREVIOUS}))
    settings = Settings.from_env(with_origin_secrets(BASE))
    assert settings.origin_secrets == (CURRENT, PREVIOUS)


def test_outside_a_rotation_only_the_current_value(secrets):
    secrets.create_secret(Name=BASE["ORIGIN_SECRET_ID"], SecretString=json.dumps({"current": CURRENT}))
    assert Settings.from_env(with_origin_secrets(BASE)).origin_secrets == (CURRENT,)


def test_the_secret_is_read_once_per_environment(secrets):
    secrets.create_secret(Name=BASE["ORIGIN_SECRET_ID"], SecretString=json.dumps({"current": CURRENT}))
    with_origin_secrets(BASE)
    secrets.put_secret_value(SecretId=BASE["ORIGIN_SECRET_ID"], SecretString=json.dumps({"current": PREVIOUS}))
    # Cached: a warm environment keeps its pair; a rotation restarts environments instead
    # (ORIGIN_SECRET_VERSION changes, components/secrets.py).
    assert with_origin_secrets(BASE)["ORIGIN_SECRET"] == CURRENT


def test_a_missing_secret_fails_start_up_naming_it(secrets):
    with pytest.raises(SettingsError, match="ORIGIN_SECRET_ID = 'acme-mcp-origin-secret': cannot read it"):
        with_origin_secrets(BASE)


@pytest.mark.parametrize("raw", ["plain", "{broken", '{"previous": "x"}', '{"current": ""}', '["current"]',
                                 '{"current": "x", "previous": 3}'])
def test_a_secret_the_program_did_not_write_fails_start_up(raw):
    with pytest.raises(SettingsError, match="must be a JSON object"):
        parse_origin_secret("id", raw)


def test_an_outage_fails_the_start_within_the_init_phase_naming_the_secret(secrets, monkeypatch):
    import socket
    import time

    from functions.mcp_server import secrets_manager
    from functions.mcp_server.secrets_manager import DEADLINE_S, MAX_ATTEMPTS, TIMEOUT_S

    # Every attempt within the deadline fits in the init phase (checked here on the real
    # values; the run below waits less per attempt, to keep the suite quick)
    assert min(MAX_ATTEMPTS * (TIMEOUT_S + secrets_manager.BACKOFF_CAP_S), DEADLINE_S) < 10
    monkeypatch.setattr(secrets_manager, "TIMEOUT_S", 0.3)
    # Given an endpoint that accepts connections and never answers
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{listener.getsockname()[1]}")
    started = time.monotonic()
    try:
        # Then the start fails with an error naming the secret, inside Lambda's 10 s init phase
        with pytest.raises(SettingsError, match="ORIGIN_SECRET_ID = 'acme-mcp-origin-secret': cannot read it.*timed out"):
            with_origin_secrets(BASE)
    finally:
        listener.close()
    assert time.monotonic() - started <= MAX_ATTEMPTS * (0.3 + secrets_manager.BACKOFF_CAP_S) + 0.5


def test_without_a_secret_id_the_environment_is_used_as_it_is():
    env = {**BASE, "ORIGIN_SECRET": CURRENT}
    del env["ORIGIN_SECRET_ID"]
    assert with_origin_secrets(env, read=lambda _: pytest.fail("read")) == env


SECRET_TEXT = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=64)


@given(SECRET_TEXT, st.one_of(st.none(), SECRET_TEXT))
def test_what_the_program_stores_is_what_the_origin_reads(current: str, previous: str | None):
    """components/secrets.py writes the document; the origin gets the pair."""
    from components.secrets import secret_document

    document = secret_document(current, previous)
    assert parse_origin_secret("id", document) == (current, previous or "")


def test_the_read_starts_with_the_process_and_start_up_takes_its_value(secrets, monkeypatch):
    from functions.mcp_server import origin_secrets

    # Given the secret, and its read started when the process starts (app imports origin_secrets first)
    secrets.create_secret(Name=BASE["ORIGIN_SECRET_ID"], SecretString=json.dumps({"current": CURRENT}))
    early = origin_secrets.start_from_environment(BASE)
    assert early is not None and early.result()
    # When start-up asks for it (a fresh read would now see another value)
    secrets.put_secret_value(SecretId=BASE["ORIGIN_SECRET_ID"], SecretString=json.dumps({"current": PREVIOUS}))
    monkeypatch.setattr(origin_secrets, "_read", {})
    # Then it gets the early read's value, without reading again
    assert with_origin_secrets(BASE)["ORIGIN_SECRET"] == CURRENT
    assert origin_secrets._read == {}


def test_an_early_read_that_failed_fails_start_up_naming_the_secret(secrets):
    from functions.mcp_server import origin_secrets

    origin_secrets.start_from_environment(BASE)
    with pytest.raises(SettingsError, match="ORIGIN_SECRET_ID = 'acme-mcp-origin-secret': cannot read it"):
        with_origin_secrets(BASE)


def test_an_early_read_of_another_secret_is_not_used(secrets):
    from functions.mcp_server import origin_secrets

    secrets.create_secret(Name="other", SecretString=json.dumps({"current": PREVIOUS}))
    secrets.create_secret(Name=BASE["ORIGIN_SECRET_ID"], SecretString=json.dumps({"current": CURRENT}))
    origin_secrets.start_from_environment({**BASE, "ORIGIN_SECRET_ID": "other"})
    assert with_origin_secrets(BASE)["ORIGIN_SECRET"] == CURRENT


def test_without_a_secret_id_nothing_is_read_early(secrets):
    from functions.mcp_server import origin_secrets

    assert origin_secrets.start_from_environment({k: v for k, v in BASE.items() if k != "ORIGIN_SECRET_ID"}) is None


@pytest.mark.parametrize("entry", ["app", "snapstart"], ids=["run.sh's app", "SnapStart's run.sh app"])
def test_both_entry_points_build_the_app_with_the_stored_secret(secrets, monkeypatch, entry: str):
    import importlib

    module = importlib.import_module(f"functions.mcp_server.{entry}")
    builder = "create_app" if entry == "app" else "create_snapstart_app"
    # Given the function's environment as the program sets it: the secret's id, no value
    secrets.create_secret(Name=BASE["ORIGIN_SECRET_ID"], SecretString=json.dumps({"current": CURRENT}))
    for name, value in BASE.items():
        monkeypatch.setenv(name, value)
    for name in ("ORIGIN_SECRET", "ORIGIN_SECRET_PREVIOUS"):
        monkeypatch.delenv(name, raising=False)
    built: list[Settings] = []

    def build(settings: Settings, *args: Any, **kwargs: Any) -> object:
        built.append(settings)
        return object()

    monkeypatch.setattr(module, builder, build)
    monkeypatch.setattr(module, "_app", None)
    # When run.sh's uvicorn asks for the module's app, Then it is built with the stored value
    assert module.app is not None
    assert [s.origin_secrets for s in built] == [(CURRENT,)]
