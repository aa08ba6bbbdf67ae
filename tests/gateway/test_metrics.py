"""The gateway's `/metrics` registry, read with prometheus_client's own parser; and a real
gateway's suggestion figures."""

from __future__ import annotations

from pathlib import Path

import httpx
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.gateway.metrics import GatewayMetrics
from tests.support.config_text import LOCAL_OFF
from tests.support.gateway_process import running_gateway
from tests.support.lsp_session import endpoint_toml
from tests.support.metrics_scrape import scrape

SUGGESTION_METRICS = (
    "gateway_ls_suggestions_shown_total",
    "gateway_ls_suggestions_accepted_total",
    "gateway_ls_suggestion_kept_chars_total",
    "gateway_ls_suggestion_inserted_chars_total",
)


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


def test_suggestions_shown_accepted_and_kept_are_counters_per_endpoint_and_kind() -> None:
    counts = [("fast", "inline", 8, 2, 30, 40), ("mercury", "next_edit", 5, 1, 0, 12)]
    metrics = GatewayMetrics(list, lambda: counts)
    samples = {
        (sample.name, sample.labels["endpoint"], sample.labels["kind"]): sample.value
        for family in text_string_to_metric_families(generate_latest(metrics.registry).decode())
        for sample in family.samples
        if family.type == "counter" and "kind" in sample.labels
    }
    figures = dict(zip(SUGGESTION_METRICS, (8, 2, 30, 40), strict=True))
    for name, figure in figures.items():
        assert samples[(name, "fast", "inline")] == figure
    assert samples[("gateway_ls_suggestions_accepted_total", "mercury", "next_edit")] == 1
    counts[0] = ("fast", "inline", 9, 3, 42, 52)  # read again at the next scrape
    scraped = generate_latest(metrics.registry).decode()
    assert 'gateway_ls_suggestions_accepted_total{endpoint="fast",kind="inline"} 3.0' in scraped


def test_a_real_gateway_shows_zero_acceptance_for_clients_that_report_none(
    tmp_path: Path,
) -> None:
    """The gateway's routes have no word for acceptance: after a completion its endpoints'
    suggestion counters are there, per kind of suggestion they serve, at zero."""
    with FakeLLMServer(Behaviour(text="return a + b\n")) as upstream:
        config = LOCAL_OFF + endpoint_toml("up", upstream.base_url, roles='["inline", "edit"]')
        with running_gateway(tmp_path, config) as gateway:
            answer = httpx.post(
                f"{gateway.base_url}/completions",
                json={"model": "up", "prompt": "def add(a, b):\n    ", "suffix": "\n"},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            samples = scrape(gateway)
    for name in SUGGESTION_METRICS:
        for kind in ("inline", "next_edit"):
            assert samples[(name, (("endpoint", "up"), ("kind", kind)))] == 0.0
