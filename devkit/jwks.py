"""A key set served on loopback, for tests and benchmarks of the origin's token
checks: the JWKS document is a live dict (add a key and the next fetch sees it) and
every fetch is counted, so a test can assert how often the origin refreshed.

The local run's issuer (``local.oauth.issuer``) serves its JWKS itself; this is the
smallest stand-in for an authorization server when only the key set matters.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt


def public_jwk(private_key: Any, kid: str, alg: str) -> dict[str, Any]:
    """The public half of an RSA or EC private key as a JWK with ``kid``, ``use`` and ``alg``."""
    algorithm = jwt.algorithms.RSAAlgorithm if alg.startswith(("RS", "PS")) else jwt.algorithms.ECAlgorithm
    jwk: dict[str, Any] = json.loads(algorithm.to_jwk(private_key.public_key()))
    jwk.update(kid=kid, use="sig", alg=alg)
    return jwk


class JwksServer:
    """``GET`` anything on ``127.0.0.1:<port>`` answers the current key set."""

    PATH = "/.well-known/jwks.json"

    def __init__(self, keys: list[dict[str, Any]]):
        self.document: dict[str, Any] = {"keys": list(keys)}
        self.fetches: list[float] = []  # monotonic times of each fetch
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.fetches.append(time.monotonic())
                body = json.dumps(owner.document).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # Polled for shutdown() every 50 ms, not the default 0.5 s that every close() waited out.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="jwks", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}{self.PATH}"

    def add_key(self, jwk: dict[str, Any]) -> None:
        self.document["keys"].append(jwk)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> JwksServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
