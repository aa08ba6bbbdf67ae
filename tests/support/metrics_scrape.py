"""A gateway's `/metrics`, read with prometheus_client's own parser."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.gateway_process import Gateway

# A metric sample's name and its labels, sorted.
SampleKey = tuple[str, tuple[tuple[str, str], ...]]


def scrape(gateway: Gateway, headers: dict[str, str] | None = None) -> dict[SampleKey, float]:
    """Every sample of `/metrics`, read with prometheus_client's own parser."""
    response = httpx.get(f"{gateway.root_url}/metrics", headers=headers or {}, timeout=5)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: dict[SampleKey, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
