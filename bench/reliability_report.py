"""The reliability suite as one table: each scenario, what was thrown at the server, what it cost.

Runs the reliability test files under pytest with `GATEWAY_LS_REPORT` naming a JSON-lines file;
each scenario appends one row there (`tests/support/report.py`), and this script prints
them: scenario, requests sent, keystrokes answered within their deadline + 100 ms, requests
failed over to another endpoint, failures survived, bytes leaked, memory (RSS) growth. A dash is
a number that does not apply to the scenario. Tests that fail still print their rows if they got
that far; the exit code is pytest's.

Run from the repository root: `python -m bench.reliability_report [TEST_FILE ...]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from lsp_server.cli.table import render_table

REPORT_ENV = "GATEWAY_LS_REPORT"  # the JSON-lines file the scenarios append their rows to
RELIABILITY_TESTS = (
    "tests/reliability",
    "tests/lsp/test_lsp_fuzz.py",
    "tests/privacy/test_privacy_proof.py",
    "tests/config/test_config_faults.py",
)
HEADERS = (
    "scenario",
    "requests sent",
    "keystrokes in time",
    "failed over",
    "failures survived",
    "bytes leaked",
    "RSS growth",
)


def run_suite(test_files: list[str], report: Path) -> int:
    env = {**os.environ, REPORT_ENV: str(report)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *test_files]
    return subprocess.run(command, env=env, check=False).returncode


def read_rows(report: Path) -> list[dict[str, Any]]:
    if not report.exists():
        return []
    lines = report.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def memory(megabytes: float | None) -> str | None:
    return None if megabytes is None else f"{megabytes:+.1f} MB"


def in_time(row: dict[str, Any]) -> str | None:
    keystrokes = row.get("keystrokes")
    return None if keystrokes is None else f"{row.get('in_time') or 0}/{keystrokes}"


def table(rows: list[dict[str, Any]]) -> str:
    cells = [
        (
            row["scenario"],
            row["requests"],
            in_time(row),
            row.get("failed_over"),
            row["failures_survived"],
            row["bytes_leaked"],
            memory(row["memory_growth_mb"]),
        )
        for row in rows
    ]
    return render_table(HEADERS, cells)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reliability_report")
    parser.add_argument("test_files", nargs="*", help="default: the reliability suite")
    args = parser.parse_args(argv)
    test_files = args.test_files or [f for f in RELIABILITY_TESTS if Path(f).exists()]
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "reliability.jsonl"
        status = run_suite(test_files, report)
        rows = read_rows(report)
    print()
    print(table(rows) if rows else "no scenario reported a row")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
