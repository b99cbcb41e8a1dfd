"""Physical names: every explicit AWS name carries the server id *and* the stack.

`pulumi up` runs per stack, and several stacks (prod, staging, a developer's) share
one account: a name that only holds the server id would collide between them
(CloudFront Functions, origin request policies and KeyValueStores are account-wide;
functions, queues, topics, tables, schedules, KMS aliases, alarms and Secrets Manager
secrets are per region).
Resources nothing needs to find by name (IAM roles and policies) stay auto-named.

``physical_name(server_id, suffix, limit=...)`` is ``<server_id>-<stack>-<suffix>``
when that fits the service's length limit. The stack part is the stack name in
lower case with anything but ``a-z 0-9 -`` as ``-``; when that changed the name
(``Prod``, ``team.dev``) or the whole would not fit, it becomes a shortened stack
name plus 6 hex characters of the stack name's SHA-256, so two stacks never share a
name and every name stays within its limit (a 31-character server id and the
longest suffix still fit with the digest alone).
"""

import hashlib
import re

import pulumi

_PLAIN_STACK = re.compile(r"[a-z0-9][a-z0-9-]*")
DIGEST_CHARS = 6

# Length limits of the names this project sets (each service's API reference; the
# contract checks in review/contracts hold every rendered name to the same limits).
LAMBDA_FUNCTION = 64
CLOUDFRONT_FUNCTION = 64
KEY_VALUE_STORE = 64
ORIGIN_REQUEST_POLICY = 128
RESPONSE_HEADERS_POLICY = 128
SQS_QUEUE = 80
SNS_TOPIC = 256
DYNAMODB_TABLE = 255
SCHEDULE = 64
SCHEDULE_GROUP = 64
STATE_MACHINE = 80
LOG_GROUP = 512
KMS_ALIAS = 256  # including "alias/"
ALARM = 255
SECRETS_MANAGER_SECRET = 512


def stack_digest(stack: str) -> str:
    return hashlib.sha256(stack.encode("utf-8")).hexdigest()[:DIGEST_CHARS]


def stack_token(stack: str) -> str:
    """The stack's part of a name when nothing needs shortening."""
    token = re.sub(r"[^a-z0-9-]", "-", stack.lower()).strip("-")
    if token != stack or not _PLAIN_STACK.fullmatch(token):
        token = f"{token}-{stack_digest(stack)}" if token else stack_digest(stack)
    return token


def physical_name(server_id: str, suffix: str, *, limit: int, stack: str | None = None, prefix: str = "") -> str:
    """``<prefix><server_id>-<stack>-<suffix>`` within ``limit`` characters (``stack``:
    the current Pulumi stack unless given)."""
    stack = pulumi.get_stack() if stack is None else stack
    token = stack_token(stack)
    name = f"{prefix}{server_id}-{token}-{suffix}"
    if len(name) <= limit:
        return name
    digest = stack_digest(stack)
    room = limit - len(f"{prefix}{server_id}--{suffix}") - len(digest)
    if room < 0:
        raise ValueError(f"{prefix}{server_id}-…-{suffix} cannot hold the stack {stack!r} in {limit} characters")
    short = token[:max(0, room - 1)].rstrip("-")
    return f"{prefix}{server_id}-{short + '-' if short else ''}{digest}-{suffix}"
