"""Admission shared by every gateway with the same `state_url`: one Redis script per request.

`admit` sends the whole admission (every scope the request touches) as one `EVALSHA`, with a
tight timeout and no retry. When Redis fails or is slow, the store is down: the caller falls back
to its own share of each limit (`local_store`), one warning is logged, and only the heartbeat
(every `HEARTBEAT_S`) tries Redis again, so no request waits on a dead server. The heartbeat also
counts the gateways alive, which sets that share, and renews this gateway's leases: a gateway
killed mid-answer stops renewing, and its requests stop counting as in flight within `LEASE_S`.

Settlements never wait on Redis and are never lost to an outage. `settle` records what a request
owes the shared state (its reservation set to what it used, its charge to a budget, its ledger
entry) and one background task sends everything owed in one script call, again and again while
more comes; while Redis is unreachable the debts wait (bounded) and go when it answers again.
What others' admissions must read at once goes at once: a charge beyond a reservation (or one
made while Redis was down), and a reservation's end under a rate or concurrency limit, whose
slot and tokens the client's next request may need. What only gives money back to a budget waits
with the ledger entries, up to `COALESCE_S`, for others to go in the same call: until then
admissions see less room than there is, never more, so the budget stays exact, and a busy
gateway makes one call for the ends of many requests instead of one each; an admission that
waits for the budget's reservations to settle has them sent at once (`send_now`).
Money owed is summed per budget key, so no outage loses a charge however long it lasts. Nor is
one charged twice: each call is numbered, and a call whose reply was lost (Redis may have run
it) is sent again as it was, first, and Redis runs a number once. The
gateway also keeps what it last saw in each budget (every admission and settlement reads it)
and the reservations it holds: when Redis comes back empty (a restart without persistence; a
new epoch, see `scripts`), it puts back each budget as it saw it plus what it owes since, and
its reservations and leases, before it counts again; the debts that covers are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from lsp_server.limits import scripts
from lsp_server.limits.debts import MAX_OWED_SETTLEMENTS, Debts, Money, add_money
from lsp_server.limits.quota import Ask, LimitKind, Verdict, Window

log = logging.getLogger(__name__)

PREFIX = "gateway-ls:v1:limits:"
GATEWAYS_KEY = PREFIX + "gateways"
EPOCH_KEY = PREFIX + "epoch"
LEDGER_KEY = "gateway-ls:v1:usage"
# A call waits no longer on Redis, then the store is down. A dead server refuses at once; this
# is for one that hangs, and it is long enough that a busy host's slow answer (its own event
# loop starved of CPU, a new connection) is not taken for an outage, which would fail budgets
# closed for everyone for a heartbeat.
TIMEOUT_S = 2.0
CONNECT_TIMEOUT_S = 1.0
HEARTBEAT_S = 1.0
ALIVE_MS = 3500  # a gateway whose last heartbeat is older is not counted
LEASE_S = 10.0  # an in-flight request not renewed for this long is reclaimed
RENEW_EVERY_S = 3.0
# Connections opened before a gateway takes traffic (`ready`), for admissions that come at once.
WARM_CONNECTIONS = 4
LEDGER_RETENTION_S = 35 * 24 * 3600  # a month's usage and a few days
COALESCE_S = 0.05  # the longest ledger entries alone wait for others to go in one call

# Observes one Redis call: what it was and how long it took (seconds).
LatencyObserver = Callable[[str, float], None]


def _key(kind: str, client: str, suffix: str = "") -> str:
    return f"{PREFIX}{kind}:{client}{':' + suffix if suffix else ''}"


def _budget_key(ask: Ask) -> str:
    return _key("budget", ask.client, ask.period)


class SharedStore:
    def __init__(self, url: str, password: str | None) -> None:
        self.gateway_id = secrets.token_hex(8)
        self._client = Redis.from_url(
            url,
            password=password,
            socket_timeout=TIMEOUT_S,
            socket_connect_timeout=CONNECT_TIMEOUT_S,
            retry=Retry(NoBackoff(), 0),
            client_name="gateway-ls-limits",
        )
        self._admit = self._client.register_script(scripts.ADMIT)
        self._settle = self._client.register_script(scripts.SETTLE)
        self._restore = self._client.register_script(scripts.RESTORE)
        self._renew = self._client.register_script(scripts.RENEW)
        self._heartbeat = self._client.register_script(scripts.HEARTBEAT)
        self.up = True  # until a call fails: the first request need not wait for a heartbeat
        self.alive = 1  # gateways alive at the last heartbeat, this one included
        self.epoch: str | None = None  # the shared state's epoch this gateway counts in
        self._warned = False
        self._scripts_loaded = False
        self._held: dict[str, Ask] = {}  # lease id -> the reservation this gateway holds
        self._seen: dict[str, Money] = {}  # budget key -> its micro-dollars at the last call
        self._debts = Debts.empty()
        # The last settle call whose reply never came, with its number: Redis may have run it,
        # so it is sent again as it was, first, and Redis tells whether it ran (never twice).
        self._unanswered: tuple[int, Debts] | None = None
        self._calls_settled = 0
        self._dropped_entries_warned = False
        self._lock = asyncio.Lock()  # one sender of debts and restorer at a time
        self._sender: asyncio.Task[None] | None = None
        self._coalescing: asyncio.TimerHandle | None = None  # debts waiting for others
        self._urgent = False  # owed: what admissions must see at once (a charge)
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._first_beat = asyncio.Event()  # set once the heartbeat has tried Redis
        self.observe: LatencyObserver = lambda _call, _seconds: None
        # Told each time budgets' settlements reached Redis (admissions waiting may fit now).
        self.on_settled: Callable[[], None] = lambda: None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._beat())

    async def ready(self, wait_s: float) -> None:
        """Wait, at most `wait_s`, for the first heartbeat (Redis answered, its scripts are
        loaded and this gateway counts in its epoch, or it did not answer), with connections
        open for the admissions that come at once. A failure here is the heartbeat's to see."""

        async def pings() -> None:
            await asyncio.gather(*(self._client.ping() for _ in range(WARM_CONNECTIONS)))

        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.gather(self._first_beat.wait(), pings()), wait_s)

    async def stop(self, wait_s: float) -> None:
        """Send what is owed (waiting at most `wait_s`), then let go of Redis."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._send_debts(), wait_s)
        if self._sender is not None:
            self._sender.cancel()
        if self._coalescing is not None:
            self._coalescing.cancel()
        # The heartbeat also stops at its next beat: a cancellation that arrives as a Redis
        # reply does can be lost inside `asyncio.wait_for` (Python 3.11).
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._client.aclose(), TIMEOUT_S)

    # -- admission -------------------------------------------------------------------------

    async def admit(self, ask: Ask, *, again: bool = True) -> Verdict | None:
        """The verdict, or None when Redis did not give one (the store is then down)."""
        limits = ask.limits
        keys = [
            _key("rpm", ask.client),
            _key("tpm", ask.client),
            _key("inflight", ask.client),
            _budget_key(ask),
            EPOCH_KEY,
        ]
        args: list[str | int] = [
            limits.rpm or 0,
            limits.tpm or 0,
            ask.tokens,
            limits.max_concurrent or 0,
            ask.lease_id,
            int(LEASE_S * 1000),
            -1 if ask.budget_micros is None else ask.budget_micros,
            ask.reserve_micros,
            ask.period_ttl_s,
            self.epoch or "",
        ]
        reply = await self._call("admit", self._admit(keys=keys, args=args))
        if reply is None:
            return None
        refused, retry_ms, r_left, r_reset, t_left, t_reset, total = reply
        name = refused.decode() if isinstance(refused, bytes) else str(refused)
        if name == "epoch":  # an epoch new to this gateway: put its part back, then count
            if again and await self.reconcile():
                return await self.admit(ask, again=False)
            return None
        if not name:
            self._held[ask.lease_id] = ask
        if int(total) >= 0:
            self._saw(_budget_key(ask), int(total), ask.period_ttl_s)
        return Verdict(
            LimitKind(name) if name else None,
            int(retry_ms) / 1000,
            Window(limits.rpm, int(r_left), int(r_reset) / 1000) if limits.rpm else None,
            Window(limits.tpm, int(t_left), int(t_reset) / 1000) if limits.tpm else None,
        )

    def settle(
        self, ask: Ask, *, held: bool, cost: int, token_delta: int, entry: Mapping[str, str]
    ) -> None:
        """Owe the shared state one request's end: its reservation (`held`: made here) set to
        what it used, its `cost` charged to its budget (all of it when the reservation was made
        while Redis was down), its ledger entry. Sent in the background."""
        if held:
            self._held.pop(ask.lease_id, None)
        if ask.budget_micros is not None:
            key = _budget_key(ask)
            owed = cost - ask.reserve_micros if held else cost
            add_money(self._debts.money, key, owed, ask.period_ttl_s)
            self._urgent |= owed > 0
        if held and (ask.limits.tpm or ask.limits.max_concurrent):
            self._debts.settlements.append((ask, token_delta))
            self._urgent = True  # a slot or tokens the client's next request may need at once
        entries = self._debts.entries
        if len(entries) == entries.maxlen and not self._dropped_entries_warned:
            log.warning(
                "usage ledger: the shared state has been unreachable for long; "
                "its oldest unsent entries are dropped"
            )
            self._dropped_entries_warned = True
        entries.append([text for pair in entry.items() for text in pair])
        self._start_sending()

    def send_now(self) -> None:
        """Send what is owed without waiting for more to share the call."""
        self._urgent = True
        self._start_sending()

    def settling(self, ask: Ask) -> bool:
        """Whether this gateway holds a reservation on `ask`'s budget, or owes it money, that
        Redis has not settled yet: an admission it refused may fit once that is sent."""
        key = _budget_key(ask)
        if key in self._debts.money:
            return True
        if self._unanswered is not None and key in self._unanswered[1].money:
            return True
        return any(_budget_key(held) == key for held in self._held.values())

    def owed(self) -> int:
        """Settlements and ledger entries not yet in Redis."""
        waiting = [self._debts] if self._unanswered is None else [self._debts, self._unanswered[1]]
        return sum(len(debts.settlements) + len(debts.entries) for debts in waiting)

    def _saw(self, key: str, micros: int, ttl_s: int) -> None:
        if key not in self._seen:
            now = time.monotonic()
            for old in [k for k, money in self._seen.items() if money.expires < now]:
                del self._seen[old]
        self._seen[key] = Money(micros, ttl_s, time.monotonic() + ttl_s)

    def _owes(self) -> bool:
        return bool(self._debts) or self._unanswered is not None

    def _start_sending(self) -> None:
        """Send what is owed: at once when others' admissions must see it (a charge), else
        (what gives back, ledger entries) once `COALESCE_S` has gathered more."""
        if not (self.up and self._owes()) or (self._sender is not None and not self._sender.done()):
            return
        if self._urgent or self._unanswered is not None:
            self._sender = asyncio.get_running_loop().create_task(self._send_debts())
        elif self._coalescing is None:
            self._coalescing = asyncio.get_running_loop().call_later(COALESCE_S, self._coalesced)

    def _coalesced(self) -> None:
        self._coalescing = None
        if not (self.up and self._owes()) or (self._sender is not None and not self._sender.done()):
            return
        self._sender = asyncio.get_running_loop().create_task(self._send_debts())

    async def _send_debts(self) -> None:
        async with self._lock:
            while self.up and self._owes():
                if self._unanswered is None:
                    self._calls_settled += 1
                    self._unanswered = (self._calls_settled, self._debts.take())
                    self._urgent = False
                number, debts = self._unanswered
                reply = await self._call("settle", self._settle_call(number, debts))
                if reply is None:
                    return  # down: sent again, as it is, when Redis answers
                self._unanswered = None
                if not int(reply[0]):  # an epoch new to this gateway: the ledger went in
                    debts.entries.clear()
                    self._debts.give_back(debts)
                    if not await self._reconcile_locked():
                        return
                    continue
                for (key, money), total in zip(debts.money.items(), reply[1:], strict=True):
                    self._saw(key, int(total), money.ttl_s)
                if debts.money:
                    self.on_settled()

    def _settle_call(self, number: int, debts: Debts) -> Any:
        keys = [EPOCH_KEY, LEDGER_KEY, f"{PREFIX}settled:{self.gateway_id}", *debts.money]
        oldest_ms = int((time.time() - LEDGER_RETENTION_S) * 1000)
        width = len(debts.entries[0]) // 2 if debts.entries else 0
        args: list[str | int] = [
            self.epoch or "",
            oldest_ms,
            len(debts.money),
            len(debts.settlements),
            len(debts.entries),
            width,
            number,
        ]
        for money in debts.money.values():
            args += [money.micros, money.ttl_s]
        for ask, delta in debts.settlements:
            keys += [_key("tpm", ask.client), _key("inflight", ask.client)]
            args += [ask.limits.tpm or 0, delta, ask.lease_id]
        for fields in debts.entries:
            args += fields
        return self._settle(keys=keys, args=args)

    # -- a new epoch -----------------------------------------------------------------------

    async def reconcile(self) -> bool:
        """Count in the shared state's epoch from now on, putting this gateway's part back
        into it when it is new; False when Redis did not answer."""
        async with self._lock:
            return await self._reconcile_locked()

    async def _reconcile_locked(self) -> bool:
        first = self.epoch is None  # nothing counted here yet: nothing to put back
        if self._unanswered is not None:  # a new epoch holds nothing of it: owed again
            self._debts.give_back(self._unanswered[1])
            self._unanswered = None
        money: dict[str, Money] = {} if first else dict(self._seen)
        for key, owed in ({} if first else self._debts.money).items():
            seen = money.get(key)
            money[key] = Money((seen.micros if seen else 0) + owed.micros, owed.ttl_s, 0.0)
        held = [] if first else list(self._held.values())
        keys = [EPOCH_KEY, *money]
        args: list[str | int] = [self.epoch or "", secrets.token_hex(8), len(money), len(held)]
        for least in money.values():
            args += [max(0, least.micros), least.ttl_s]
        for ask in held:
            keys += [_key("tpm", ask.client), _key("inflight", ask.client)]
            lease_ms = int(LEASE_S * 1000) if ask.limits.max_concurrent else 0
            args += [ask.limits.tpm or 0, ask.tokens, ask.lease_id, lease_ms]
        # What is owed now, but for the ledger, is in what is put back (unless the epoch turns
        # out to be known already); debts that come while the call is under way are not.
        taken = Debts(self._debts.money, self._debts.settlements, deque())
        self._debts.money, self._debts.settlements = {}, deque(maxlen=MAX_OWED_SETTLEMENTS)
        reply = await self._call("restore", self._restore(keys=keys, args=args))
        if reply is None or first or not int(reply[1]):
            self._debts.give_back(taken)
        if reply is None:
            return False
        epoch, restored = reply
        if int(restored) and not first:
            log.warning(
                "shared limits state came back empty: this gateway put back the budgets as it "
                "last saw them and the reservations it holds"
            )
        self.epoch = epoch.decode() if isinstance(epoch, bytes) else str(epoch)
        return True

    async def ledger(self, since_ms: int, *, limit: int) -> list[dict[bytes, bytes]] | None:
        """Ledger entries from `since_ms` on, at most `limit`; None when Redis is down."""
        entries: list[dict[bytes, bytes]] = []
        start = f"{since_ms}-0"
        while len(entries) < limit:
            page = await self._call(
                "ledger", self._client.xrange(LEDGER_KEY, min=start, count=1000), timeout_s=2.0
            )
            if page is None:
                return None
            entries.extend(fields for _, fields in page)
            if len(page) < 1000:
                break
            start = "(" + page[-1][0].decode()
        return entries[:limit]

    # -- the heartbeat ---------------------------------------------------------------------

    async def _beat(self) -> None:
        renewed_at = 0.0
        while not self._stopping:
            reply = await self._call(
                "heartbeat",
                self._heartbeat(keys=[GATEWAYS_KEY, EPOCH_KEY], args=[self.gateway_id, ALIVE_MS]),
                heartbeat=True,
            )
            if reply is not None:
                alive, epoch = reply
                self.alive = max(1, int(alive))
                if not self._scripts_loaded:  # so no request pays for loading one
                    self._scripts_loaded = await self._load_scripts()
                if (epoch.decode() if isinstance(epoch, bytes) else str(epoch)) != self.epoch:
                    await self.reconcile()
                self._start_sending()
                if time.monotonic() - renewed_at >= RENEW_EVERY_S:
                    await self._renew_leases()
                    renewed_at = time.monotonic()
            self._first_beat.set()
            await asyncio.sleep(HEARTBEAT_S)

    async def _load_scripts(self) -> bool:
        pipe = self._client.pipeline(transaction=False)
        for script in (self._admit, self._settle, self._restore, self._renew):
            pipe.script_load(script.script)
        return await self._call("load", pipe.execute()) is not None

    async def _renew_leases(self) -> None:
        by_key: dict[str, list[str]] = {}
        for lease, ask in self._held.items():
            if ask.limits.max_concurrent:
                by_key.setdefault(_key("inflight", ask.client), []).append(lease)
        for key, leases in by_key.items():
            await self._call("renew", self._renew(keys=[key], args=[int(LEASE_S * 1000), *leases]))

    # -- up and down -----------------------------------------------------------------------

    async def _call(
        self, name: str, call: Any, *, timeout_s: float = TIMEOUT_S, heartbeat: bool = False
    ) -> Any:
        """Await a Redis call when the store is up (or this is the heartbeat trying it again);
        None when it fails, and the store is then down."""
        if not self.up and not heartbeat:
            with contextlib.suppress(BaseException):
                call.close()  # a coroutine never awaited
            return None
        started = time.perf_counter()
        try:
            reply = await asyncio.wait_for(call, timeout_s)
        except Exception as error:  # whatever Redis does, requests go on
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError from error  # redis-py took the cancellation
            self._down(error)
            return None
        self.observe(name, time.perf_counter() - started)
        if not self.up:
            self._back()
        return reply

    def _down(self, error: BaseException) -> None:
        if self.up or not self._warned:
            log.warning(
                "shared limits state is unreachable (%s): each gateway enforces its share of "
                "the limits (%d gateways were alive)",
                str(error) or type(error).__name__,
                self.alive,
            )
            self._warned = True
        self.up = False
        self._scripts_loaded = False  # a Redis that comes back may have none

    def _back(self) -> None:
        if self._warned:
            log.warning("shared limits state is back: limits are shared again")
        self._warned = False
        self.up = True
