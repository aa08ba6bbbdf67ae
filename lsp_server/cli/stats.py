"""`gateway-ls stats`: the routing statistics of running servers, as tables."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

import httpx

from lsp_server.cli.table import render_table
from lsp_server.routing.status_file import read_running


def print_usage(*, url: str, period: str, as_json: bool, token_env: Sequence[str] = ()) -> int:
    """Spend and tokens per client and endpoint in the current UTC `period` (day or month)."""
    try:
        usage = _fetch(url, _token(token_env), f"/v1/gateway-ls/usage?period={period}", 30)
    except (httpx.HTTPError, ValueError) as error:
        print(f"gateway-ls: cannot read {url}: {error}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(usage, indent=2))
        return 0
    print(format_usage(usage))
    return 0


def format_usage(usage: dict[str, Any]) -> str:
    rows = [row for row in usage.get("rows", []) if isinstance(row, dict)]
    table = render_table(
        ["client", "endpoint", "requests", "input tokens", "output tokens", "cost $"],
        [
            (
                r.get("client"),
                r.get("endpoint"),
                r.get("requests"),
                r.get("input_tokens"),
                r.get("output_tokens"),
                f"{float(r.get('cost_usd') or 0):.4f}",
            )
            for r in rows
        ],
    )
    total = sum(float(r.get("cost_usd") or 0) for r in rows)
    source = "all gateways" if usage.get("source") == "shared" else "this gateway only"
    header = f"usage since {usage.get('since', '?')} ({source}): ${total:.4f}"
    return f"{header}\n\n{table}"


def _token(token_env: Sequence[str]) -> str | None:
    return next((os.environ[v] for v in token_env if os.environ.get(v)), None)


def print_stats(*, url: str | None, as_json: bool, token_env: Sequence[str] = ()) -> int:
    """`token_env` names the variables that may hold a bearer token for the gateway; the first
    one set is sent."""
    if url is not None:
        try:
            statuses = [_fetch(url, _token(token_env))]
        except (httpx.HTTPError, ValueError) as error:
            print(f"gateway-ls: cannot read {url}: {error}", file=sys.stderr)
            return 1
    else:
        statuses = read_running()
    if not statuses:
        print("no running gateway-ls server found", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(statuses, indent=2))
        return 0
    for status in statuses:
        print(format_status(status))
        print()
    return 0


def _fetch(
    url: str, token: str | None, path: str = "/v1/gateway-ls/status", timeout_s: float = 5
) -> dict[str, Any]:
    headers = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    response = httpx.get(url.rstrip("/") + path, headers=headers, timeout=timeout_s)
    response.raise_for_status()
    data = response.json()
    if not isinstance(data, dict):
        raise ValueError("the answer is not a JSON object")
    return data


def format_status(status: dict[str, Any]) -> str:
    local = status.get("local") or {}
    header = (
        f"{status.get('kind', 'server')} pid {status.get('pid', '?')}: "
        f"offline {status.get('offline')} (active: {status.get('offline_active')}), "
        f"local model {local.get('state', '-')}, "
        f"{status.get('inline_requests', 0)} inline requests, "
        f"{status.get('hedged_requests', 0)} hedged"
    )
    endpoints = render_table(
        ["endpoint", "kind", "health", "requests", "wins", "errors", "p50 ms", "p95 ms", "cost $"],
        [
            (
                e.get("name"),
                e.get("kind"),
                e.get("health"),
                e.get("requests"),
                e.get("wins"),
                e.get("errors"),
                e.get("p50_ms"),
                e.get("p95_ms"),
                f"{e.get('cost_usd', 0.0):.4f}",
            )
            for e in status.get("endpoints", [])
        ],
    )
    decisions = render_table(
        ["time", "kind", "endpoint", "reason", "ms", "tokens", "detail"],
        [
            (
                str(d.get("time", ""))[11:23],
                d.get("kind"),
                d.get("endpoint"),
                d.get("reason"),
                d.get("latency_ms"),
                d.get("tokens"),
                d.get("detail"),
            )
            for d in status.get("decisions", [])[-10:]
        ],
    )
    parts = [header]
    shared = status.get("shared_state")
    if isinstance(shared, dict):
        parts.append(format_shared_state(shared))
    parts += ["", endpoints]
    inline = format_inline_outcomes(status)
    if inline:
        parts += ["", inline]
    edits = format_edit_traffic(status)
    if edits:
        parts += ["", edits]
    clients = status.get("clients")
    if isinstance(clients, list):
        rows = [(c.get("name"), c.get("requests")) for c in clients if isinstance(c, dict)]
        rows.append(("(refused)", status.get("refused", 0)))
        parts += ["", render_table(["client", "requests"], rows)]
    parts += ["", f"last decisions:\n{decisions}"]
    return "\n".join(parts)


def format_inline_outcomes(status: dict[str, Any]) -> str:
    """What became of the inline suggestions each endpoint answered: offered, the share the
    editor reported accepted, and how much of the accepted text was still there a while later
    (the kept rate); empty until a suggestion was offered."""
    rows = []
    for e in status.get("endpoints", []):
        inline = e.get("inline")
        if isinstance(inline, dict) and inline.get("offered"):
            rows.append(
                (
                    e.get("name"),
                    inline.get("offered"),
                    inline.get("accepted"),
                    inline.get("acceptance_rate"),
                    inline.get("kept_rate"),
                )
            )
    if not rows:
        return ""
    return "inline suggestions:\n" + render_table(
        ["inline endpoint", "offered", "accepted", "acceptance", "kept"], rows
    )


def format_edit_traffic(status: dict[str, Any]) -> str:
    """Next-edit traffic per `edit` endpoint: latency, what became of the edits shown, and
    how much of the accepted ones was still there a while later (the kept rate)."""
    rows = []
    for e in status.get("endpoints", []):
        edit = e.get("edit")
        if not isinstance(edit, dict):
            continue
        rows.append(
            (
                e.get("name"),
                edit.get("requests"),
                edit.get("wins"),
                edit.get("errors"),
                edit.get("p50_ms"),
                edit.get("p95_ms"),
                edit.get("shown"),
                edit.get("acceptance_rate"),
                edit.get("dismissal_rate"),
                edit.get("kept_rate"),
            )
        )
    if not rows:
        return ""
    table = render_table(
        [
            "edit endpoint",
            "requests",
            "wins",
            "errors",
            "p50 ms",
            "p95 ms",
            "shown",
            "accepted",
            "dismissed",
            "kept",
        ],
        rows,
    )
    total = status.get("edit_requests", 0)
    return f"next edits: {total} requests, {status.get('hedged_edit_requests', 0)} hedged\n{table}"


def format_shared_state(shared: dict[str, Any]) -> str:
    """One line: where the shared state is, whether it is connected and how fresh it is."""
    where = shared.get("url", "?")
    age = shared.get("age_s")
    fresh = "never synced" if age is None else f"last synced {age} s ago"
    if shared.get("connected"):
        return (
            f"shared state {where}: connected, {shared.get('peers', 0)} other gateway(s), {fresh}"
        )
    error = shared.get("error")
    return f"shared state {where}: NOT connected ({error or 'connecting'}), {fresh}"
