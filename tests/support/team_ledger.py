"""A team's gateway clients (their tokens and prices) and the shared ledger their requests are
settled in."""

from __future__ import annotations

import time
from typing import cast

import pytest
import redis

from lsp_server.limits.shared_store import LEDGER_KEY

TOKENS = {"ALICE_TOKEN": "alice-secret-1", "BOB_TOKEN": "bob-secret-2", "CI_TOKEN": "ci-secret-3"}
PRICE = "price_per_mtok = { input = 10.0, output = 10.0 }\n"  # 10 micro-dollars a token


def auth(client: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[client]}"}


def ledger(redis_url: str, client: str) -> list[dict[str, str]]:
    store = redis.Redis.from_url(redis_url)
    try:
        # A client without decode_responses answers bytes; redis-py's annotation covers both.
        stream = cast(list[tuple[bytes, dict[bytes, bytes]]], store.xrange(LEDGER_KEY))
        entries = [{k.decode(): v.decode() for k, v in fields.items()} for _, fields in stream]
    finally:
        store.close()
    return [e for e in entries if e["client"] == client]


def settled(redis_url: str, client: str, count: int, timeout_s: float = 10) -> list[dict[str, str]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        entries = ledger(redis_url, client)
        if len(entries) >= count:
            return entries
        time.sleep(0.05)
    pytest.fail(f"{client}: {len(ledger(redis_url, client))} ledger entries, expected {count}")
