"""The one percentile every benchmark's table uses (its definition: bench/README.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The `q` quantile (0 ≤ q ≤ 1) of `values` by linear interpolation between the two
    closest ranks: NaN when there are none."""
    if not 0 <= q <= 1:
        raise ValueError(f"a quantile is between 0 and 1, not {q}")
    if not values:
        return math.nan
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (position - below) * (ordered[above] - ordered[below])
