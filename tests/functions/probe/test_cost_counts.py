"""review.cost prices every probe as PROBE_REQUESTS_PER_EXCHANGE origin requests (the
number of POSTs a 2026-07-28 exchange makes) and an edge probe's promise check as
PROMISE_REQUESTS_PER_EDGE_PROBE more at the edge, held here to the probe itself."""

from __future__ import annotations

from review import cost
from tests.functions.probe.conftest import Edge, Loopback, OAuthServer, modern, probe, sdk_server, token_source


def test_a_modern_exchange_makes_the_requests_review_cost_prices(scripted):
    server = scripted(modern)
    result = probe(server.url(), forged_token=None)  # the exchange alone
    assert result["era"] == "modern"
    assert server.script.methods() == ["server/discover", "tools/list"]
    assert len(server.script.requests) == cost.PROBE_REQUESTS_PER_EXCHANGE


def test_an_edge_probe_sends_the_edge_the_one_more_request_review_cost_prices(oauth: OAuthServer):
    edge = Edge(sdk_server().streamable_http_app(stateless_http=True, json_response=True), oauth)
    with Loopback(edge) as running:
        probe(running.url(), tokens=token_source(oauth), target="edge", pin="eu-west-1")
    refused = [authorization for authorization, was_refused in edge.seen if was_refused]
    assert len(edge.seen) == cost.PROBE_REQUESTS_PER_EXCHANGE + cost.PROMISE_REQUESTS_PER_EDGE_PROBE
    assert len(refused) == cost.PROMISE_REQUESTS_PER_EDGE_PROBE


def test_review_cost_prices_the_handshake_check_at_the_probes_own_interval():
    from functions.probe.probe import HANDSHAKE_CHECK_INTERVAL_S

    assert cost.HANDSHAKE_CHECK_INTERVAL_S == HANDSHAKE_CHECK_INTERVAL_S
    # The requests it makes are counted against the probe in test_server_settings.py.
