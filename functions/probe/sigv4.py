"""SigV4 for the probe's direct requests to an origin's Function URL (``AuthType AWS_IAM``).

Service ``lambda``, the origin's region, the probe role's own credentials (as Lambda hands
them to the function: ``secrets_manager.credentials_from``), and ``x-amz-content-sha256``,
the SHA-256 of the exact body bytes sent (Function URLs refuse unsigned payloads). Signed:
``host``, ``x-amz-date``, ``x-amz-content-sha256`` and ``x-amz-security-token``, the same
set the edge signs (``edge/gate/signing.py``); ``Authorization`` carries the signature, so
the bearer token travels in ``EDGE_AUTHORIZATION_HEADER`` (``probe.py``).

The signer is botocore's ``SigV4Auth`` (``secrets_manager.aws_sign``, which the Secrets
Manager read uses too), from the Lambda runtime (the probe ships no botocore). Importing
``botocore.auth`` costs a few hundred milliseconds of CPU (``bench/probe_bench.py`` measures
it against awscrt's signer and the probe's import), so it is imported on the first signed
request of an execution environment, never at the probe's import: the first invocation's
client-secret read pays it, and the exchange's timings start after it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from .secrets_manager import Credentials, aws_sign

SERVICE = "lambda"
CONTENT_SHA256_HEADER = "x-amz-content-sha256"


def payload_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


@dataclass(frozen=True)
class FunctionUrlSigner:
    """Signs requests to Function URLs in one region with one set of credentials."""

    region: str
    credentials: Credentials

    def __call__(self, method: str, url: str, body: bytes) -> Mapping[str, str]:
        """The headers to add to the request: ``authorization``, ``x-amz-date``,
        ``x-amz-content-sha256`` and, with session credentials, ``x-amz-security-token``."""
        signed = aws_sign(method, url, {CONTENT_SHA256_HEADER: payload_hash(body)}, body, self.credentials, SERVICE,
                          self.region)
        return {name.lower(): value for name, value in signed.items()}
