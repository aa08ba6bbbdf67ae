"""What a gateway owes the shared state and has not sent yet (`shared_store`): money per
budget key, the ends of held reservations, and usage-ledger entries, bounded while Redis is
unreachable and taken a script call's worth at a time."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from lsp_server.limits.quota import Ask

SETTLE_BATCH = 256  # settlements and ledger entries sent in one script call, at most
# While Redis is unreachable: the most settlements of rates and leases kept (older ones are
# dropped: their tokens went back to the minute long ago, their leases expire) and the most
# ledger entries kept (then the oldest are dropped, and that is logged once).
MAX_OWED_SETTLEMENTS = 10_000
MAX_OWED_ENTRIES = 100_000


@dataclass(slots=True)
class Money:
    """Micro-dollars for one budget key, and how long that key lives."""

    micros: int
    ttl_s: int
    expires: float  # time.monotonic() when the key (and so the count) no longer matters


@dataclass(slots=True)
class Debts:
    """What this gateway owes the shared state and has not sent yet."""

    money: dict[str, Money]  # budget key -> micro-dollars to add (a refund is negative)
    settlements: deque[tuple[Ask, int]]  # held reservations ended, with their token delta
    entries: deque[list[str]]  # ledger entries, as field, value, field, value, ...

    @classmethod
    def empty(cls) -> Debts:
        return cls({}, deque(maxlen=MAX_OWED_SETTLEMENTS), deque(maxlen=MAX_OWED_ENTRIES))

    def __bool__(self) -> bool:
        return bool(self.money or self.settlements or self.entries)

    def take(self) -> Debts:
        """At most one call's worth, removed from these debts."""
        taken = Debts.empty()
        taken.money, self.money = self.money, {}
        for _ in range(min(SETTLE_BATCH, len(self.settlements))):
            taken.settlements.append(self.settlements.popleft())
        for _ in range(min(SETTLE_BATCH, len(self.entries))):
            taken.entries.append(self.entries.popleft())
        return taken

    def give_back(self, taken: Debts) -> None:
        """A call that failed: its debts go first again."""
        for key, money in taken.money.items():
            add_money(self.money, key, money.micros, money.ttl_s)
        self.settlements.extendleft(reversed(taken.settlements))
        self.entries.extendleft(reversed(taken.entries))


def add_money(money: dict[str, Money], key: str, micros: int, ttl_s: int) -> None:
    held = money.get(key)
    if held is None:
        money[key] = Money(micros, ttl_s, time.monotonic() + ttl_s)
    else:
        held.micros += micros
