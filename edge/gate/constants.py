"""This stack's settings for the edge gate (a template: ``edge.gate_package`` replaces the
``GATE_CONFIG`` line with the stack's values, since Lambda@Edge has no environment
variables). The keys are described in ``edge/gate_package.py`` (``gate_config``)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The algorithms a token may use: asymmetric only (an HMAC "key" from a key set would be a
# public value, and "none" is no signature).
ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")

GATE_CONFIG: dict[str, Any] = {}  # rendered at deploy time; see edge/gate_package.py
