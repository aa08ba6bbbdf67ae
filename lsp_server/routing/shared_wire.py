"""What gateways tell each other through the shared state store, and the checks on what they hear.

Only endpoint names and numbers travel: an update is the JSON object

    {"v": 1, "from": 81985529216486895,
     "samples": [["mercury", 0, 41.5, 88.0, 12], ["codestral", 2, null, null, 0]],
     "opened": [["codestral", 30.0]], "closed": ["mercury"],
     "inline": 12, "hedged": 1}

`from` is a random number per process (to skip its own updates), a sample is
[endpoint, kind, first-token ms, total ms, tokens], `opened` gives the seconds the breaker stays
open from now (no wall clocks, so hosts need not agree on the time), `inline`/`hedged` count the
requests since the sender's previous update. (A gateway that starts later reads the latency
snapshots of `stats_snapshot` instead.) Whatever is read back is untrusted: anything malformed,
out of range or about an endpoint this process does not know is dropped, never raised.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, TypeGuard

VERSION = 1
MAX_MESSAGE_BYTES = 256 * 1024
MAX_ITEMS = 2000  # samples or breaker events in one update
MAX_NAME_CHARS = 200
MAX_MS = 3_600_000.0
MAX_OPEN_S = 3600.0
MAX_COUNT = 1_000_000
MAX_TOKENS = 1_000_000
SAMPLE_FIELDS = 5  # endpoint, kind, first-token ms, total ms, tokens


class SampleKind(IntEnum):
    SUCCESS = 0  # answered: first-token and total latency, tokens streamed
    CENSORED = 1  # lost a race: took at least `total_ms` (its first token may have come)
    FAILURE = 2  # failed: counts toward the error rate only


_KINDS = frozenset(kind.value for kind in SampleKind)


@dataclass(frozen=True, slots=True)
class Sample:
    endpoint: str
    kind: SampleKind
    first_token_ms: float | None = None
    total_ms: float | None = None
    tokens: int = 0


@dataclass(slots=True)
class Update:
    sender: int
    samples: list[Sample] = field(default_factory=list)
    opened: dict[str, float] = field(default_factory=dict)  # endpoint -> seconds left open
    closed: set[str] = field(default_factory=set)
    inline: int = 0
    hedged: int = 0


def encode_update(update: Update) -> bytes:
    return _dumps(
        {
            "v": VERSION,
            "from": update.sender,
            "samples": [_sample_row(s) for s in update.samples],
            "opened": [[name, round(seconds, 3)] for name, seconds in update.opened.items()],
            "closed": sorted(update.closed),
            "inline": update.inline,
            "hedged": update.hedged,
        }
    )


def decode_update(data: bytes, known: Callable[[str], bool]) -> Update | None:
    body = _loads(data)
    if not isinstance(body, dict) or body.get("v") != VERSION:
        return None
    sender = body.get("from")
    if not _is_int(sender):
        return None
    update = Update(sender)
    for row in _bounded_list(body.get("samples")):
        if isinstance(row, list) and len(row) == SAMPLE_FIELDS and _name(row[0], known):
            sample = _sample(row[0], row[1:])
            if sample is not None:
                update.samples.append(sample)
    for row in _bounded_list(body.get("opened")):
        if isinstance(row, list) and len(row) == 2 and _name(row[0], known):
            seconds = _number(row[1], MAX_OPEN_S)
            if seconds is not None and seconds > 0:
                update.opened[row[0]] = seconds
    update.closed = {n for n in _bounded_list(body.get("closed")) if _name(n, known)}
    update.inline = _count(body.get("inline"))
    update.hedged = _count(body.get("hedged"))
    return update


def _sample_row(sample: Sample) -> list[Any]:
    first, total = _ms(sample.first_token_ms), _ms(sample.total_ms)
    return [sample.endpoint, int(sample.kind), first, total, sample.tokens]


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _sample(endpoint: str, fields: list[Any]) -> Sample | None:
    kind_value, first_raw, total_raw, tokens_raw = fields
    if not _is_int(kind_value) or kind_value not in _KINDS:
        return None
    kind = SampleKind(kind_value)
    if kind is SampleKind.FAILURE:
        return Sample(endpoint, kind)
    first = _number(first_raw, MAX_MS)
    total = _number(total_raw, MAX_MS)
    if total is None or (first_raw is not None and first is None):
        return None
    if not _is_int(tokens_raw) or not 0 <= tokens_raw <= MAX_TOKENS:
        return None
    return Sample(endpoint, kind, first, total, tokens_raw if kind is SampleKind.SUCCESS else 0)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


def _loads(data: bytes) -> Any:
    if not isinstance(data, bytes) or len(data) > MAX_MESSAGE_BYTES:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def _bounded_list(value: Any) -> list[Any]:
    return value[:MAX_ITEMS] if isinstance(value, list) else []


def _name(value: Any, known: Callable[[str], bool]) -> bool:
    return isinstance(value, str) and len(value) <= MAX_NAME_CHARS and known(value)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any, limit: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and 0 <= number <= limit else None


def _count(value: Any) -> int:
    return value if _is_int(value) and 0 <= value <= MAX_COUNT else 0
