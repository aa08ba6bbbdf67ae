"""Colon-separated credential files: PostgreSQL's `.pgpass` (`host:port:database:user:password`)
and the `host:port:user:password` lines proxy lists and tools keep.

The search starts at the port field (`:5432:` or `:*:`, a literal the regex engine skips to),
then checks that a host name (a word with a letter, a dot or `*`) comes before it, at the start
of its line or after a space or quote, so a MAC address or a time is not a credential line.
`\\:` escapes a colon in a field, as `.pgpass` allows.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from lsp_server.privacy.pattern_rule import SecretFinding
from lsp_server.privacy.secret_values import non_trivial

_FIELD = r"(?:[^:\s\\\"']|\\.)+"


@dataclass(frozen=True, slots=True)
class ColonFileRule:
    kind: str = "colon-credentials"
    pattern: re.Pattern[str] = re.compile(
        r":(?:\d{1,5}|\*)(?::" + _FIELD + r"){1,2}:(?P<secret>" + _FIELD + r")"
        r"(?=[ \t]*$|[\"'\\])",
        re.MULTILINE,
    )
    host: re.Pattern[str] = re.compile(r"(?:^|[\s\"'=>])(?=[\w.*-]*[A-Za-z.*])[\w.*-]+$")

    def findings(self, text: str, lowered: str) -> Iterator[SecretFinding]:
        for match in self.pattern.finditer(text):
            line_start = text.rfind("\n", max(0, match.start() - 256), match.start()) + 1
            if self.host.search(text[line_start : match.start()]) is None:
                continue
            start, end = match.span("secret")
            if len(text[start:end]) >= 3 and non_trivial(text[start:end]):
                yield SecretFinding(self.kind, start, end)
