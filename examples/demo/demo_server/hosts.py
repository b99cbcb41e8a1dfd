"""Host and Origin header policy: which values the origin serves.

The SDK's transport security (DNS rebinding protection) matches Host exactly or
as ``host:*`` (any port). A Function URL's host is ``<url-id>.lambda-url.<region>.on.aws``
and the id exists only once the function does, so the program cannot pass it in:
the policy adds ``*.domain`` patterns (any subdomain, one or more labels). The same
policy object is given to the SDK (``allow_list``), so its own check stays on and
agrees with ours.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class HostPattern:
    """One allowed Host value: ``host``, ``host:port``, ``host:*`` or ``*.domain`` (``:*`` optional)."""

    host: str  # for wildcards, the domain after "*."
    port: str | None  # None: no port allowed; "*": any port; digits: that port
    wildcard: bool

    @classmethod
    def parse(cls, pattern: str) -> HostPattern:
        pattern = pattern.lower()
        wildcard = pattern.startswith("*.")
        rest = pattern[2:] if wildcard else pattern
        host, port = _split_port(rest)
        return cls(host=host, port=port, wildcard=wildcard)

    def matches(self, value: str) -> bool:
        host, port = _split_port(value.lower())
        if port is not None and port != self.port and self.port != "*":
            return False
        if port is None and self.port not in (None, "*"):
            return False
        if self.wildcard:
            label_part = host.removesuffix("." + self.host)
            return label_part != host and _valid_labels(label_part)
        return host == self.host


def _split_port(value: str) -> tuple[str, str | None]:
    if value.startswith("["):  # IPv6 literal
        end = value.find("]")
        if end == -1:
            return value, None
        host, rest = value[: end + 1], value[end + 1:]
        return host, rest[1:] if rest.startswith(":") else None
    host, sep, port = value.rpartition(":")
    if not sep:
        return value, None
    return host, port


def _valid_labels(labels: str) -> bool:
    return all(
        label and len(label) <= 63 and label[0] != "-" and label[-1] != "-"
        and all(c.isascii() and (c.isalnum() or c == "-") for c in label)
        for label in labels.split(".")
    )


class HostPolicy:
    def __init__(self, patterns: Iterable[str]):
        self.patterns = tuple(HostPattern.parse(p) for p in patterns)
        self.raw = tuple(patterns)

    def allows(self, host: str | None) -> bool:
        return bool(host) and any(p.matches(host) for p in self.patterns)  # type: ignore[arg-type]


class PolicyAllowList(list[str]):
    """A list for the SDK's ``TransportSecuritySettings.allowed_hosts``/``allowed_origins``
    whose membership test is the policy: the SDK checks ``value in allowed``."""

    def __init__(self, raw: Iterable[str], contains: Callable[[str], bool]):
        super().__init__(raw)
        self._contains = contains

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and self._contains(value)


def origin_allowed(allowed: tuple[str, ...], origin: str | None) -> bool:
    """Browser Origin check: absent is fine (not a browser), ``*`` allows any."""
    return not origin or "*" in allowed or origin in allowed
