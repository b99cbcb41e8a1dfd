"""Properties of the gate's pure parsers (``edge_gate.mcp_request``, imported from the
rendered package): the body's bytes, the JSON-RPC calls, the headers, the bearer token,
the scopes and the identity header values."""

from __future__ import annotations

import base64
import functools
import json
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.edge.gate_harness import Issuer, render, settings


@functools.cache
def rendered() -> tuple[ModuleType, Path]:
    root = Path(tempfile.mkdtemp(prefix="edge-gate-parsers-"))
    return render(settings(Issuer.generate().jwks), root), root


@pytest.fixture(scope="module", autouse=True)
def rendered_before_the_properties() -> None:
    """Render and import once, outside any example's deadline."""
    rendered()


def parsers() -> ModuleType:
    handler, root = rendered()
    module: ModuleType = handler.mcp_request
    assert Path(module.__file__ or "").is_relative_to(root)
    return module


def parsers_tokens() -> ModuleType:
    handler, root = rendered()
    module: ModuleType = handler.tokens
    assert Path(module.__file__ or "").is_relative_to(root)
    return module


def headers_of(**values: str | list[str]) -> dict[str, list[dict[str, str]]]:
    return {name.replace("_", "-"): [{"key": name, "value": v} for v in (value if isinstance(value, list) else [value])]
            for name, value in values.items()}


names = st.text(min_size=1, max_size=40)
B64TOKEN = st.from_regex(r"[A-Za-z0-9\-._~+/]+=*", fullmatch=True)


@given(st.binary(max_size=4096))
def test_the_body_is_the_exact_decoded_bytes(data):
    mr = parsers()
    assert mr.request_body({"inputTruncated": False, "encoding": "base64",
                            "data": base64.b64encode(data).decode()}) == data


@given(st.binary(max_size=64))
def test_a_truncated_body_is_always_413(data):
    mr = parsers()
    with pytest.raises(mr.BodyRefusedError) as refused:
        mr.request_body({"inputTruncated": True, "encoding": "base64", "data": base64.b64encode(data).decode()})
    assert refused.value.status == 413


@given(st.text(max_size=64))
def test_body_data_that_is_not_strict_base64_is_refused_or_decoded_exactly(text):
    mr = parsers()
    try:
        raw = mr.request_body({"encoding": "base64", "data": text})
    except mr.BodyRefusedError as exc:
        assert exc.status == 400
    else:
        assert base64.b64encode(raw).decode() == text


@given(names, st.sampled_from(["tools/call", "prompts/get"]), st.integers() | st.text(max_size=8))
def test_a_named_call_yields_its_method_target_and_id(name, method, request_id):
    mr = parsers()
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                       "params": {"name": name, "arguments": {}}}).encode()
    calls, batch = mr.jsonrpc_calls(body)
    assert calls == [mr.Call(method, name, request_id)] and not batch


@given(st.lists(names, min_size=1, max_size=5))
def test_a_batch_yields_every_call(tool_names):
    mr = parsers()
    body = json.dumps([{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": n}}
                       for i, n in enumerate(tool_names)]).encode()
    calls, batch = mr.jsonrpc_calls(body)
    assert batch and [c.target for c in calls] == tool_names


@given(names, names)
def test_a_duplicate_member_anywhere_is_refused(first, second):
    mr = parsers()
    params = f'{{"name":{json.dumps(first)},"name":{json.dumps(second)}}}'
    body = f'{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}'.encode()
    with pytest.raises(mr.RequestRefusedError):
        mr.jsonrpc_calls(body)


@given(names, names)
def test_mcp_name_must_equal_the_body_after_trimming(header_name, body_name):
    mr = parsers()
    call = mr.Call("tools/call", body_name, 1)
    headers = headers_of(mcp_method="tools/call", mcp_name=f" {header_name}\t")
    if header_name.strip(" \t") == body_name and "=?base64?" not in header_name:
        mr.check_mcp_headers(headers, [call], False)
    elif header_name.strip(" \t") != body_name:
        with pytest.raises(mr.RequestRefusedError):
            mr.check_mcp_headers(headers, [call], False)


@given(names)
def test_a_base64_mcp_name_round_trips(name):
    mr = parsers()
    encoded = "=?base64?" + base64.b64encode(name.encode("utf-8", "surrogatepass")).decode() + "?="
    try:
        expected = name.encode("utf-8").decode("utf-8")
    except UnicodeEncodeError:
        return  # lone surrogates are no JSON string a client sends
    assert mr.decoded_header_value(encoded) == expected


@given(B64TOKEN, st.sampled_from(["Bearer", "bearer", "BEARER", "bEaReR"]), st.integers(1, 3))
def test_one_bearer_token_is_read_whatever_the_scheme_case(token, scheme, spaces):
    mr = parsers()
    assert mr.bearer_token(headers_of(authorization=f"{scheme}{' ' * spaces}{token}")) == token


@given(B64TOKEN, B64TOKEN)
def test_two_authorization_headers_are_always_refused(first, second):
    mr = parsers()
    with pytest.raises(mr.BearerError):
        mr.bearer_token(headers_of(authorization=[f"Bearer {first}", f"Bearer {second}"]))


@given(st.text(max_size=60))
def test_an_authorization_value_that_is_not_a_bearer_token_is_refused(value):
    mr = parsers()
    try:
        token = mr.bearer_token(headers_of(authorization=value))
    except mr.BearerError:
        return
    assert token is not None and value.strip(" \t").split(" ")[-1] == token


@given(st.text(max_size=80))
def test_identity_values_become_printable_ascii_that_decodes_back(value):
    mr = parsers()
    safe = mr.header_safe(value)
    assert all(0x20 <= ord(ch) < 0x7F for ch in safe)
    assert safe == safe.strip(" ")
    try:
        assert unquote(safe, errors="strict") == value
    except UnicodeDecodeError:
        assert any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)  # lone surrogates only


@given(st.text(st.characters(min_codepoint=0x1F, max_codepoint=0x80), max_size=40))
def test_a_printable_ascii_identity_passes_as_is_and_anything_else_is_encoded(value):
    mr = parsers()
    safe = mr.header_safe(value)
    plain = value != "" and value == value.strip(" ") and all(0x20 <= ord(c) < 0x7F and c != "%" for c in value)
    assert (safe == value) == plain or (value == "" and safe == "")
    assert unquote(safe) == value


scope_tokens = st.from_regex(r"[a-z:]{1,8}", fullmatch=True)


@given(st.lists(scope_tokens, max_size=3), st.dictionaries(names, st.lists(scope_tokens, max_size=3), max_size=4),
       st.lists(names, max_size=4))
def test_the_scopes_needed_are_the_base_and_every_called_tools(base, tool_scopes, called):
    mr = parsers()
    calls = [mr.Call("tools/call", name, i) for i, name in enumerate(called)]
    needed = mr.scopes_needed(calls, base, {"tools/call": tool_scopes})
    assert needed == {*base, *(s for name in called for s in tool_scopes.get(name, ()))}


@given(st.lists(scope_tokens, max_size=5))
def test_granted_scopes_read_scope_and_scp_alike(scopes):
    mr = parsers()
    assert mr.granted_scopes({"scope": " ".join(scopes)}) == set(scopes) == mr.granted_scopes({"scp": scopes})


# Segments near the edge cases of PyJWT's strict base64url check (alphabet and near-alphabet
# characters, padding, every length modulo 4).
SEGMENT = st.one_of(
    st.binary(max_size=40).map(lambda raw: base64.urlsafe_b64encode(raw)),
    st.binary(max_size=40).map(lambda raw: base64.urlsafe_b64encode(raw).rstrip(b"=")),
    st.text(alphabet="ABYZabyz0189-_=+/.! \n\x00é", max_size=24).map(lambda t: t.encode()),
    st.binary(max_size=24),
)


def segment_verdict(decode: Any, segment: bytes) -> tuple[str, Any]:
    import jwt

    try:
        return "decoded", decode(segment, "payload")
    except jwt.DecodeError as exc:
        return "refused", str(exc)


@given(SEGMENT)
def test_the_gates_segment_decoder_answers_exactly_as_pyjwts(segment):
    from jwt import PyJWS

    tokens = parsers_tokens()
    ours = segment_verdict(tokens.StrictSegmentJWS._decode_base64url_segment, segment)
    assert ours == segment_verdict(PyJWS._decode_base64url_segment, segment)


def test_the_verifier_decodes_through_the_strict_segment_decoder():
    tokens = parsers_tokens()
    assert isinstance(tokens.JWT._jws, tokens.StrictSegmentJWS)


# --- the verifier's contract: 401 or claims, never an exception -------------------------------------------

JSON_SCALARS = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-10**600, max_value=10**600)
                | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda children: st.lists(children, max_size=4)
                           | st.dictionaries(st.text(max_size=8), children, max_size=4), max_leaves=12)
CLAIM_NAMES = st.sampled_from(["iss", "aud", "exp", "nbf", "iat", "sub", "scope", "scp", "client_id", "azp", "jti"])


@functools.cache
def signing_issuer() -> Issuer:
    return Issuer.generate()


def verifier() -> Any:
    tokens = parsers_tokens()
    issuer = signing_issuer()

    def unreachable(url: str, timeout_s: float) -> bytes:
        raise OSError("the issuer is unreachable in this test")  # an unknown kid: key-set trouble

    key_set = tokens.KeySet(issuer.jwks, "https://issuer.example.com/jwks", cooldown_s=60, max_backoff_s=1,
                            fetch_timeout_s=0.1, fetch=unreachable)
    return tokens.TokenVerifier(key_set, issuer=issuer.claims()["iss"], audiences=[issuer.claims()["aud"]],
                                algorithms=["RS256", "ES256"], leeway_s=30)


def es256(payload: bytes, head: dict[str, Any] | None = None) -> str:
    """An ES256 token signed by the test issuer's key over exactly these payload bytes."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    def b64url(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head_segment = b64url(json.dumps(head or {"alg": "ES256", "kid": "ec-1"}).encode())
    signing_input = f"{head_segment}.{b64url(payload)}"
    der = signing_issuer().ec_key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
    r, s = decode_dss_signature(der)
    return f"{signing_input}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


@given(st.dictionaries(CLAIM_NAMES | st.text(max_size=8), JSON_VALUES, max_size=6), st.booleans())
def test_any_signed_claims_of_json_values_give_claims_or_an_invalid_token_never_an_exception(overrides, on_valid):
    tokens = parsers_tokens()
    claims = {**signing_issuer().claims(), **overrides} if on_valid else overrides
    token = es256(json.dumps(claims).encode())  # Python's JSON: NaN, Infinity, integers of 600 digits
    try:
        verified = verifier().verify(token)
    except tokens.TokenRejectedError:
        return
    # Only claims the gate can read pass: time claims are finite dates, issuer and audience ours.
    for claim in ("exp", "nbf", "iat"):
        if claim in verified:
            assert tokens.is_time(verified[claim])
    assert verified["iss"] == signing_issuer().claims()["iss"]


@given(st.dictionaries(st.sampled_from(["alg", "kid", "typ", "crit", "b64", "jku", "x5u"]) | st.text(max_size=8),
                       JSON_VALUES, max_size=4))
def test_any_token_header_of_json_values_gives_claims_an_invalid_token_or_key_set_trouble(head):
    tokens = parsers_tokens()
    head = {"alg": "ES256", "kid": "ec-1", **head}
    token = es256(json.dumps(signing_issuer().claims()).encode(), head)
    try:
        verified = verifier().verify(token)
    except (tokens.TokenRejectedError, tokens.KeySetUnavailableError):
        return
    assert (head["alg"], head["kid"]) == ("ES256", "ec-1") and verified["iss"] == signing_issuer().claims()["iss"]


# --- the body's media type ------------------------------------------------------------------------------

OWS = st.text(alphabet=" \t", max_size=2)


def case_variants(word: str) -> st.SearchStrategy[str]:
    return st.tuples(*[st.sampled_from(sorted({c.lower(), c.upper()})) for c in word]).map("".join)


def quoted(value: str) -> st.SearchStrategy[str]:
    """``value`` as a token or as a quoted-string, some characters escaped as quoted-pairs."""
    escaped = st.tuples(*[st.sampled_from([c, "\\" + c]) for c in value]).map("".join)
    return st.just(value) | escaped.map(lambda v: f'"{v}"')


UTF8_JSON = st.builds(
    lambda lead, media, params, trail: f"{lead}{media}{''.join(params)}{trail}",
    OWS, case_variants("application/json"),
    st.lists(st.builds(lambda a, b, name, value: f"{a};{b}{name}={value}", OWS, OWS, case_variants("charset"),
                       case_variants("utf-8").flatmap(quoted)), max_size=1),
    OWS)
CHARSETS = st.sampled_from(["utf-7", "utf-16", "utf-16le", "utf-16be", "utf-32", "iso-8859-1", "latin1", "ascii",
                            "us-ascii", "cp1252", "utf8", "utf-8-sig", "x-user-defined", "utf-7-imap"])


@given(UTF8_JSON)
def test_every_spelling_of_application_json_in_utf8_is_accepted(value):
    mr = parsers()
    assert mr.media_type_problem([value], []) is None
    assert mr.parse_media_type(value)[0] == "application/json"


@given(CHARSETS.flatmap(case_variants).flatmap(quoted), OWS, OWS)
def test_any_other_charset_in_any_spelling_is_refused_naming_it(charset, before, after):
    mr = parsers()
    problem = mr.media_type_problem([f"application/json{before};{after}charset={charset}"], [])
    assert problem is not None and "charset" in problem


@given(st.text(max_size=60))
def test_a_content_type_is_accepted_only_if_it_parses_as_application_json_with_at_most_a_utf8_charset(value):
    mr = parsers()
    parsed = mr.parse_media_type(value)
    accepted = mr.media_type_problem([value], []) is None
    assert accepted == (parsed is not None and parsed[0] == "application/json"
                        and all(name == "charset" and v.lower() == "utf-8" for name, v in parsed[1])
                        and len(parsed[1]) <= 1)


@given(st.lists(st.text(alphabet="abcdefgizpxy-, \t", max_size=16), min_size=1, max_size=3))
def test_a_content_coding_other_than_identity_is_refused(codings):
    mr = parsers()
    listed = [c.strip(" \t").lower() for value in codings for c in value.split(",")]
    problem = mr.media_type_problem(["application/json"], codings)
    assert (problem is None) == all(c in ("", "identity") for c in listed)


@given(st.binary(min_size=1, max_size=64), st.sampled_from(["text/plain", "application/json; charset=utf-16", ""]))
def test_a_non_empty_body_under_a_refused_type_raises_415_and_an_empty_one_never(body, content_type):
    mr = parsers()
    headers = headers_of(content_type=content_type)
    with pytest.raises(mr.MediaTypeRefusedError, match="application/json in UTF-8"):
        mr.check_media_type(headers, body)
    mr.check_media_type(headers, b"")


# --- the headers only the edge may set ------------------------------------------------------------------

EDGE_NAMES = ["x-mcp-edge-authorization", "x-mcp-edge-subject", "x-mcp-edge-client-id", "x-mcp-edge-scopes",
              "x-mcp-edge-region", "x-mcp-edge-refusal", "x-mcp-edge-", "x-amz-date", "x-amz-security-token", "x-amz-"]


def spellings(name: str) -> st.SearchStrategy[str]:
    """``name`` in any case, each ``-`` possibly ``_``, possibly with more name characters after it."""
    dashes = st.tuples(*[st.sampled_from(["-", "_"]) if c == "-" else case_variants(c) for c in name]).map("".join)
    return st.tuples(dashes, st.text(alphabet="abcxyz-_09", max_size=6)).map("".join)


@given(st.lists(st.sampled_from(EDGE_NAMES).flatmap(spellings) | st.text(alphabet="abcmpxz-_", min_size=1,
                                                                           max_size=20), max_size=8))
def test_no_viewer_header_a_server_could_read_as_the_edges_survives_the_strip(names):
    handler, _ = rendered()
    headers = {name.lower(): [{"key": name, "value": "forged"}] for name in names}
    handler.strip_owned_headers(headers)
    for name in headers:
        canonical = name.replace("_", "-")
        # Only the exact region pin stays, for the gate to set aside (it returns only for the probes).
        assert name == handler.PIN_HEADER or not canonical.startswith(("x-mcp-edge-", "x-amz-")), name
    assert {n for n in names if not n.lower().replace("_", "-").startswith(("x-mcp-edge-", "x-amz-"))} <= {
        n for n in names if n.lower() in headers}
