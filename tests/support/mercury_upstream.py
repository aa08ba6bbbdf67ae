"""A scripted Mercury: it answers a next-edit prompt by finishing the rename its diff history
shows, in the region it was given, as Mercury does (a fenced region)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

REGION = re.compile(r"<\|code_to_edit\|>\n(?P<region>.*?)\n<\|/code_to_edit\|>", re.DOTALL)
RENAME = re.compile(r"^-.*\b(?P<old>\w+)\b.*\n\+.*", re.MULTILINE)


def user_content(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    return "\n".join(m.get("content") or "" for m in messages if m.get("role") == "user")


def finish_the_rename(old: str, new: str) -> Callable[[dict[str, Any]], str]:
    """Answers with the region, `old` renamed to `new`, fenced; no region: nothing."""

    def answer(body: dict[str, Any]) -> str:
        match = REGION.search(user_content(body))
        if match is None:
            return ""
        region = match["region"].replace("<|cursor|>", "")
        return "```python\n" + re.sub(rf"\b{old}\b", new, region) + "\n```"

    return answer
