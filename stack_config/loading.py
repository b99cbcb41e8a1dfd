"""Loading the stack config, two ways, through the one validation in ``stack_config.checks``:

- inside the Pulumi program, from ``pulumi.Config`` (``load_from_pulumi``), with the
  secret keys as Pulumi secrets for the resources that need them;
- straight from ``Pulumi.<stack>.yaml`` (``load_from_stack_file``), for tests, the
  offline plan and the local run, with no Pulumi engine involved.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from stack_config.checks import ConfigError, build_stack_config, stack_warnings
from stack_config.keys import KEY_BY_NAME, OBJECT, PROJECT
from stack_config.model import StackConfig

if TYPE_CHECKING:
    import pulumi

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class StackSecrets:
    """The stack's secret keys as Pulumi secrets (encrypted in state), None when not set."""

    origin_secret: pulumi.Output[str] | None
    """originSecret; None: the program generates the origin secret."""
    origin_secret_previous: pulumi.Output[str] | None
    """originSecretPrevious, during a rotation of a configured originSecret."""
    probe_client_secret: pulumi.Output[str] | None
    """probeClientSecret; None: probeClientSecretName exists already."""


def load_from_pulumi() -> tuple[StackConfig, StackSecrets]:
    """Inside the Pulumi program: read ``pulumi.Config`` once, validate, and warn about
    what is valid but risky (``pulumi.log.warn``)."""
    import pulumi

    cfg = pulumi.Config(PROJECT)

    def get(name: str) -> Any:
        key = KEY_BY_NAME[name]
        if key.secret:
            return None  # secrets stay Outputs; see StackSecrets below
        if key.type in ("array", OBJECT):
            return cfg.get_object(name)
        return cfg.get(name)

    # Secrets are read as plain values only to validate them; they reach resources
    # as Pulumi secrets (StackSecrets) so they stay encrypted in state.
    config = build_stack_config(get, pulumi.get_stack(), origin_secret=cfg.get("originSecret"),
                                origin_secret_previous=cfg.get("originSecretPrevious"),
                                probe_client_secret=cfg.get("probeClientSecret"))
    for warning in stack_warnings(get, config):
        pulumi.log.warn(warning)
    secrets = StackSecrets(
        origin_secret=cfg.require_secret("originSecret") if config.origin_secret else None,
        origin_secret_previous=cfg.get_secret("originSecretPrevious") if config.origin_secret else None,
        probe_client_secret=cfg.require_secret("probeClientSecret")
        if config.auth.creates_probe_client_secret else None,
    )
    return config, secrets


class StackFileError(ValueError):
    pass


def read_stack_file(path: Path) -> dict[str, Any]:
    """The ``mcp-edge:*`` values of a Pulumi.<stack>.yaml, keyed without the namespace."""
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise StackFileError(f"stack file {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise StackFileError(f"stack file {path} is not valid YAML: {exc}") from None
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        raise StackFileError(f"stack file {path}: 'config' must be a mapping")
    values: dict[str, Any] = {}
    problems = []
    for full_key, value in config.items():
        namespace, _, name = str(full_key).partition(":")
        if namespace != PROJECT:
            continue  # other namespaces (aws:, pulumi:) are not ours to check
        if name not in KEY_BY_NAME:
            problems.append(f"{full_key} is not a key of this project (known: {', '.join(KEY_BY_NAME)})")
            continue
        if isinstance(value, dict) and "secure" in value:
            value = None  # encrypted: only the Pulumi engine can read it
        values[name] = value
    if problems:
        raise ConfigError(problems)
    return values


def stack_file_path(stack: str, root: Path = PROJECT_ROOT) -> Path:
    return root / f"Pulumi.{stack}.yaml"


def resolve_stack_file(stack_or_path: str | Path) -> Path:
    """A stack name (``prod``) or a stack file's path, as the stack file's path."""
    path = Path(stack_or_path)
    return path if path.suffix else stack_file_path(str(stack_or_path))


def load_from_stack_file(stack_or_path: str | Path) -> StackConfig:
    """Outside the engine (tests, offline plan, local run): read Pulumi.<stack>.yaml."""
    path = resolve_stack_file(stack_or_path)
    stack = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    values = read_stack_file(path)
    return build_stack_config(values.get, stack, origin_secret=values.get("originSecret"),
                              origin_secret_previous=values.get("originSecretPrevious"))


def pulumi_config_map(stack_or_path: str | Path) -> dict[str, str]:
    """The stack file as the engine hands config to a program: ``project:key`` -> string."""
    path = resolve_stack_file(stack_or_path)
    out: dict[str, str] = {}
    for name, value in read_stack_file(path).items():
        if value is None:
            continue
        out[f"{PROJECT}:{name}"] = value if isinstance(value, str) else json.dumps(value)
    return out
