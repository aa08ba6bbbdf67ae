"""The circuit breaker, driven by an injected clock."""

from __future__ import annotations

from typing import Any

import pytest

from lsp_server.routing.circuit_breaker import MAX_RETRY_AFTER_S, BreakerState, CircuitBreaker

pytestmark = pytest.mark.unit


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def breaker(clock: FakeClock, **overrides: Any) -> CircuitBreaker:
    options: dict[str, Any] = {"base_backoff_s": 2.0, "max_backoff_s": 60.0, **overrides}
    return CircuitBreaker(clock=clock, **options)


def test_closed_breaker_lets_everything_through(clock: FakeClock) -> None:
    subject = breaker(clock)
    assert subject.state is BreakerState.CLOSED
    assert all(subject.allow() for _ in range(10))
    assert subject.retry_in_s == 0.0


def test_opens_after_consecutive_failures(clock: FakeClock) -> None:
    subject = breaker(clock)
    subject.record_failure()
    subject.record_failure()
    assert subject.state is BreakerState.CLOSED
    subject.record_failure()
    # mypy keeps `state` narrowed by the assert before the call that changed it.
    assert subject.state is BreakerState.OPEN  # type: ignore[comparison-overlap]
    assert not subject.allow()
    assert subject.retry_in_s == pytest.approx(2.0)


def test_a_success_resets_the_consecutive_count(clock: FakeClock) -> None:
    subject = breaker(clock, error_rate_to_open=0.9)
    for _ in range(5):
        subject.record_failure()
        subject.record_failure()
        subject.record_success()
    assert subject.state is BreakerState.CLOSED  # two in a row never reach three


def test_opens_on_error_rate_without_consecutive_failures(clock: FakeClock) -> None:
    subject = breaker(clock, consecutive_failures_to_open=100)
    for _ in range(4):
        subject.record_failure()
        subject.record_success()
    assert subject.state is BreakerState.CLOSED  # 8 samples: below min_samples
    subject.record_failure()
    subject.record_success()
    assert subject.state is BreakerState.CLOSED  # 10 samples, but a success cannot open it
    subject.record_failure()
    # mypy keeps `state` narrowed by the assert before the call that changed it.
    # 6 failures of the last 11
    assert subject.state is BreakerState.OPEN  # type: ignore[comparison-overlap]


def test_a_low_error_rate_keeps_it_closed(clock: FakeClock) -> None:
    subject = breaker(clock)
    for index in range(100):
        if index % 5 == 0:
            subject.record_failure()
        else:
            subject.record_success()
    assert subject.state is BreakerState.CLOSED


def test_half_open_allows_exactly_one_probe(clock: FakeClock) -> None:
    subject = breaker(clock)
    for _ in range(3):
        subject.record_failure()
    clock.advance(1.9)
    assert not subject.allow()
    clock.advance(0.2)
    assert subject.state is BreakerState.HALF_OPEN
    assert subject.allow()
    assert not subject.allow()
    assert not subject.allow()


def test_a_successful_probe_closes_the_circuit(clock: FakeClock) -> None:
    subject = breaker(clock)
    for _ in range(3):
        subject.record_failure()
    clock.advance(2.0)
    assert subject.allow()
    subject.record_success()
    assert subject.state is BreakerState.CLOSED
    assert all(subject.allow() for _ in range(5))
    for _ in range(2):
        subject.record_failure()
    assert subject.state is BreakerState.CLOSED  # the history was cleared on closing


def test_a_failed_probe_doubles_the_back_off_up_to_the_maximum(clock: FakeClock) -> None:
    subject = breaker(clock, max_backoff_s=10.0)
    for _ in range(3):
        subject.record_failure()
    expected_backoffs = [4.0, 8.0, 10.0, 10.0]
    clock.advance(2.0)
    for backoff in expected_backoffs:
        assert subject.allow()
        subject.record_failure()
        assert subject.state is BreakerState.OPEN
        assert subject.retry_in_s == pytest.approx(backoff)
        clock.advance(backoff - 0.01)
        assert not subject.allow()
        clock.advance(0.01)


def test_closing_resets_the_back_off(clock: FakeClock) -> None:
    subject = breaker(clock)
    for _ in range(3):
        subject.record_failure()
    clock.advance(2.0)
    subject.allow()
    subject.record_failure()  # back-off now 4 s
    clock.advance(4.0)
    subject.allow()
    subject.record_success()
    for _ in range(3):
        subject.record_failure()
    assert subject.retry_in_s == pytest.approx(2.0)


def test_a_released_probe_lets_the_next_request_probe(clock: FakeClock) -> None:
    subject = breaker(clock)
    for _ in range(3):
        subject.record_failure()
    clock.advance(2.0)
    assert subject.allow()
    subject.release()  # the probe lost a race: no verdict
    assert subject.state is BreakerState.HALF_OPEN
    assert subject.allow()


def test_retry_after_opens_for_exactly_that_long(clock: FakeClock) -> None:
    subject = breaker(clock)
    subject.record_failure(retry_after_s=30.0)  # one 429 is enough
    assert subject.state is BreakerState.OPEN
    assert subject.retry_in_s == pytest.approx(30.0)
    clock.advance(29.5)
    assert not subject.allow()
    clock.advance(0.5)
    assert subject.allow()  # the probe
    subject.record_success()
    # mypy keeps `state` narrowed by the assert before the call that changed it.
    assert subject.state is BreakerState.CLOSED  # type: ignore[comparison-overlap]


def test_a_shorter_retry_after_does_not_shorten_an_open_circuit(clock: FakeClock) -> None:
    subject = breaker(clock)
    subject.record_failure(retry_after_s=30.0)
    subject.record_failure(retry_after_s=1.0)
    assert subject.retry_in_s == pytest.approx(30.0)


@pytest.mark.parametrize("retry_after_s", [100_000.0, float("inf")])
def test_a_retry_after_of_a_day_is_capped_and_then_probed(
    clock: FakeClock, retry_after_s: float
) -> None:
    subject = breaker(clock)
    subject.record_failure(retry_after_s=retry_after_s)
    assert subject.retry_in_s == pytest.approx(MAX_RETRY_AFTER_S)
    clock.advance(MAX_RETRY_AFTER_S)
    assert subject.allow()  # the probe, minutes later rather than a day
    assert not subject.allow()
