"""The stand-ins ``devkit/edge_runtimes/cloudfront_runtime.js`` gives QuickJS for what cloudfront-js-2.0
has: Buffer's codecs agree with Python's (and so with Node's and njs's, which the
edge tests compare the whole function against), on QuickJS's native base64 path and
on the stand-in's own loops alike, and the KeyValueStore handle behaves as CloudFront
documents it (get rejects for a missing key, formats, exists)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import quickjs
from hypothesis import example, given, settings
from hypothesis import strategies as st

from devkit.edge_runtimes.in_process import js_context, runtime_js

# The engine's own base64 codecs and btoa hidden before the stand-ins load: they then
# take their own loops everywhere, as in an engine without them.
WITHOUT_NATIVE_BASE64 = ("delete Uint8Array.fromBase64; delete Uint8Array.prototype.toBase64; delete globalThis.btoa;"
                         " delete globalThis.atob;")
# Node's decoding (and the stand-in's loop): characters of neither alphabet skipped, the
# end at the first '=', a last partial byte dropped.
BASE64_VALUES = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
BASE64_VALUES.update({"-": 62, "_": 63})


def lenient_base64(text: str) -> bytes:
    out, acc, bits = bytearray(), 0, 0
    for ch in text:
        if ch == "=":
            break
        if ch not in BASE64_VALUES:
            continue
        acc, bits = ((acc << 6) | BASE64_VALUES[ch]) & 0xFFFFFF, bits + 6
        if bits >= 8:
            bits -= 8
            out.append((acc >> bits) & 255)
    return bytes(out)


@pytest.fixture(scope="module", params=["native", "loops"])
def js(request: pytest.FixtureRequest) -> Any:
    """Evaluates a script in a context holding the stand-ins (as the local edge loads them,
    or with the engine's base64 codecs hidden first); its value, awaited, as JSON."""
    if request.param == "native":
        ctx = js_context()
    else:
        ctx = quickjs.Context()
        ctx.eval(WITHOUT_NATIVE_BASE64)
        ctx.eval(runtime_js())

    def run(source: str) -> Any:
        ctx.eval("var __v; Promise.resolve(eval(" + json.dumps(source) + ")).then(function (v) { __v = v; });")
        while ctx.execute_pending_job():
            pass
        return json.loads(str(ctx.eval("__v")))

    return run


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def js_bytes(data: bytes) -> str:
    return json.dumps(list(data))


def test_quickjs_has_the_native_codecs_the_stand_in_takes():
    # Without them every token's base64url runs through the interpreted loops again.
    ctx = js_context()
    assert ctx.eval("typeof Uint8Array.fromBase64 + typeof Uint8Array.prototype.toBase64 + typeof btoa"
                    " + typeof atob") == "function" * 4


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_bytes_decode_as_utf8_with_replacement_as_python_does(js, data):
    assert js(f"JSON.stringify(Buffer.from({js_bytes(data)}).toString())") == data.decode("utf-8", "replace")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_base64url_round_trips_bytes_like_pythons_codec(js, data):
    text = b64url(data)
    assert js(f"JSON.stringify(Array.from(Buffer.from({json.dumps(text)}, 'base64url')))") == list(data)
    assert js(f"JSON.stringify(Buffer.from({js_bytes(data)}).toString('base64url'))") == text
    assert js(f"JSON.stringify(Buffer.from({js_bytes(data)}).toString('base64'))") == base64.b64encode(data).decode()
    assert js(f"JSON.stringify(Buffer.from({js_bytes(data)}).toString('hex'))") == data.hex()


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/=. ", max_size=40))
@example("YQ")  # a partial last chunk (native path)
@example("YR")  # ... with bits left over, dropped
@example("YQ=x")  # the end at the first '='
@example("Y")  # a lone trailing character
@example("a-b+")  # both alphabets at once
@example("YQ==YQ")  # data after the padding
@example("YQ=")  # incomplete padding
@example("YR==")  # padded, with bits left over
@example(" Y Q ")  # whitespace, which both skip
def test_any_base64_text_decodes_as_nodes_lenient_decoder_does(js, text):
    # Tokens are whatever a viewer sends: the native path and the loop must agree on all of it.
    for encoding in ("base64url", "base64"):
        decoded = js(f"JSON.stringify(Array.from(Buffer.from({json.dumps(text)}, '{encoding}')))")
        assert decoded == list(lenient_base64(text)), encoding


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=60))
def test_ascii_text_round_trips_through_utf8_bytes(js, text):
    assert js(f"JSON.stringify(Array.from(Buffer.from({json.dumps(text)})))") == list(text.encode("ascii"))
    assert js(f"JSON.stringify(Buffer.from({json.dumps(text)}).toString())") == text


def test_a_buffer_beyond_one_native_text_run_decodes_through_the_loop(js):
    data = "é".encode() + b"a" * 5000  # over ASCII_RUN_LIMIT, and not ASCII
    assert js(f"JSON.stringify(Buffer.from({js_bytes(data)}).toString())") == data.decode()
    assert js(f"JSON.stringify(Buffer.from({js_bytes(b'a' * 5000)}).toString())") == "a" * 5000


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=40))
def test_text_encodes_to_utf8_like_pythons_codec(js, text):
    assert js(f"JSON.stringify(Array.from(Buffer.from({json.dumps(text)})))") == list(text.encode("utf-8"))


def test_a_lone_surrogate_encodes_as_the_replacement_character_as_node_does(js):
    assert js("JSON.stringify(Buffer.from('\\ud800x').toString('hex'))") == "efbfbd78"


def test_the_keyvaluestore_handle_reads_as_cloudfront_documents(js):
    js("__cf.__store({values: {k: '{\"a\": 1}'}, errors: {bad: 'boom'}}); 1")
    assert js("__cf.kvs().get('k').then(function (v) { return JSON.stringify(v); })") == '{"a": 1}'
    assert js("__cf.kvs().get('k', {format: 'json'}).then(function (v) { return JSON.stringify(v.a); })") == 1
    rejected = "then(function () { return '\"resolved\"'; }, function (e) { return JSON.stringify(e.message); })"
    assert js(f"__cf.kvs().get('missing').{rejected}").startswith("Key not found")
    assert "boom" in js(f"__cf.kvs().get('bad').{rejected}")
    assert js("__cf.kvs().exists('missing').then(function (v) { return JSON.stringify(v); })") is False
    assert js("__cf.kvs().exists('k').then(function (v) { return JSON.stringify(v); })") is True
    js("__cf.__associate(false); 1")
    try:
        assert "no KeyValueStore" in js("(function () { try { __cf.kvs(); return '\"no throw\"'; }"
                                        " catch (e) { return JSON.stringify(e.message); } })()")
    finally:
        js("__cf.__associate(true); 1")
