"""The loopback key set the origin's tests and benchmark verify tokens against."""

from __future__ import annotations

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from devkit.jwks import JwksServer, public_jwk


def test_the_served_key_set_verifies_tokens_signed_by_its_keys_and_counts_fetches():
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    with JwksServer([public_jwk(rsa_key, "r1", "RS256")]) as jwks:
        assert jwks.fetches == []
        token = jwt.encode({"sub": "a"}, ec_key, algorithm="ES256", headers={"kid": "e1"})
        jwks.add_key(public_jwk(ec_key, "e1", "ES256"))  # a rotation: the next fetch sees it
        client = jwt.PyJWKClient(jwks.url, cache_keys=False)
        key = client.get_signing_key_from_jwt(token)
        assert jwt.decode(token, key.key, algorithms=["ES256"]) == {"sub": "a"}
        assert [k["kid"] for k in httpx.get(jwks.url).json()["keys"]] == ["r1", "e1"]
        assert len(jwks.fetches) == 2
    assert "d" not in public_jwk(rsa_key, "r1", "RS256")  # never the private half
