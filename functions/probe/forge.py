"""A forged bearer token, for checking every round that the edge refuses one.

The forgery is the probe's own real token, header and claims unchanged (``iss``, ``aud``,
``exp``, ``kid``, ``alg``: everything the edge checks besides the signature), signed again
with a key the probe generated, not the issuer's. Only a signature check against the
issuer's key set tells them apart, so an edge answering it with anything but 401 is not
verifying tokens.

The key is generated once per execution environment and algorithm family (RSA 2048,
the algorithm's EC curve, Ed25519) with ``cryptography``; ``cryptography`` is imported on
the first forgery, never at the probe's import.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from .errors import ProbeConfigError

# alg -> (family, hash name); the families a JWT can be signed with.
ALGORITHMS = {
    "RS256": ("rsa", "SHA256"), "RS384": ("rsa", "SHA384"), "RS512": ("rsa", "SHA512"),
    "PS256": ("rsa-pss", "SHA256"), "PS384": ("rsa-pss", "SHA384"), "PS512": ("rsa-pss", "SHA512"),
    "ES256": ("P-256", "SHA256"), "ES384": ("P-384", "SHA384"), "ES512": ("P-521", "SHA512"),
    "EdDSA": ("Ed25519", ""), "Ed25519": ("Ed25519", ""),
}
_keys: dict[str, Any] = {}


def _b64url_decode(part: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _key(family: str) -> Any:
    key = _keys.get(family)
    if key is None:
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

        if family.startswith("rsa"):
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        elif family == "Ed25519":
            key = ed25519.Ed25519PrivateKey.generate()
        else:
            curve = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}[family]
            key = ec.generate_private_key(curve)
        _keys[family] = key
    return key


def _sign(alg: str, data: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    family, hash_name = ALGORITHMS[alg]
    key = _key(family)
    if family == "Ed25519":
        return bytes(key.sign(data))
    digest = getattr(hashes, hash_name)()
    if family == "rsa":
        return bytes(key.sign(data, padding.PKCS1v15(), digest))
    if family == "rsa-pss":
        return bytes(key.sign(data, padding.PSS(padding.MGF1(digest), digest.digest_size), digest))
    r, s = decode_dss_signature(key.sign(data, ec.ECDSA(digest)))
    size = (key.curve.key_size + 7) // 8  # JWS: r and s as fixed-size big-endian (RFC 7518 3.4)
    return r.to_bytes(size, "big") + s.to_bytes(size, "big")


def forge(real_token: str) -> str:
    """``real_token`` with its header and claims, signed by the probe's own key.

    ``ProbeConfigError`` when the token is not a JWT or names an algorithm no key can be
    made for (the check then reports "unknown")."""
    parts = real_token.split(".")
    try:
        header = _b64url_decode(parts[0]) if len(parts) == 3 else None
        _b64url_decode(parts[1]) if len(parts) == 3 else None
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: JSON nested too deep
        header = None
    if not isinstance(header, dict):
        raise ProbeConfigError("the issuer's tokens are not JWTs: there is no signature to forge")
    alg = header.get("alg")
    if alg not in ALGORITHMS:
        raise ProbeConfigError(f"the issuer signs with {alg!r}, which the probe cannot forge")
    signing_input = f"{parts[0]}.{parts[1]}"
    return f"{signing_input}.{_b64url(_sign(alg, signing_input.encode()))}"
