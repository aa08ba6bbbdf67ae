"""The record of every routing decision, for `gatewayLs.status` and `gateway-ls stats`."""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from lsp_server.config.model import Price
from lsp_server.reasons import Reason


@dataclass(frozen=True, slots=True)
class Decision:
    time: str
    kind: str  # "inline" | "refactor"
    endpoint: str | None
    reason: Reason
    latency_ms: float
    tokens: int
    cost_usd: float
    uri: str | None = None
    hedged: bool = False
    detail: str | None = None  # what went wrong, in one line, when something did

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def estimate_cost(price: Price, prompt_tokens: int, completion_tokens: int) -> float:
    return (prompt_tokens * price.input + completion_tokens * price.output) / 1_000_000


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class DecisionLog:
    def __init__(self, capacity: int = 200) -> None:
        self._entries: deque[Decision] = deque(maxlen=capacity)
        self.total = 0

    def add(self, decision: Decision) -> None:
        self._entries.append(decision)
        self.total += 1

    def recent(self, limit: int = 50) -> list[Decision]:
        entries = list(self._entries)
        return entries[-limit:]
