"""review.cost prices every probe as PROBE_REQUESTS_PER_EXCHANGE origin requests: the
number of POSTs a 2026-07-28 exchange makes, held here to the probe itself."""

from __future__ import annotations

from review import cost
from tests.functions.probe.conftest import modern, probe


def test_a_modern_exchange_makes_the_requests_review_cost_prices(scripted):
    server = scripted(modern)
    result = probe(server.url())
    assert result["era"] == "modern"
    assert server.script.methods() == ["server/discover", "tools/list"]
    assert len(server.script.requests) == cost.PROBE_REQUESTS_PER_EXCHANGE
