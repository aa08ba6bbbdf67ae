"""The vocabulary of admission: what a request may cost, what a store answers, what was spent.

Money is counted in integer micro-dollars: a price in dollars per million tokens is exactly
micro-dollars per token, so no rounding accumulates across requests.
"""

from __future__ import annotations

import datetime as dt
import enum
import math
from dataclasses import dataclass

from lsp_server.config.model import BudgetPeriod, Limits, Price

WINDOW_S = 60.0  # rpm and tpm are per minute
# A reservation's prompt estimate: two characters a token is more than any tokenizer of code
# counts, so a budget reserved from it holds what the upstream then reports.
RESERVE_CHARS_PER_TOKEN = 2
RESERVE_OVERHEAD_TOKENS = 16  # chat templates' role and turn markers


class LimitKind(enum.Enum):
    """Which limit refused a request; the value is the error's `type`."""

    REQUESTS = "requests"
    TOKENS = "tokens"
    CONCURRENCY = "concurrency"
    BUDGET = "budget"


@dataclass(frozen=True, slots=True)
class Window:
    """One per-minute limit as OpenAI's `x-ratelimit-*` headers tell it."""

    limit: int
    remaining: int
    reset_s: float  # until the limit is whole again


@dataclass(frozen=True, slots=True)
class Verdict:
    """A store's answer to one admission."""

    refused: LimitKind | None
    retry_after_s: float = 0.0
    requests: Window | None = None
    tokens: Window | None = None


@dataclass(frozen=True, slots=True)
class Ask:
    """One admission as a store sees it: every scope the request touches, in one call."""

    client: str
    lease_id: str
    limits: Limits
    tokens: int  # reserved against tpm
    budget_micros: int | None  # the period's budget; None: no budget
    reserve_micros: int
    period: str  # the budget period's key, "2026-12-04" or "2026-12"
    period_ttl_s: int  # the period's key outlives the period by a day


@dataclass(frozen=True, slots=True)
class Spent:
    """What an answer cost, as the front door learned it."""

    endpoint: str  # "" when nothing answered
    input_tokens: int
    output_tokens: int
    reported: bool  # the upstream's counts, not estimates


def reserve_tokens(prompt_chars: int, max_tokens: int) -> int:
    return -(-prompt_chars // RESERVE_CHARS_PER_TOKEN) + RESERVE_OVERHEAD_TOKENS + max_tokens


def micros(price: Price, input_tokens: int, output_tokens: int) -> int:
    return math.ceil(price.input * input_tokens + price.output * output_tokens)


def budget_micros(limits: Limits) -> int | None:
    return None if limits.budget_usd is None else round(limits.budget_usd * 1_000_000)


def period_key(period: BudgetPeriod, now: dt.datetime) -> str:
    return now.strftime("%Y-%m-%d" if period == "day" else "%Y-%m")


def period_start(period: BudgetPeriod, now: dt.datetime) -> dt.datetime:
    """The first instant (UTC) of the period `now` is in."""
    start = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return start if period == "day" else start.replace(day=1)


def period_end(period: BudgetPeriod, now: dt.datetime) -> dt.datetime:
    """The first instant (UTC) of the next period."""
    start = period_start(period, now)
    if period == "day":
        return start + dt.timedelta(days=1)
    return (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
