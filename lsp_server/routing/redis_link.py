"""The transport of shared routing state: Redis, through redis-py's asyncio client.

Two background tasks per connection, never a request's: the writer sends this process's pending
`Update` (at once for a breaker change, batched every `BATCH_S` for samples, a heartbeat every
`HEARTBEAT_S` when idle) with one pipeline: `PUBLISH` to the peers, plus the keys a gateway that
starts later reads (the breakers held open, and every `SNAPSHOT_EVERY_S` this process's latency
snapshot); the reader merges the peers' published updates as they arrive. Pub/sub is what carries
an outage to the other gateways within milliseconds; the keys are only for late joiners.

Every command has a tight timeout and no retry. When Redis is unreachable or slow the session
ends: one warning, routing carries on with this process's own state, and a reconnection is tried
in the background with a growing pause (at most `RECONNECT_MAX_S`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any
from urllib.parse import urlsplit

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from lsp_server.routing.shared_state import SharedState
from lsp_server.routing.shared_wire import decode_update, encode_update

log = logging.getLogger(__name__)

PREFIX = "gateway-ls:v1:"
CHANNEL = PREFIX + "updates"
TIMEOUT_S = 0.5  # every command
CONNECT_TIMEOUT_S = 1.0  # a new connection (TLS included) on a busy host
BATCH_S = 0.05  # samples wait this long for company; a breaker change does not wait
HEARTBEAT_S = 1.0  # an idle writer still proves the link (and counts the peers) this often
READ_POLL_S = 1.0
RECONNECT_MIN_S = 0.2
RECONNECT_MAX_S = 2.0
SNAPSHOT_EVERY_S = 1.0  # at most, once samples came; a few hundred bytes
SNAPSHOT_TTL_S = 3600  # a gateway gone for an hour has nothing worth reading
MAX_SNAPSHOTS = 64  # read by a gateway that starts


def snapshot_key(process: int) -> str:
    return f"{PREFIX}snapshot:{process}"


def breaker_key(endpoint: str) -> str:
    return f"{PREFIX}breaker:{endpoint}"


def display_url(url: str) -> str:
    """The URL without user name or password: scheme, host, port and database."""
    parts = urlsplit(url)
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path or ''}"


class RedisLink:
    def __init__(self, url: str, password: str | None, shared: SharedState) -> None:
        self.url = url
        self._password = password
        self._shared = shared
        self._task: asyncio.Task[None] | None = None
        self.connected = False
        self.peers = 0
        self.sent = 0
        self.received = 0
        self.last_error: str | None = None
        self._last_ok: float | None = None
        self._disconnected_at: float | None = None
        self._warned = False
        self._history_read = False
        self._snapshot_at = 0.0
        self._snapshot_stale = False  # samples taken in since the snapshot was last written
        self._sessions = 0  # sessions that got as far as subscribing
        shared.transport_status = self.status

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def status(self) -> dict[str, Any]:
        now = time.monotonic()
        return {
            "url": display_url(self.url),
            "connected": self.connected,
            "age_s": None if self._last_ok is None else round(now - self._last_ok, 2),
            "peers": self.peers if self.connected else None,
            "sent": self.sent,
            "received": self.received,
            "error": None if self.connected else self.last_error,
        }

    # -- the connection's life -----------------------------------------------------------------

    async def _run(self) -> None:
        pause = RECONNECT_MIN_S
        while True:
            sessions = self._sessions
            try:
                await self._session()
            except Exception as error:  # whatever Redis does, routing must not notice
                self._lost(error)
            if self._sessions != sessions:  # it was up: try again soon
                pause = RECONNECT_MIN_S
            await asyncio.sleep(pause)
            pause = min(pause * 2, RECONNECT_MAX_S)

    async def _session(self) -> None:
        client = Redis.from_url(
            self.url,
            password=self._password,
            socket_timeout=TIMEOUT_S,
            socket_connect_timeout=CONNECT_TIMEOUT_S,
            retry=Retry(NoBackoff(), 0),
            client_name="gateway-ls",
        )
        pubsub = client.pubsub(ignore_subscribe_messages=True)
        try:
            await asyncio.wait_for(pubsub.subscribe(CHANNEL), CONNECT_TIMEOUT_S + TIMEOUT_S)
            await self._read_keys(client)
            self._up()
            reader = asyncio.create_task(self._read(pubsub))
            writer = asyncio.create_task(self._write(client))
            try:
                done, _ = await asyncio.wait((reader, writer), return_when="FIRST_COMPLETED")
            finally:
                for task in (reader, writer):
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
            for task in done:
                task.result()  # raises what ended the session
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pubsub.aclose(), TIMEOUT_S)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.aclose(), TIMEOUT_S)

    def _up(self) -> None:
        if self._warned:
            outage = time.monotonic() - (self._disconnected_at or time.monotonic())
            log.warning(
                "shared routing state at %s is back after %.1f s; sharing again",
                display_url(self.url),
                outage,
            )
        self.connected = True
        self._sessions += 1
        self._warned = False
        self._disconnected_at = None
        self._last_ok = time.monotonic()

    def _lost(self, error: BaseException) -> None:
        self.connected = False
        self.last_error = str(error) or type(error).__name__
        if self._disconnected_at is None:
            self._disconnected_at = time.monotonic()
        if not self._warned:
            self._warned = True
            log.warning(
                "shared routing state at %s is unavailable (%s): routing on this process's own "
                "statistics, reconnecting in the background",
                display_url(self.url),
                self.last_error,
            )

    # -- reading ---------------------------------------------------------------------------

    async def _read_keys(self, client: Redis) -> None:
        """Breakers the peers hold open now; once per process, their latency snapshots too."""
        names = self._shared.remote_names()
        if names:
            pipe = client.pipeline(transaction=False)
            for name in names:
                pipe.pttl(breaker_key(name))
            remaining = await asyncio.wait_for(pipe.execute(), TIMEOUT_S)
            for name, remaining_ms in zip(names, remaining, strict=True):
                if isinstance(remaining_ms, int) and remaining_ms > 0:
                    self._shared.merge_breaker(name, remaining_ms / 1000)
        if not self._history_read:
            snapshots = await asyncio.wait_for(self._read_snapshots(client), 2 * TIMEOUT_S)
            self._shared.absorb_snapshots(snapshots)
            self._history_read = True

    async def _read_snapshots(self, client: Redis) -> list[bytes]:
        own = snapshot_key(self._shared.process).encode()
        keys: list[bytes] = []
        async for key in client.scan_iter(match=f"{PREFIX}snapshot:*", count=100):
            if key != own:
                keys.append(key)
            if len(keys) >= MAX_SNAPSHOTS:
                break
        values = await client.mget(keys) if keys else []
        return [v for v in values if isinstance(v, bytes)]

    async def _read(self, pubsub: PubSub) -> None:
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=READ_POLL_S)
            if message is None or message.get("type") != "message":
                continue
            update = decode_update(message.get("data"), self._shared.knows)
            if update is None or update.sender == self._shared.process:
                continue
            self.received += 1
            self._last_ok = time.monotonic()
            self._shared.merge(update)

    # -- writing ---------------------------------------------------------------------------

    async def _write(self, client: Redis) -> None:
        shared = self._shared
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(shared.wake.wait(), HEARTBEAT_S)
            if shared.wake.is_set():  # let a burst of samples share one round trip
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(shared.urgent.wait(), BATCH_S)
            await self._send(client)

    async def _send(self, client: Redis) -> None:
        update = self._shared.take_update()
        pipe = client.pipeline(transaction=False)
        pipe.publish(CHANNEL, encode_update(update))
        now = time.monotonic()
        self._snapshot_stale = self._snapshot_stale or bool(update.samples)
        if self._snapshot_stale and now - self._snapshot_at >= SNAPSHOT_EVERY_S:
            snapshot = self._shared.snapshot_json()
            pipe.set(snapshot_key(update.sender), snapshot, ex=SNAPSHOT_TTL_S)
            self._snapshot_at, self._snapshot_stale = now, False
        for name, seconds in update.opened.items():
            pipe.set(breaker_key(name), b"1", px=max(1, int(seconds * 1000)))
        for name in update.closed:
            pipe.delete(breaker_key(name))
        results = await asyncio.wait_for(pipe.execute(), TIMEOUT_S)
        subscribers = results[0]
        self.peers = max(0, subscribers - 1) if isinstance(subscribers, int) else 0
        self.sent += 1
        self._last_ok = time.monotonic()
