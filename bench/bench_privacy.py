"""Secret scanning on the keystroke path: what privacy costs per request.

Scans 16 KB of ordinary Python (a prompt window's worth) with the project's rule set, whole and
as a keystroke sees it through `SecretMemo` (the text around the cursor's line unchanged since
the last keystroke), and, when it is installed, with detect-secrets as the peer. Prints a table.
"""

from __future__ import annotations

import inspect
import json
import statistics
import textwrap
import time
from collections.abc import Callable

from lsp_server.cli.table import render_table
from lsp_server.privacy.policy import SecretMemo, first_secret

SIZE = 16 * 1024
RUNS = 200


def ordinary_python(size: int = SIZE) -> str:
    source = "".join(inspect.getsource(module) for module in (textwrap, json.decoder))
    return (source * (size // len(source) + 1))[:size]


def median_us(scan: Callable[[int], object], runs: int = RUNS) -> float:
    timings = []
    for index in range(runs):
        started = time.perf_counter()
        scan(index)
        timings.append((time.perf_counter() - started) * 1e6)
    return statistics.median(timings)


def detect_secrets_us(text: str) -> float | None:
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings
    except ImportError:
        return None
    lines = text.splitlines()

    def scan(_: int) -> None:
        with default_settings():
            for line in lines:
                list(scan_line(line))

    return median_us(scan, runs=5)


def main() -> None:
    text = ordinary_python()
    cursor = len(text) // 2
    memo = SecretMemo()

    def keystroke(index: int) -> None:
        typed = "x" * (index % 8)  # the cursor's line changes; the rest does not
        memo.first_secret_kind(text[:cursor] + typed, text[cursor:])

    rows: list[tuple[str, object]] = [
        ("whole window, rule set", median_us(lambda _: first_secret(text))),
        ("keystroke, rule set with SecretMemo", median_us(keystroke)),
    ]
    peer = detect_secrets_us(text)
    rows.append(("whole window, detect-secrets", peer if peer is not None else "not installed"))
    print(f"\nsecret scan of {SIZE // 1024} KB of ordinary Python, median of runs (µs)\n")
    print(render_table(["scan", "µs"], rows))


if __name__ == "__main__":
    main()
