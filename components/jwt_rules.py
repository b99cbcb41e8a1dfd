"""The bearer-token rules the edge (JWT shape, at every POP) and the origins (signature,
against the issuer's key set) both enforce: one args type for both components."""

from typing import NotRequired, TypedDict

from components import settings
from components.validation import ArgChecks

ALLOWED_JWT_ALGORITHMS = settings.JWT_ALGORITHMS.choices
DEFAULT_ALGORITHMS = settings.JWT_ALGORITHMS.default
DEFAULT_LEEWAY_S = settings.JWT_LEEWAY_S.default


class JwtRulesArgs(TypedDict):
    """What a bearer token must carry to be accepted."""

    issuer: str
    """The OAuth issuer (https URL): the token's iss claim."""
    audience: str
    """The audience the token must carry (aud claim), usually the public MCP URL."""
    algorithms: NotRequired[list[str]]
    """Accepted signature algorithms, asymmetric only (default RS256 and ES256)."""
    leeway_seconds: NotRequired[int]
    """Clock skew allowed on exp and nbf, 0-300 seconds (default 30)."""


def jwt_algorithms(rules: JwtRulesArgs) -> tuple[str, ...]:
    return tuple(rules.get("algorithms") or DEFAULT_ALGORITHMS)


def jwt_leeway_s(rules: JwtRulesArgs) -> int:
    leeway = rules.get("leeway_seconds")
    return DEFAULT_LEEWAY_S if leeway is None else leeway


def check_jwt_rules(checks: ArgChecks, field: str, rules: JwtRulesArgs) -> None:
    checks.https_url(f"{field}.issuer", rules.get("issuer"))
    checks.text(f"{field}.audience", rules.get("audience"))
    checks.all_of(f"{field}.algorithms", list(jwt_algorithms(rules)), ALLOWED_JWT_ALGORITHMS)
    checks.within(f"{field}.leeway_seconds", jwt_leeway_s(rules), settings.JWT_LEEWAY_S)
