"""Admission shared by every gateway with the same `state_url`: one Redis script per request.

`admit` sends the whole admission (every scope the request touches) as one `EVALSHA`, with a
tight timeout and no retry. When Redis fails or is slow, the store is down: the caller falls back
to its own share of each limit (`local_store`), one warning is logged, and only the heartbeat
(every `HEARTBEAT_S`) tries Redis again, so no request waits on a dead server. The heartbeat also
counts the gateways alive, which sets that share, and renews this gateway's leases: a gateway
killed mid-answer stops renewing, and its requests stop counting as in flight within `LEASE_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from lsp_server.limits import scripts
from lsp_server.limits.quota import Ask, LimitKind, Verdict, Window

log = logging.getLogger(__name__)

PREFIX = "gateway-ls:v1:limits:"
GATEWAYS_KEY = PREFIX + "gateways"
LEDGER_KEY = "gateway-ls:v1:usage"
TIMEOUT_S = 0.5  # an admission waits no longer on Redis (as the routing state's calls)
CONNECT_TIMEOUT_S = 1.0
HEARTBEAT_S = 1.0
ALIVE_MS = 3500  # a gateway whose last heartbeat is older is not counted
LEASE_S = 10.0  # an in-flight request not renewed for this long is reclaimed
RENEW_EVERY_S = 3.0
LEDGER_RETENTION_S = 35 * 24 * 3600  # a month's usage and a few days

# Observes one Redis call: what it was and how long it took (seconds).
LatencyObserver = Callable[[str, float], None]


def _key(kind: str, client: str, suffix: str = "") -> str:
    return f"{PREFIX}{kind}:{client}{':' + suffix if suffix else ''}"


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
        self._renew = self._client.register_script(scripts.RENEW)
        self._heartbeat = self._client.register_script(scripts.HEARTBEAT)
        self.up = True  # until a call fails: the first request need not wait for a heartbeat
        self.alive = 1  # gateways alive at the last heartbeat, this one included
        self._warned = False
        self._leases: dict[str, str] = {}  # lease id -> its leases key, held by this gateway
        self._task: asyncio.Task[None] | None = None
        self.observe: LatencyObserver = lambda _call, _seconds: None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._beat())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._client.aclose(), TIMEOUT_S)

    # -- admission -------------------------------------------------------------------------

    async def admit(self, ask: Ask) -> Verdict | None:
        """The verdict, or None when Redis did not give one (the store is then down)."""
        limits = ask.limits
        keys = [
            _key("rpm", ask.client),
            _key("tpm", ask.client),
            _key("inflight", ask.client),
            _key("budget", ask.client, ask.period),
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
        ]
        reply = await self._call("admit", self._admit(keys=keys, args=args))
        if reply is None:
            return None
        refused, retry_ms, r_left, r_reset, t_left, t_reset = reply
        if limits.max_concurrent and not refused:
            self._leases[ask.lease_id] = keys[2]
        name = refused.decode() if isinstance(refused, bytes) else str(refused)
        return Verdict(
            LimitKind(name) if name else None,
            int(retry_ms) / 1000,
            Window(limits.rpm, int(r_left), int(r_reset) / 1000) if limits.rpm else None,
            Window(limits.tpm, int(t_left), int(t_reset) / 1000) if limits.tpm else None,
        )

    async def settle(
        self, ask: Ask | None, *, token_delta: int, micros_delta: int, entry: Mapping[str, str]
    ) -> bool:
        """Set the reservation (None: none was made here) to what was used and append the
        ledger entry, in one round trip; False when Redis did not take it."""
        pipe = self._client.pipeline(transaction=False)
        if ask is not None:
            self._leases.pop(ask.lease_id, None)
            keys = [
                _key("tpm", ask.client),
                _key("inflight", ask.client),
                _key("budget", ask.client, ask.period),
            ]
            args: list[str | int] = [ask.limits.tpm or 0, token_delta, ask.lease_id, micros_delta]
            await self._settle(keys=keys, args=args, client=pipe)
        oldest_ms = int((time.time() - LEDGER_RETENTION_S) * 1000)
        pipe.xadd(LEDGER_KEY, dict(entry), minid=oldest_ms, approximate=True)  # type: ignore[arg-type]
        return await self._call("settle", pipe.execute()) is not None

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
        while True:
            alive = await self._call(
                "heartbeat",
                self._heartbeat(keys=[GATEWAYS_KEY], args=[self.gateway_id, ALIVE_MS]),
                heartbeat=True,
            )
            if alive is not None:
                self.alive = max(1, int(alive))
                if time.monotonic() - renewed_at >= RENEW_EVERY_S:
                    await self._renew_leases()
                    renewed_at = time.monotonic()
            await asyncio.sleep(HEARTBEAT_S)

    async def _renew_leases(self) -> None:
        by_key: dict[str, list[str]] = {}
        for lease, key in self._leases.items():
            by_key.setdefault(key, []).append(lease)
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

    def _back(self) -> None:
        if self._warned:
            log.warning("shared limits state is back: limits are shared again")
        self._warned = False
        self.up = True
