"""How sure a comparison of two conditions over the same tasks is."""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence

from bench.harness.percentile import percentile

BOOTSTRAP_ROUNDS = 2000


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], seed: int
) -> tuple[float, float, float]:
    """Mean of b - a, and its 95 % percentile interval over resampled tasks."""
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    rng = random.Random(seed)
    n = len(diffs)
    means = [statistics.fmean(rng.choices(diffs, k=n)) for _ in range(BOOTSTRAP_ROUNDS)]
    return (
        statistics.fmean(diffs),
        percentile(means, 0.025),
        percentile(means, 0.975),
    )
