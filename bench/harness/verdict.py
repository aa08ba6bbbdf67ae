"""How a benchmark's report says whether a target was met."""

from __future__ import annotations


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"
