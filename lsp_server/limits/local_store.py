"""Admission inside one process: the gateway's own state when no Redis is configured, and each
gateway's share of the limits while Redis is unreachable.

The same rules as the shared script (`shared_store`): the request and token rates as GCRA
(a theoretical arrival time per client that each admission pushes forward by its cost), a count
of requests in flight, and the spend of the current budget period. `share` divides the rates and
the concurrency by the number of gateways alive, so a team's gateways together stay within a
limit while each counts alone.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

from lsp_server.limits.quota import WINDOW_S, Ask, LimitKind, Verdict, Window

CONCURRENCY_RETRY_S = 1.0  # when a request in flight ends is unknown; try again in a second


@dataclass(slots=True)
class _Client:
    requests_at: float = 0.0  # theoretical arrival times, time.monotonic()
    tokens_at: float = 0.0
    in_flight: int = 0


class LocalStore:
    def __init__(self) -> None:
        self._clients: defaultdict[str, _Client] = defaultdict(_Client)
        self._spent: dict[tuple[str, str], int] = {}  # (client, period) -> micro-dollars
        self._reserved: defaultdict[tuple[str, str], int] = defaultdict(int)  # held, not settled

    def admit(self, ask: Ask, *, share: int = 1) -> Verdict:
        """`share`: the gateways alive, each enforcing its part of the rates and concurrency."""
        now = time.monotonic()
        state = self._clients[ask.client]
        limits = ask.limits
        refused: LimitKind | None = None
        wait = 0.0
        requests = tokens = None
        new_requests_at = new_tokens_at = 0.0
        if limits.rpm:
            rate = limits.rpm / share
            new_requests_at, wait_r, requests = _gcra(state.requests_at, now, rate, 1, limits.rpm)
            if wait_r > 0:
                refused, wait = LimitKind.REQUESTS, wait_r
        if limits.tpm:
            rate = limits.tpm / share
            cost = min(ask.tokens, int(rate))
            new_tokens_at, wait_t, tokens = _gcra(state.tokens_at, now, rate, cost, limits.tpm)
            if wait_t > 0 and refused is None:
                refused, wait = LimitKind.TOKENS, wait_t
        slots = max(1, (limits.max_concurrent or 0) // share)
        if refused is None and limits.max_concurrent and state.in_flight >= slots:
            refused, wait = LimitKind.CONCURRENCY, CONCURRENCY_RETRY_S
        key = (ask.client, ask.period)
        budget = ask.budget_micros
        over = budget is not None and self._spent.get(key, 0) + ask.reserve_micros > budget
        if refused is None and over:
            refused = LimitKind.BUDGET
        if refused is not None:
            return Verdict(refused, wait, requests, tokens)
        if limits.rpm:
            state.requests_at = new_requests_at
            requests = _after(requests, 1)
        if limits.tpm:
            state.tokens_at = new_tokens_at
            tokens = _after(tokens, min(ask.tokens, limits.tpm))
        if limits.max_concurrent:
            state.in_flight += 1
        if budget is not None:
            self._spent[key] = self._spent.get(key, 0) + ask.reserve_micros
            self._reserved[key] += 1
        return Verdict(None, 0.0, requests, tokens)

    def settle(self, ask: Ask, *, token_delta: int, micros_delta: int) -> None:
        """The request ended: its slot freed, its tokens and spend set to what it used."""
        state = self._clients[ask.client]
        limits = ask.limits
        if limits.max_concurrent:
            state.in_flight = max(0, state.in_flight - 1)
        if limits.tpm and token_delta:
            now = time.monotonic()
            start = max(state.tokens_at, now) if token_delta > 0 else state.tokens_at
            state.tokens_at = max(now, start + token_delta * WINDOW_S / limits.tpm)
        key = (ask.client, ask.period)
        if ask.budget_micros is not None and key in self._spent:
            self._spent[key] = max(0, self._spent[key] + micros_delta)
            held = self._reserved.pop(key, 0) - 1
            if held > 0:
                self._reserved[key] = held

    def settling(self, ask: Ask) -> bool:
        """Whether reservations on `ask`'s budget are held here, not yet settled."""
        return self._reserved.get((ask.client, ask.period), 0) > 0

    def spent(self, client: str, period: str) -> int:
        return self._spent.get((client, period), 0)


def _gcra(at: float, now: float, rate: float, cost: int, limit: int) -> tuple[float, float, Window]:
    """(the new arrival time, seconds to wait (0: admitted), the window before admission)."""
    interval = WINDOW_S / rate
    start = max(at, now)
    new_at = start + cost * interval
    wait = max(0.0, new_at - WINDOW_S - now)
    remaining = max(0, int((WINDOW_S - (start - now)) / interval))
    return new_at, wait, Window(limit, min(limit, remaining), start - now)


def _after(window: Window | None, cost: int) -> Window | None:
    if window is None:
        return None
    interval = WINDOW_S / window.limit
    return Window(window.limit, max(0, window.remaining - cost), window.reset_s + cost * interval)
