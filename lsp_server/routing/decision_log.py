"""The record of every routing decision, for `gatewayLs.status` and `gateway-ls stats`."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from lsp_server.config.model import Price
from lsp_server.reasons import Reason


class DecisionKind(StrEnum):
    """The kind of traffic a decision served (the strings on the wire)."""

    INLINE = "inline"
    EDIT = "edit"
    REFACTOR = "refactor"
    CHAT = "chat"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    kind: DecisionKind
    endpoint: str | None
    reason: Reason
    latency_ms: float
    tokens: int
    cost_usd: float
    uri: str | None = None
    hedged: bool = False
    detail: str | None = None  # what went wrong, in one line, when something did
    time: str = field(default_factory=now_iso)

    def to_json(self) -> dict[str, Any]:
        """As `dataclasses.asdict` gives it, without its deep copy of each value (every field
        is immutable): the status lists fifty of these every time it is read."""
        return {name: getattr(self, name) for name in _DECISION_FIELDS}


_DECISION_FIELDS = tuple(f.name for f in fields(Decision))


def estimate_cost(price: Price, prompt_tokens: int, completion_tokens: int) -> float:
    return (prompt_tokens * price.input + completion_tokens * price.output) / 1_000_000


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
