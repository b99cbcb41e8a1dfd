"""The stand-ins ``local/cloudfront_runtime.js`` gives V8 for what cloudfront-js-2.0
has: Buffer's codecs agree with Python's (and so with Node's and njs's, which the
edge tests compare the whole function against), and the KeyValueStore handle behaves
as CloudFront documents it (get rejects for a missing key, formats, exists)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from py_mini_racer import MiniRacer

from local.cloudfront import engine_thread, runtime_js


@pytest.fixture(scope="module")
def js() -> Iterator[Any]:
    engine = engine_thread()
    ctx = engine.submit(lambda: MiniRacer()).result()
    engine.submit(ctx.eval, runtime_js()).result()

    def run(source: str) -> Any:
        value = engine.submit(ctx.eval, source).result()
        if hasattr(value, "get"):  # a promise
            value = engine.submit(lambda: value.get(timeout=5)).result()
        return json.loads(str(value))

    yield run
    engine.submit(ctx.close).result()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def js_bytes(data: bytes) -> str:
    return json.dumps(list(data))


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
