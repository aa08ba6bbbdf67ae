"""Rows for `bench/reliability_report.py`: one JSON line per reliability scenario.

A reliability test calls `record_row`; when `GATEWAY_LS_REPORT` names a file (the report script
sets it) the row is appended there, otherwise nothing happens. None marks a number that does not
apply to the scenario.
"""

from __future__ import annotations

import json
import os

REPORT_ENV = "GATEWAY_LS_REPORT"


def record_row(
    scenario: str,
    *,
    requests_sent: int,
    failures_survived: int,
    bytes_leaked: int | None,
    memory_growth_bytes: int | None,
) -> None:
    path = os.environ.get(REPORT_ENV)
    if not path:
        return
    row = {
        "scenario": scenario,
        "requests_sent": requests_sent,
        "failures_survived": failures_survived,
        "bytes_leaked": bytes_leaked,
        "memory_growth_bytes": memory_growth_bytes,
    }
    with open(path, "a", encoding="utf-8") as report:
        report.write(json.dumps(row) + "\n")
