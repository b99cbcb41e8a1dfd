"""The shipped CloudFront Function with a KeyValueStore, in QuickJS (the local edge's
engine, quickjs-ng) and in njs and ``node --jitless`` (interpreters, separate
processes): the same events under every store state give the contract's verdict,
the same in every engine, and never a throw."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devkit.edge_cases import AT, Store, events, expected_avoid, expected_result, health, stores
from devkit.edge_runtimes.in_process import CLOUDFRONT_STAND_IN, kvs_snapshot, runnable_code
from devkit.edge_runtimes.in_process import ViewerFunction as LocalViewerFunction
from devkit.edge_runtimes.njs_node import NJS, NODE_JITLESS, Engine, run_events
from devkit.mock_program import run_program
from devkit.shipped import ViewerFunction, viewer_event, viewer_function_resource
from edge.protocol import AVOID_REGIONS_HEADER
from edge.viewer_function import CLOUDFRONT_IMPORT, CONFIG_PLACEHOLDER, VIEWER_FUNCTION_TEMPLATE
from functions.contract import REGION_HEALTH_VERSION
from stack_config.loading import load_from_stack_file

CONFIG = load_from_stack_file("prod")
REGIONS = tuple(CONFIG.regions)
STORES = stores(REGIONS)


def _engine_param(engine: Engine) -> Any:
    reason = engine.missing()
    return pytest.param(engine, id=engine.name, marks=pytest.mark.skipif(reason is not None, reason=reason or ""))


ENGINES = [_engine_param(NJS), _engine_param(NODE_JITLESS)]


@pytest.fixture(scope="module")
def corpus() -> list[tuple[str, str, dict[str, Any], Store]]:
    """Every named event under every named store state."""
    return [(e, s, event, store) for e, event in events(CONFIG).items() for s, store in STORES.items()]


@pytest.fixture(scope="module")
def local_results(viewer: ViewerFunction, corpus) -> list[dict[str, Any]]:
    return [viewer.handler(event, kvs=store.reader()) for _, _, event, store in corpus]


def assert_verdict(name: str, state: str, event: dict[str, Any], store: Store, result: dict[str, Any]) -> None:
    passes = not name.endswith("(401)")
    expected = expected_result(event, store, REGIONS, passes)
    if passes:
        assert result == expected, (name, state)
    else:
        assert result["statusCode"] == 401, (name, state)
        assert AVOID_REGIONS_HEADER not in result["headers"], (name, state)


def test_the_runner_replaces_the_import_line_and_nothing_else(viewer):
    first, _, rest = viewer.code.partition("\n")
    assert first == CLOUDFRONT_IMPORT
    assert runnable_code(viewer.code) == CLOUDFRONT_STAND_IN + "\n" + rest


def test_every_event_under_every_store_state_gets_the_contracts_verdict_on_the_local_edge(corpus, local_results):
    for (name, state, event, store), result in zip(corpus, local_results, strict=True):
        assert_verdict(name, state, event, store, result)


def test_a_down_region_is_named_to_the_router_and_a_viewers_copy_never_is(viewer):
    one = sorted(REGIONS)[0]
    event = viewer_event(uri="/.well-known/oauth-protected-resource/mcp", method="GET",
                         headers={AVOID_REGIONS_HEADER: "us-west-2"})
    assert viewer.handler(event, kvs=Store(value=health(one)).reader())["headers"][AVOID_REGIONS_HEADER] == {"value": one}
    assert AVOID_REGIONS_HEADER not in viewer.handler(event, kvs=Store(value=health()).reader())["headers"]


def test_fail_static_every_region_down_or_no_document_sends_no_avoid_header(viewer):
    event = viewer_event(uri="/healthz", method="GET")
    for state in ("every region down", "no store associated", "key missing", "store failing", "not JSON"):
        assert AVOID_REGIONS_HEADER not in viewer.handler(event, kvs=STORES[state].reader())["headers"], state


def test_without_a_store_associated_the_function_loads_and_fails_static(viewer):
    # cf.kvs() throws when the function loads; every request still gets its verdict.
    function = LocalViewerFunction(viewer.code)
    try:
        assert function(viewer_event(uri="/healthz", method="GET", headers={AVOID_REGIONS_HEADER: "x"}))["headers"] == {
            "host": {"value": "d111111abcdef8.cloudfront.net"},
        }
        assert function(viewer_event())["statusCode"] == 401
    finally:
        function.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_an_interpreter_gives_the_same_results_as_the_local_edge(viewer, engine: Engine, corpus, local_results):
    cases = [(event, kvs_snapshot(store.reader())) for _, _, event, store in corpus]
    results = run_events(engine, viewer.code, cases)
    threw = [(c[0], c[1], r["threw"]) for c, r in zip(corpus, results, strict=True) if "threw" in r]
    assert not threw, threw
    for (name, state, event, store), result, local in zip(corpus, results, local_results, strict=True):
        assert result["result"] == local, (engine.name, name, state)
        assert_verdict(name, state, event, store, result["result"])


@pytest.mark.parametrize("engine", ENGINES)
def test_an_interpreter_refuses_browser_origins_the_stack_does_not_allow_as_the_local_edge_does(engine: Engine):
    run = run_program("prod", config_overrides={"allowedOrigins": ["https://app.example", "null"]})
    function = ViewerFunction(viewer_function_resource(run).inputs["code"])
    try:
        origins = ["https://app.example", " https://app.example\t", "null", "https://d111111abcdef8.cloudfront.net",
                   "https://evil.example", "Null", "", "https://app.example:443"]
        events_ = [viewer_event(method=method, headers={"origin": origin})
                   for origin in origins for method in ("POST", "OPTIONS")]
        results = run_events(engine, function.code, [(event, None) for event in events_])
        statuses = [r["result"].get("statusCode") for r in results]
        assert statuses == [401, None, 401, None, 401, None, 401, None, *[403] * 8], statuses
        assert [r["result"] for r in results] == [function.handler(event) for event in events_]
    finally:
        function.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_region_code_with_a_final_newline_makes_the_document_malformed_in_every_engine(viewer, engine: Engine):
    # njs's $ also matches before a final newline; the document must fail static there too.
    one, other = sorted(REGIONS)[:2]
    event = viewer_event(uri="/healthz", method="GET")
    for entry in (other + "\n", "\n" + other, other + "\n\n"):
        store = Store(value=health(one, entry))
        [result] = run_events(engine, viewer.code, [(event, kvs_snapshot(store.reader()))])
        assert AVOID_REGIONS_HEADER not in result["result"]["headers"], (engine.name, entry)
        assert AVOID_REGIONS_HEADER not in viewer.handler(event, kvs=store.reader())["headers"], entry
    control = Store(value=health(one))
    [result] = run_events(engine, viewer.code, [(event, kvs_snapshot(control.reader()))])
    assert result["result"]["headers"][AVOID_REGIONS_HEADER] == {"value": one}


@pytest.mark.parametrize("engine", ENGINES)
def test_an_interpreter_names_the_stacks_scopes_in_the_challenge_as_the_local_edge_does(engine: Engine):
    code = viewer_function_resource(run_program("prod", config_overrides={"authScopes": ["mcp:tools"]})).inputs["code"]
    function = ViewerFunction(code)
    cases = [(viewer_event(), None), (viewer_event(headers={"authorization": "Bearer x.y.z"}), None)]
    results = run_events(engine, code, cases)
    assert [r["result"] for r in results] == [function.handler(event) for event, _ in cases]
    assert all('scope="mcp:tools"' in r["result"]["headers"]["www-authenticate"]["value"] for r in results)


# --- property-based: whatever the store holds, the header is the contract's -------------------

regions = st.sampled_from([*REGIONS, "eu-north-1", "sa-east-1", "EU-WEST-1", "eu_west_1", "", "us-east-1 ", "us-east-1\n"])
entries = st.one_of(regions, st.integers(), st.none(), st.lists(regions, max_size=1))
documents = st.one_of(
    st.builds(lambda avoid: health(*avoid), st.lists(regions, max_size=6)),
    st.fixed_dictionaries({
        "v": st.sampled_from([REGION_HEALTH_VERSION, 1.0, 2, 0, "1", True, None]),
        "avoid": st.one_of(st.lists(entries, max_size=6), regions, st.none()),
        "at": st.sampled_from([AT, None, 0, ""]),
    }).map(json.dumps),
    st.text(max_size=40),
    st.sampled_from(["null", "[]", "{}", "1", '"x"', "{", "NaN"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=documents, forged=st.one_of(st.none(), st.text(max_size=30)))
def test_any_stored_document_gives_the_contracts_header_and_never_a_throw(viewer, document, forged):
    headers = {} if forged is None else {AVOID_REGIONS_HEADER: forged}
    event = viewer_event(uri="/.well-known/oauth-protected-resource", method="GET", headers=headers)
    result = viewer.handler(event, kvs=Store(value=document).reader())
    expected = expected_avoid(document, REGIONS)
    assert result["headers"].get(AVOID_REGIONS_HEADER) == (None if expected is None else {"value": expected})


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(st.tuples(documents, st.sampled_from(sorted(events(CONFIG)))), min_size=20, max_size=40))
def test_an_interpreter_agrees_with_the_local_edge_on_arbitrary_documents(viewer, engine: Engine, batch):
    named = events(CONFIG)
    cases = [(named[name], kvs_snapshot(Store(value=doc).reader())) for doc, name in batch]
    results = run_events(engine, viewer.code, cases)
    for (doc, name), result in zip(batch, results, strict=True):
        assert result == {"result": viewer.handler(named[name], kvs=Store(value=doc).reader())}, (name, doc)


def test_minifying_the_template_changes_no_result(viewer, corpus, local_results):
    # The shipped code is the template without comments, indentation and line breaks;
    # the template itself, with the same constants, must decide every case alike.
    constants = re.match(r"var C = (\{.*?\});", viewer.code.splitlines()[1])
    assert constants is not None
    unminified = ViewerFunction(VIEWER_FUNCTION_TEMPLATE.read_text().replace(CONFIG_PLACEHOLDER, constants.group(1)))
    assert len(unminified.code) > len(viewer.code)
    assert [unminified.handler(event, kvs=store.reader()) for _, _, event, store in corpus] == local_results
