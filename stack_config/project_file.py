"""``Pulumi.yaml``'s ``config:`` block, rendered from ``stack_config.keys.KEYS`` so the
project file cannot drift from what the program reads.

``python -m stack_config.project_file --write`` rewrites the block in place (everything
above it, the project's name, description and runtime, is kept as written);
``--check`` exits 1 when it is stale, and a test does the same.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from stack_config.keys import KEYS, OBJECT
from stack_config.loading import PROJECT_ROOT

PROJECT_FILE = PROJECT_ROOT / "Pulumi.yaml"
MARKER = "# Generated from stack_config/keys.py by python -m stack_config.project_file --write: edit the keys there."


def declarations() -> dict[str, dict[str, Any]]:
    """Every key as the Pulumi CLI reads a project config declaration (object keys have
    none: Pulumi's project config types are string, integer, boolean and array)."""
    out: dict[str, dict[str, Any]] = {}
    for key in KEYS:
        if key.type == "object":
            # The CLI types only strings, integers, booleans and arrays: an object key is declared
            # untyped, its default (documented in the description) applied by the program.
            out[key.name] = {"description": key.description}
            continue
        entry: dict[str, Any] = {"type": key.type, "description": key.description}
        if key.type == "array":
            entry["items"] = {"type": "string"}
        if key.default is not None:
            entry["default"] = list(key.default) if isinstance(key.default, tuple) else key.default
        if key.secret:
            entry["secret"] = True
        out[key.name] = entry
    return out


def object_keys_comment() -> str:
    """The object keys, named in a comment: a stack file sets them as YAML mappings."""
    names = [k.name for k in KEYS if k.type == OBJECT]
    if not names:
        return ""
    return ("# Set as YAML mappings (Pulumi's project config types no object key, so these are declared "
            "untyped): " + ", ".join(names) + ".\n")


def render_config_block() -> str:
    return MARKER + "\n" + object_keys_comment() + yaml.safe_dump({"config": declarations()}, sort_keys=False,
                                                                  width=116, allow_unicode=True)


def render(current: str) -> str:
    """``current`` (the project file's text) with its config block rendered afresh."""
    head, sep, _ = current.partition(MARKER)
    if not sep:
        head, sep, _ = current.partition("\nconfig:\n")
        head += "\n" if sep else ""
    return head + render_config_block()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite Pulumi.yaml's config block")
    mode.add_argument("--check", action="store_true", help="exit 1 when Pulumi.yaml's config block is stale")
    args = parser.parse_args(argv)
    current = PROJECT_FILE.read_text()
    rendered = render(current)
    if args.write:
        if rendered != current:
            PROJECT_FILE.write_text(rendered)
        return 0
    if rendered != current:
        print(f"{PROJECT_FILE.name}'s config block is stale: run python -m stack_config.project_file --write",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
