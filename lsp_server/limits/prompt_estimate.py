"""A reservation's prompt tokens, taught by the upstreams' own counts.

The gateway holds no tokenizer of a remote endpoint's model, and characters per token differ by
model and by text (code, prose, a chat template's markers). Before an endpoint has reported a
count, a prompt is reserved generously (two characters a token, plus a template's markers:
`quota.reserve_tokens`), which holds whatever the upstream counts but, for a budget, reserves
several times what an answer costs. Each answer whose usage the upstream reported teaches its
endpoint's tokens per character; a prompt is then estimated at the highest of that endpoint's
recent ratios, 10 % over: within the upstream's count for prompts like the recent ones, and
above it, so a budget reserved from it still holds what the upstream reports.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

RECENT = 32  # ratios kept per endpoint
MARGIN = 1.1  # over the highest recent ratio
MIN_CHARS = 64  # a shorter prompt's ratio is mostly its template's markers: not learned


class PromptEstimates:
    def __init__(self) -> None:
        self._ratios: dict[str, deque[float]] = {}

    def learn(self, endpoint: str, prompt_chars: int, prompt_tokens: int) -> None:
        """`endpoint` counted `prompt_tokens` for a prompt of `prompt_chars` characters."""
        if prompt_chars < MIN_CHARS or prompt_tokens <= 0:
            return
        ratios = self._ratios.get(endpoint)
        if ratios is None:
            ratios = self._ratios[endpoint] = deque(maxlen=RECENT)
        ratios.append(prompt_tokens / prompt_chars)

    def tokens(self, prompt_chars: int, endpoints: Iterable[str]) -> int | None:
        """The prompt's tokens as the highest count any of `endpoints` is expected to report;
        None while one of them has taught nothing (or there are none)."""
        highest = 0.0
        for endpoint in endpoints:
            ratios = self._ratios.get(endpoint)
            if not ratios:
                return None
            highest = max(highest, max(ratios))
        if not highest:
            return None
        return math.ceil(round(prompt_chars * highest * MARGIN, 6))  # 220.00000000000003 is 220
