"""The usage ledger: one entry per gateway request (client, endpoint, task class, tokens, cost,
latency), in a Redis stream shared by the team's gateways, or in this process without Redis.

An entry holds names and numbers only, never a prompt or a token. `summarize` adds the entries
of a period up per client and endpoint, for `gateway-ls stats --usage`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MAX_LOCAL_ENTRIES = 100_000  # without Redis: this process's latest entries


@dataclass(frozen=True, slots=True)
class UsageEntry:
    at_ms: int
    client: str
    endpoint: str
    task_class: str
    input_tokens: int
    output_tokens: int
    micros: int
    latency_ms: int

    def fields(self) -> dict[str, str]:
        return {
            "at": str(self.at_ms),
            "client": self.client,
            "endpoint": self.endpoint,
            "class": self.task_class,
            "in": str(self.input_tokens),
            "out": str(self.output_tokens),
            "micros": str(self.micros),
            "ms": str(self.latency_ms),
        }

    @classmethod
    def from_fields(cls, fields: Mapping[bytes, bytes]) -> UsageEntry | None:
        """An entry read back from the stream; None for one that is not ours."""
        try:
            text = {k.decode(): v.decode() for k, v in fields.items()}
            return cls(
                int(text["at"]),
                text["client"],
                text["endpoint"],
                text["class"],
                int(text["in"]),
                int(text["out"]),
                int(text["micros"]),
                int(text["ms"]),
            )
        except (KeyError, ValueError, UnicodeDecodeError):
            return None


class LocalLedger:
    def __init__(self) -> None:
        self._entries: deque[UsageEntry] = deque(maxlen=MAX_LOCAL_ENTRIES)

    def append(self, entry: UsageEntry) -> None:
        self._entries.append(entry)

    def since(self, since_ms: int) -> list[UsageEntry]:
        return [e for e in self._entries if e.at_ms >= since_ms]


def summarize(entries: Iterable[UsageEntry]) -> list[dict[str, object]]:
    """Requests, tokens and spend per (client, endpoint), the largest spend first."""
    rows: dict[tuple[str, str], list[int]] = {}
    for entry in entries:
        row = rows.setdefault((entry.client, entry.endpoint or "none"), [0, 0, 0, 0])
        row[0] += 1
        row[1] += entry.input_tokens
        row[2] += entry.output_tokens
        row[3] += entry.micros
    summary: list[dict[str, object]] = [
        {
            "client": client,
            "endpoint": endpoint,
            "requests": n,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "cost_usd": micros / 1_000_000,
        }
        for (client, endpoint), (n, tokens_in, tokens_out, micros) in rows.items()
    ]
    summary.sort(key=lambda row: (-float(str(row["cost_usd"])), str(row["client"])))
    return summary


def now_ms() -> int:
    return int(time.time() * 1000)
