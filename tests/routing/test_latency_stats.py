"""Latency statistics on synthetic traces: EWMA, percentiles, censoring, expected latency."""

from __future__ import annotations

import math
import random

import pytest

from lsp_server.routing.latency_stats import WINDOW, EndpointStats, Ewma

pytestmark = pytest.mark.unit


def test_ewma_starts_at_the_first_sample_and_follows_recent_ones() -> None:
    ewma = Ewma(alpha=0.2)
    ewma.add(100.0)
    assert ewma.value == 100.0
    ewma.add(200.0)
    assert ewma.value == pytest.approx(120.0)
    for _ in range(40):
        ewma.add(50.0)
    assert ewma.value == pytest.approx(50.0, abs=0.1)


def test_ewma_of_a_step_change_forgets_the_old_level_within_about_twenty_samples() -> None:
    ewma = Ewma()
    for _ in range(100):
        ewma.add(300.0)
    for _ in range(20):
        ewma.add(30.0)
    assert ewma.value is not None and ewma.value < 35.0


def test_percentiles_are_nearest_rank_over_the_window() -> None:
    stats = EndpointStats()
    samples = list(range(1, 101))
    random.Random(7).shuffle(samples)
    for sample in samples:
        stats.record_success(first_token_ms=None, total_ms=float(sample), tokens=1, won=True)
    assert stats.percentile(0.5) == 50.0
    assert stats.percentile(0.95) == 95.0
    assert stats.percentile(0.99) == 99.0
    assert stats.percentile(1.0) == 100.0
    assert stats.percentile(0.0) == 1.0


def test_first_token_percentiles_follow_each_new_sample() -> None:
    stats = EndpointStats()
    for sample in (10.0, 20.0, 30.0):
        stats.record_success(first_token_ms=sample, total_ms=sample + 5, tokens=2, won=True)
    assert stats.first_token_percentile(1.0) == 30.0
    stats.record_censored(500.0, first_token_ms=90.0)  # a lost race whose first token came
    assert stats.first_token_percentile(1.0) == 90.0
    stats.record_success(first_token_ms=5.0, total_ms=9.0, tokens=2, won=True)
    assert stats.first_token_percentile(0.0) == 5.0
    assert stats.first_token_percentile(0.5) == 20.0


def test_first_token_percentiles_asked_every_sample_match_a_sort_of_the_window() -> None:
    stats = EndpointStats()
    rng = random.Random(11)
    for _ in range(WINDOW * 3):
        sample = float(rng.randrange(1, 60))  # repeated values: the one that left goes
        stats.record_success(first_token_ms=sample, total_ms=sample + 5, tokens=2, won=True)
        ordered = sorted(stats.recent_first_token_ms)
        for q in (0.0, 0.5, 0.95, 1.0):
            nearest_rank = max(1, math.ceil(q * len(ordered)))
            assert stats.first_token_percentile(q) == ordered[nearest_rank - 1]


def test_percentiles_cover_only_the_recent_window() -> None:
    stats = EndpointStats()
    for _ in range(WINDOW):
        stats.record_success(first_token_ms=None, total_ms=1000.0, tokens=1, won=True)
    for _ in range(WINDOW):
        stats.record_success(first_token_ms=None, total_ms=10.0, tokens=1, won=True)
    assert stats.percentile(0.99) == 10.0


def test_no_samples_no_percentile() -> None:
    assert EndpointStats().percentile(0.5) is None


def test_lognormal_trace_with_stragglers_moves_p95_not_p50() -> None:
    rng = random.Random(1)
    stats = EndpointStats()
    for _ in range(WINDOW):
        latency = rng.lognormvariate(4.0, 0.2)  # median about 55 ms
        if rng.random() < 0.1:
            latency *= 10
        stats.record_success(first_token_ms=None, total_ms=latency, tokens=4, won=True)
    p50, p95 = stats.percentile(0.5), stats.percentile(0.95)
    assert p50 is not None and p95 is not None
    assert 40 < p50 < 75
    assert p95 > 5 * p50


def test_success_counts_requests_wins_tokens_and_first_token() -> None:
    stats = EndpointStats()
    stats.record_success(first_token_ms=20.0, total_ms=80.0, tokens=8, won=True)
    assert stats.tokens_per_s.value == pytest.approx(100.0)
    stats.record_success(first_token_ms=None, total_ms=90.0, tokens=2, won=False)
    assert (stats.requests, stats.wins, stats.tokens) == (2, 1, 10)
    assert stats.first_token_ms.value == 20.0
    assert stats.last_sample_at is not None


def test_failures_count_as_errors_and_raise_the_error_rate_only() -> None:
    stats = EndpointStats()
    stats.record_success(first_token_ms=None, total_ms=50.0, tokens=1, won=True)
    for _ in range(5):
        stats.record_failure()
    assert stats.errors == 5 and stats.requests == 6
    assert stats.total_ms.value == 50.0
    assert stats.error_rate.value is not None and 0.3 < stats.error_rate.value < 0.5


def test_a_censored_sample_only_ever_pushes_latency_up() -> None:
    stats = EndpointStats()
    stats.record_censored(120.0)
    assert stats.total_ms.value == 120.0  # no data yet: the lower bound is the best guess
    stats.record_censored(60.0)
    assert stats.total_ms.value == 120.0  # shorter than what we know: tells nothing
    stats.record_censored(400.0)
    assert stats.total_ms.value is not None and stats.total_ms.value > 120.0
    assert stats.recent_total_ms == type(stats.recent_total_ms)()  # not a real sample
    assert stats.requests == 3 and stats.errors == 0


def test_expected_latency_is_inflated_by_the_error_rate() -> None:
    reliable, flaky = EndpointStats(), EndpointStats()
    for _ in range(20):
        reliable.record_success(first_token_ms=None, total_ms=200.0, tokens=1, won=True)
    for index in range(20):
        if index % 4:
            flaky.record_failure()  # three of every four fail
        else:
            flaky.record_success(first_token_ms=None, total_ms=100.0, tokens=1, won=True)
    assert flaky.total_ms.value == 100.0
    error_rate = flaky.error_rate.value
    assert error_rate is not None and 0.5 < error_rate < 0.8
    assert flaky.expected_ms(prior_ms=350.0) == pytest.approx(100.0 / (1 - error_rate))
    assert flaky.expected_ms(prior_ms=350.0) > reliable.expected_ms(prior_ms=350.0)


def test_expected_latency_without_data_is_the_prior_and_stays_finite() -> None:
    stats = EndpointStats()
    assert stats.expected_ms(prior_ms=350.0) == 350.0
    for _ in range(200):
        stats.record_failure()
    assert stats.expected_ms(prior_ms=350.0) == pytest.approx(350.0 / 0.05)
