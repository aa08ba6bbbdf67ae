"""The gateway's `/metrics` registry, read with prometheus_client's own parser."""

from __future__ import annotations

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from lsp_server.gateway.metrics import GatewayMetrics


def test_each_endpoints_breaker_is_read_from_its_health_when_scraped() -> None:
    health = [("a", "healthy"), ("b", "degraded"), ("c", "half_open"), ("d", "open")]
    metrics = GatewayMetrics(lambda: health, list)
    text = generate_latest(metrics.registry).decode()
    states = {
        sample.labels["endpoint"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "gateway_ls_breaker_state"
        for sample in family.samples
    }
    assert states == {"a": 0.0, "b": 0.0, "c": 0.5, "d": 1.0}
    health[3] = ("d", "healthy")  # read again at the next scrape
    scraped = generate_latest(metrics.registry).decode()
    assert 'gateway_ls_breaker_state{endpoint="d"} 0.0' in scraped
