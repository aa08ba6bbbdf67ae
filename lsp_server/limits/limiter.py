"""`Limiter`: the core's admission of gateway requests, per client, and what they are charged.

A request is admitted once, before anything is asked upstream: its tokens (the prompt, at the
most the endpoints that may answer it are expected to count, `prompt_estimate`, plus the most
the answer may take) and its money (those tokens at the highest price of those endpoints) are
reserved together with a request and an in-flight slot, in one atomic call to the store. When
the answer ends the reservation is settled to what was used, at the price of the endpoint that
answered, and the unused part goes back. So concurrent requests never spend past a budget: each
one holds what it might cost until it knows. A request whose reservation does not fit the
budget while this gateway's other reservations on it are still unsettled waits for their
settlements (at most `BUDGET_WAIT_S`), which may give back enough for it, before it is refused.

With `[gateway] state_url` the store is Redis, shared by every gateway of the team; while it is
unreachable each gateway enforces its share (the limit divided by the gateways alive at the last
heartbeat) and budgets fail closed or open as `budget_when_state_down` says; what is settled
meanwhile, and what a budget failing open let through, is charged to the shared state when it
answers again (`shared_store`). Without Redis the gateway counts alone.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lsp_server.config.model import BudgetPeriod, Config, EndpointConfig, Limits, Price
from lsp_server.limits.ledger import LocalLedger, UsageEntry, now_ms, summarize
from lsp_server.limits.local_store import LocalStore
from lsp_server.limits.prompt_estimate import PromptEstimates
from lsp_server.limits.quota import (
    Ask,
    LimitKind,
    Spent,
    Verdict,
    budget_micros,
    micros,
    period_end,
    period_key,
    period_start,
    reserve_tokens,
    utc_now,
)

# redis-py is imported by a gateway that shares state, never by an editor's server.
if TYPE_CHECKING:
    from lsp_server.limits.shared_store import LatencyObserver, SharedStore

MAX_LEDGER_ENTRIES_READ = 1_000_000
SETTLE_WAIT_S = 2.0  # at shutdown, for settlements still on their way
BUDGET_WAIT_S = 2.0  # the longest an admission waits for reservations on its budget to settle

# The remote endpoints that may answer a request of a task class naming a model: their prices
# and caps bound its reservation (the local model, which may answer any, costs nothing).
Answerers = Callable[[str, str], Sequence[EndpointConfig]]


@dataclass(frozen=True, slots=True)
class Demand:
    """What a request may cost, as the front door reads it from the request."""

    client: str
    prompt_chars: int
    max_tokens: int | None  # None: the client set no cap, the endpoints' chat_max_tokens apply
    task_class: str
    model: str = ""  # what the client named: a task class or an endpoint


@dataclass(slots=True)
class Admission:
    verdict: Verdict
    limits: Limits
    lease: Lease | None  # None when refused
    period_end: dt.datetime | None = None  # of the budget's period, when there is a budget
    # The budget could not be checked (the shared state is down and budgets fail closed).
    budget_unchecked: bool = False

    @property
    def refused(self) -> LimitKind | None:
        return self.verdict.refused


@dataclass(slots=True)
class Lease:
    """An admitted request's reservation, settled once when it ends."""

    ask: Ask  # with the budget, also when admitted while it could not be checked
    task_class: str
    shared: bool  # admitted by the shared store (settled there), or by this process's
    prompt_chars: int = 0
    started: float = field(default_factory=time.monotonic)
    settled: bool = False


class Limiter:
    def __init__(self, config: Callable[[], Config], answerers: Answerers | None = None) -> None:
        """`answerers`: who may answer a request (None: any configured endpoint)."""
        self._config = config
        self._answerers = answerers
        self._local = LocalStore()
        self._shared: SharedStore | None = None
        self._ledger = LocalLedger()
        self._prompts = PromptEstimates()
        # Resolved when a settlement reaches its store: admissions waiting on a budget retry.
        self._settled: asyncio.Future[None] | None = None

    # -- the shared state (the gateway's, never the editor's) ------------------------------

    def share(self, url: str, password: str | None, observe: LatencyObserver) -> None:
        """Count in Redis at `url` from now on; call on the event loop that serves requests."""
        from lsp_server.limits.shared_store import SharedStore

        store = SharedStore(url, password)
        store.observe = observe
        store.on_settled = self._wake_waiting
        store.start()
        self._shared = store

    def status(self) -> dict[str, object]:
        """Whether limits are shared now (None: no shared state), and how many gateways share
        them (at the last heartbeat)."""
        shared = self._shared
        return {
            "shared": None if shared is None else shared.up,
            "gateways": 1 if shared is None else shared.alive,
        }

    async def ready(self, wait_s: float) -> None:
        """Wait, at most `wait_s`, for the shared state's first answer (nothing to wait for
        without one)."""
        if self._shared is not None:
            await self._shared.ready(wait_s)

    async def aclose(self) -> None:
        if self._shared is not None:
            await self._shared.stop(SETTLE_WAIT_S)

    # -- admission -------------------------------------------------------------------------

    async def admit(self, demand: Demand) -> Admission:
        config = self._config()
        limits = config.gateway.limits_of(demand.client)
        if not _limited(limits):  # nothing to reserve: the lease only carries the ledger's entry
            ask = Ask(demand.client, "", limits, 0, None, 0, "", 0)
            lease = Lease(ask, demand.task_class, False, demand.prompt_chars)
            return Admission(Verdict(None), limits, lease)
        answerers = (
            self._answerers(demand.task_class, demand.model)
            if self._answerers is not None
            else config.endpoints
        )
        max_tokens = demand.max_tokens or _largest_chat_cap(answerers or config.endpoints)
        prompt = self._prompts.tokens(demand.prompt_chars, (e.name for e in answerers))
        tokens = (
            reserve_tokens(demand.prompt_chars, max_tokens)
            if prompt is None
            else prompt + max_tokens
        )
        now = utc_now()
        budget = budget_micros(limits)
        ask = Ask(
            client=demand.client,
            lease_id=secrets.token_hex(8),
            limits=limits,
            tokens=min(tokens, limits.tpm) if limits.tpm else tokens,
            budget_micros=budget,
            reserve_micros=(
                micros(_highest_price(answerers), tokens - max_tokens, max_tokens) if budget else 0
            ),
            period=period_key(limits.budget_period, now),
            period_ttl_s=_ttl_s(period_end(limits.budget_period, now), now),
        )
        end = period_end(limits.budget_period, now) if budget is not None else None
        admission = await self._admit(config, ask, demand, end)
        deadline = time.monotonic() + BUDGET_WAIT_S
        while (
            admission.refused is LimitKind.BUDGET
            and not admission.budget_unchecked
            and self._settling(ask)
        ):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if self._shared is not None:
                self._shared.send_now()  # what gives back waits no longer for company
            await asyncio.wait((self._next_settlement(),), timeout=left)
            admission = await self._admit(config, ask, demand, end)
        return admission

    async def _admit(
        self, config: Config, ask: Ask, demand: Demand, end: dt.datetime | None
    ) -> Admission:
        """One admission by the shared store, or by this process's while it is down."""
        limits = ask.limits
        shared = self._shared
        if shared is not None and shared.up:
            verdict = await shared.admit(ask)
            if verdict is not None:
                lease = (
                    None
                    if verdict.refused
                    else Lease(ask, demand.task_class, True, demand.prompt_chars)
                )
                return Admission(verdict, limits, lease, end)
        local_ask = ask
        if shared is not None and ask.budget_micros is not None:
            if config.gateway.budget_when_state_down == "closed":
                return Admission(Verdict(LimitKind.BUDGET), limits, None, end, True)
            local_ask = _without_budget(ask)  # open: admitted unchecked, charged once it is back
        verdict = self._local.admit(local_ask, share=shared.alive if shared else 1)
        lease = (
            None if verdict.refused else Lease(ask, demand.task_class, False, demand.prompt_chars)
        )
        return Admission(verdict, limits, lease, end)

    def _settling(self, ask: Ask) -> bool:
        """Whether reservations of this gateway on `ask`'s budget are not settled yet."""
        shared = self._shared
        return self._local.settling(ask) or (shared is not None and shared.settling(ask))

    def _next_settlement(self) -> asyncio.Future[None]:
        settled = self._settled
        if settled is None or settled.done():
            settled = self._settled = asyncio.get_running_loop().create_future()
        return settled

    def _wake_waiting(self) -> None:
        if self._settled is not None and not self._settled.done():
            self._settled.set_result(None)

    def settle(self, lease: Lease, spent: Spent, latency_s: float) -> int:
        """Settle `lease` to what was spent (in the background); the cost in micro-dollars."""
        if lease.settled:
            return 0
        lease.settled = True
        config = self._config()
        cost = micros(_price_of(config, spent.endpoint), spent.input_tokens, spent.output_tokens)
        ask = lease.ask
        token_delta = spent.input_tokens + spent.output_tokens - ask.tokens
        micros_delta = cost - ask.reserve_micros
        entry = UsageEntry(
            now_ms(),
            ask.client,
            spent.endpoint,
            lease.task_class,
            spent.input_tokens,
            spent.output_tokens,
            cost,
            round(latency_s * 1000),
        )
        self._ledger.append(entry)
        if spent.reported:
            self._prompts.learn(spent.endpoint, lease.prompt_chars, spent.input_tokens)
        if not lease.shared:
            self._local.settle(ask, token_delta=token_delta, micros_delta=micros_delta)
            self._wake_waiting()
        if self._shared is not None:
            self._shared.settle(
                ask, held=lease.shared, cost=cost, token_delta=token_delta, entry=entry.fields()
            )
        return cost

    # -- the ledger ------------------------------------------------------------------------

    async def usage(self, period: BudgetPeriod) -> dict[str, object]:
        """Spend and tokens per client and endpoint in the current UTC day or month, from the
        shared ledger when there is one (else this process's own entries)."""
        since = period_start(period, utc_now())
        since_ms = int(since.timestamp() * 1000)
        source = "local"
        entries: list[UsageEntry] | None = None
        if self._shared is not None:
            raw = await self._shared.ledger(since_ms, limit=MAX_LEDGER_ENTRIES_READ)
            if raw is not None:
                source = "shared"
                # An entry sent late (Redis was unreachable) is read by when it happened.
                read = (UsageEntry.from_fields(fields) for fields in raw)
                entries = [e for e in read if e is not None and e.at_ms >= since_ms]
        if entries is None:
            entries = self._ledger.since(since_ms)
        return {"since": since.isoformat(), "source": source, "rows": summarize(entries)}


def _limited(limits: Limits) -> bool:
    return any(
        value is not None
        for value in (limits.rpm, limits.tpm, limits.max_concurrent, limits.budget_usd)
    )


def _without_budget(ask: Ask) -> Ask:
    return Ask(ask.client, ask.lease_id, ask.limits, ask.tokens, None, 0, ask.period, 0)


def _largest_chat_cap(endpoints: Sequence[EndpointConfig]) -> int:
    return max((e.chat_max_tokens for e in endpoints), default=1024)


def _highest_price(endpoints: Sequence[EndpointConfig]) -> Price:
    prices = [e.price_per_mtok for e in endpoints]
    return Price(
        max((p.input for p in prices), default=0.0), max((p.output for p in prices), default=0.0)
    )


def _price_of(config: Config, endpoint: str) -> Price:
    return next((e.price_per_mtok for e in config.endpoints if e.name == endpoint), Price())


def _ttl_s(end: dt.datetime, now: dt.datetime) -> int:
    return int((end - now).total_seconds()) + 86_400
