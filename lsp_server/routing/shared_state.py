"""This process's side of the routing state several gateways share (`[gateway] state_url`).

The router tells it what it observed (latency samples, breaker openings and closings, inline and
hedged request counts) through plain method calls that only append to memory: nothing here waits
on the network, so a keystroke never pays for sharing. A transport (`redis_link`) takes the
pending observations as one `Update` in the background, sends them, and hands back the peers'
updates, which are merged into this process's endpoints: their samples into the latency
statistics, their breaker openings into the breakers, their request counts into the hedge budget.
Each process keeps its own view; the peers' observations only add to it. A process that starts
later begins from the others' latency snapshots (`stats_snapshot`, the format of the state file).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from lsp_server.routing.endpoint_pool import Endpoint, EndpointPool
from lsp_server.routing.shared_wire import Sample, SampleKind, Update
from lsp_server.routing.stats_snapshot import StatsSnapshot, merge

MAX_PENDING_SAMPLES = 2000  # kept while the store is unreachable; the oldest go first


class PeerVerdicts(Protocol):
    """Where a peer's breaker verdicts go: the outcome recorder, which alone changes a breaker
    for a verdict, whoever reached it."""

    def peer_opened(self, endpoint: Endpoint, open_for_s: float) -> None: ...

    def peer_closed(self, endpoint: Endpoint) -> None: ...


class SharedState:
    def __init__(self, pool: EndpointPool, verdicts: PeerVerdicts) -> None:
        self.process = secrets.randbits(62)
        self._pool = pool
        self._verdicts = verdicts
        self._samples: deque[Sample] = deque(maxlen=MAX_PENDING_SAMPLES)
        self._opened_until: dict[str, float] = {}  # endpoint -> monotonic time it reopens
        self._closed: set[str] = set()
        self._inline = 0
        self._hedged = 0
        self.peer_inline = 0
        self.peer_hedged = 0
        self.wake = asyncio.Event()  # set when there is something to send
        self.urgent = asyncio.Event()  # a breaker changed: send now, not with the next batch
        self.transport_status: Callable[[], dict[str, Any]] = lambda: {"connected": False}

    # -- what this process observed (called by the router; no I/O) -------------------------

    def observed_success(
        self, endpoint: str, *, first_token_ms: float | None, total_ms: float, tokens: int
    ) -> None:
        self._add(Sample(endpoint, SampleKind.SUCCESS, first_token_ms, total_ms, tokens))

    def observed_censored(
        self, endpoint: str, at_least_ms: float, *, first_token_ms: float | None
    ) -> None:
        self._add(Sample(endpoint, SampleKind.CENSORED, first_token_ms, at_least_ms))

    def observed_failure(self, endpoint: str) -> None:
        self._add(Sample(endpoint, SampleKind.FAILURE))

    def breaker_opened(self, endpoint: str, seconds: float) -> None:
        self._closed.discard(endpoint)
        self._opened_until[endpoint] = time.monotonic() + seconds
        self._signal(urgent=True)

    def breaker_closed(self, endpoint: str) -> None:
        self._opened_until.pop(endpoint, None)
        self._closed.add(endpoint)
        self._signal(urgent=True)

    def counted_inline(self, *, hedged: bool) -> None:
        self._inline += 1
        self._hedged += int(hedged)

    # -- the transport's side ----------------------------------------------------------------

    def take_update(self) -> Update:
        """Everything observed since the last call (possibly nothing: a heartbeat)."""
        now = time.monotonic()
        opened = {n: until - now for n, until in self._opened_until.items() if until > now}
        update = Update(
            self.process,
            list(self._samples),
            opened,
            set(self._closed),
            self._inline,
            self._hedged,
        )
        self._samples.clear()
        self._opened_until.clear()
        self._closed.clear()
        self._inline = self._hedged = 0
        self.urgent.clear()
        self.wake.clear()
        return update

    def knows(self, endpoint: str) -> bool:
        """A remote endpoint of this process's configuration (the local model is not shared)."""
        return endpoint in self._pool.remotes

    def merge(self, update: Update) -> None:
        """A peer's update; this process's own are skipped."""
        if update.sender == self.process:
            return
        self.merge_samples(update.samples)
        for name, seconds in update.opened.items():
            self.merge_breaker(name, seconds)
        for name in update.closed:
            if (endpoint := self._remote(name)) is not None:
                self._verdicts.peer_closed(endpoint)
        self.peer_inline += update.inline
        self.peer_hedged += update.hedged

    def merge_breaker(self, name: str, open_for_s: float) -> None:
        if (endpoint := self._remote(name)) is not None:
            self._verdicts.peer_opened(endpoint, open_for_s)

    def merge_samples(self, samples: Iterable[Sample]) -> None:
        for sample in samples:
            endpoint = self._remote(sample.endpoint)
            if endpoint is None:
                continue
            stats = endpoint.stats
            if sample.kind is SampleKind.FAILURE:
                stats.absorb_failure()
            elif sample.total_ms is None:
                continue
            elif sample.kind is SampleKind.CENSORED:
                stats.absorb_censored(sample.total_ms, first_token_ms=sample.first_token_ms)
            else:
                stats.absorb_success(
                    first_token_ms=sample.first_token_ms,
                    total_ms=sample.total_ms,
                    tokens=sample.tokens,
                )

    def remote_names(self) -> list[str]:
        return list(self._pool.remotes)

    def snapshot_json(self) -> str:
        """This process's latency estimates, for gateways that start later."""
        return self._pool.snapshot().to_json()

    def absorb_snapshots(self, texts: Iterable[bytes]) -> None:
        """Other gateways' snapshots, pooled, as the start of endpoints this process has not
        measured much itself (untrusted: what does not parse is left out)."""
        pooled = StatsSnapshot({})
        for text in texts:
            pooled = merge(pooled, StatsSnapshot.from_json(text))
        self._pool.absorb(pooled)

    def status(self) -> dict[str, Any]:
        """The transport's view (connected, age, peers), and the peers' request counts."""
        return {
            **self.transport_status(),
            "peer_inline_requests": self.peer_inline,
            "peer_hedged_requests": self.peer_hedged,
        }

    # -- internals ---------------------------------------------------------------------------

    def _add(self, sample: Sample) -> None:
        self._samples.append(sample)
        self._signal(urgent=False)

    def _signal(self, *, urgent: bool) -> None:
        if urgent:
            self.urgent.set()
        self.wake.set()

    def _remote(self, name: str) -> Endpoint | None:
        return self._pool.remotes.get(name)
