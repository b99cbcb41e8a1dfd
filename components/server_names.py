"""The names of one hosted server's resources in one region, for a stack of N servers (`mcp-edge:servers`).

``server_names(server_id, stack, server, region)`` is pure: ``server`` None is the one
server of ``mcp-edge:server``, whose names are exactly today's (``components/origin.py``'s
``function_name_for``, ``components/image.py``'s ``repository_name_for``, the program's
``<serverId>-origin-<region>`` component); a name of ``mcp-edge:servers`` puts the server
between the stack and the purpose:

- function ``<serverId>-<stack>-<server>-<tag>-origin-<region>``, where ``tag`` is 6 hex
  characters of the SHA-256 of the stack and the server together. Without it, stack ``prod``'s
  server ``github`` and a one-server stack named ``prod-github`` (a likely migration, in one
  account) would both be ``<serverId>-prod-github-origin-<region>``. When the whole does not fit
  Lambda's 64 characters, the stack and server part is cut and the tag keeps it unique;
- its log group ``/aws/lambda/<function>`` and its alarms ``<function>-<alarm>``;
- its component's logical name (``<serverId>-<server>-origin-<region>``), which the children's
  logical names extend; IAM roles are auto-named from those (the name plus ``-`` and 7
  random characters, at most 64: pulumi-aws's ``AutoName("name", 64)``), so the component's
  name is kept within ``COMPONENT_NAME_LIMIT``, cut with a digest of the whole where needed;
- its image repository (one name in every region, as today), its KeyValueStore health key,
  and its public paths: ``/<server>/mcp`` and its RFC 9728 metadata path.

Uniqueness: within a stack, (server, region) pairs differ in the region or in the tag's input;
two servers of one stack whose tags collide are refused by ``tag_collisions`` (1 in 16
million for a pair). Across stacks, the stack's own token and the tag both differ.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from components import naming
from components.image import ECR_REPOSITORY, repository_name_for
from components.origin import function_name_for
from edge.viewer_function import PROTECTED_RESOURCE_METADATA
from functions.contract import REGION_HEALTH_KEY

TAG_CHARS = 6
# pulumi-aws auto-names a role "<logical name>-<7 random characters>" within 64 characters.
IAM_ROLE = 64
AUTONAME_RANDOM_CHARS = 7
# The longest suffix a child of an origin component adds to the component's logical name for an
# auto-named IAM resource (regional_function: "<name>-role").
ROLE_SUFFIX = "-role"
COMPONENT_NAME_LIMIT = IAM_ROLE - AUTONAME_RANDOM_CHARS - 1 - len(ROLE_SUFFIX)
# The origin's alarms (components/origin.py, McpOrigin._alarms).
ALARM_SUFFIXES = ("spillover", "utilization", "throttles", "errors")



@dataclass(frozen=True)
class ServerNames:
    component: str
    """Logical name of the server's origin component in this region."""
    role: str
    """Logical name of its execution role; AWS's name is this plus '-' and 7 random characters."""
    function: str
    log_group: str
    alarms: tuple[str, ...]
    repository: str
    """Its image repository (the same in every region)."""
    health_key: str
    """Its region-health key in the edge's KeyValueStore."""
    public_path: str
    metadata_path: str

    def lengths(self) -> dict[str, tuple[int, int]]:
        """Each AWS name's length and its service's limit."""
        return {
            "function": (len(self.function), naming.LAMBDA_FUNCTION),
            "role": (len(self.role) + 1 + AUTONAME_RANDOM_CHARS, IAM_ROLE),
            "log_group": (len(self.log_group), naming.LOG_GROUP),
            **{f"alarm {a}": (len(a), naming.ALARM) for a in self.alarms},
            "repository": (len(self.repository), ECR_REPOSITORY),
        }


def _digest(text: str, chars: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:chars]


def server_tag(stack: str, server: str) -> str:
    """6 hex characters that tell this stack's server apart from every other stack's and server's."""
    return _digest(f"{stack}\n{server}", TAG_CHARS)


def fitted(name: str, limit: int) -> str:
    """``name`` when it fits ``limit``, else its start and a digest of the whole (unique as the whole is)."""
    if len(name) <= limit:
        return name
    return f"{name[:limit - TAG_CHARS - 1].rstrip('-')}-{_digest(name, TAG_CHARS)}"


def server_physical_name(server_id: str, stack: str, server: str, purpose: str, *, limit: int) -> str:
    """``<serverId>-<stack>-<server>-<tag>-<purpose>`` within ``limit``: the stack and server
    part cut when it must be (the tag holds both)."""
    tag = server_tag(stack, server)
    middle = f"{naming.stack_token(stack)}-{server}"
    room = limit - len(f"{server_id}--{tag}-{purpose}")
    if room < 0:
        raise ValueError(f"{server_id}-…-{tag}-{purpose} does not fit in {limit} characters")
    middle = middle[:room].rstrip("-") if len(middle) > room else middle
    return f"{server_id}-{middle + '-' if middle else ''}{tag}-{purpose}"


def server_names(server_id: str, stack: str, server: str | None, region: str, *,
                 mcp_path: str = "/mcp") -> ServerNames:
    """Every name of ``server``'s resources in ``region`` (``server`` None: ``mcp-edge:server``,
    at ``mcp_path``, named as today)."""
    if server is None:
        function = function_name_for(server_id, region, stack)
        # Today's name, cut only where today's role could not be created (a serverId and region
        # over 43 characters together: the program's own f-string makes a role name AWS refuses).
        component = fitted(f"{server_id}-origin-{region}", COMPONENT_NAME_LIMIT)
        repository = repository_name_for(server_id, stack)
        health_key, public_path = REGION_HEALTH_KEY, mcp_path
    else:
        function = server_physical_name(server_id, stack, server, f"origin-{region}", limit=naming.LAMBDA_FUNCTION)
        component = fitted(f"{server_id}-{server}-origin-{region}", COMPONENT_NAME_LIMIT)
        repository = server_physical_name(server_id, stack, server, "origin", limit=ECR_REPOSITORY)
        health_key, public_path = f"{REGION_HEALTH_KEY}/{server}", f"/{server}/mcp"
    return ServerNames(
        component=component,
        role=f"{component}{ROLE_SUFFIX}",
        function=function,
        log_group=f"/aws/lambda/{function}",
        alarms=tuple(f"{function}-{suffix}" for suffix in ALARM_SUFFIXES),
        repository=repository,
        health_key=health_key,
        public_path=public_path,
        metadata_path=PROTECTED_RESOURCE_METADATA + public_path,
    )


def tag_collisions(stack: str, servers: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs of a stack's servers whose tags are equal (their cut names could be too)."""
    seen: dict[str, str] = {}
    pairs = []
    for server in servers:
        tag = server_tag(stack, server)
        if tag in seen:
            pairs.append((seen[tag], server))
        seen.setdefault(tag, server)
    return pairs
