"""The router's status as `gatewayLs.status`, `gateway-ls stats` and `/gateway-ls/status`
show it: counts and figures only, never content."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from lsp_server.backends.local_model import LocalModel, LocalState
from lsp_server.config.loader import config_to_dict
from lsp_server.config.model import Config
from lsp_server.routing.circuit_breaker import BreakerState
from lsp_server.routing.edit_outcomes import EditOutcomes
from lsp_server.routing.endpoint_pool import Endpoint
from lsp_server.routing.hedge_budget import HedgeBudget
from lsp_server.routing.inline_outcomes import InlineOutcomes
from lsp_server.routing.outcomes import Outcomes


class ConfigView:
    """The configuration as the status shows it, made again only when the configuration is
    replaced (it is a frozen value); read, never changed, by whoever reads the status."""

    def __init__(self) -> None:
        self._seen: tuple[Config | None, dict[str, Any]] = (None, {})

    def of(self, config: Config) -> dict[str, Any]:
        seen, view = self._seen
        if seen is not config:
            view = config_to_dict(config)
            self._seen = (config, view)
        return view


def local_status(model: LocalModel | None) -> dict[str, Any]:
    return {
        "enabled": model is not None,
        "state": model.state.value if model is not None else LocalState.DISABLED.value,
        "model": str(model.model_path or "") if model is not None else "",
        "error": model.load_error if model is not None else None,
        "fim": model.fim_supported if model is not None else None,
        "next_edit": model.next_edit_supported if model is not None else None,
        **(model.details() if model is not None else {}),
    }


def request_counts(inline: HedgeBudget, edits: HedgeBudget, chats: HedgeBudget) -> dict[str, int]:
    """Requests and hedged requests of each kind, as the hedge budgets counted them."""
    return {
        "inline_requests": inline.inline_requests,
        "hedged_requests": inline.hedged_requests,
        "edit_requests": edits.inline_requests,
        "hedged_edit_requests": edits.hedged_requests,
        "chat_requests": chats.inline_requests,
        "hedged_chat_requests": chats.hedged_requests,
    }


def endpoint_status(endpoint: Endpoint, outcomes: Outcomes) -> dict[str, Any]:
    inline = outcomes.inline.status(endpoint.name) if "inline" in endpoint.roles else None
    return {
        **_endpoint_status(endpoint),
        "inline": inline,
        "edit": _edit_status(endpoint, outcomes.edits),
    }


def _edit_status(endpoint: Endpoint, edit_outcomes: EditOutcomes) -> dict[str, Any] | None:
    """Next-edit traffic of one endpoint: latency, and how often what it proposed was accepted
    or dismissed once shown."""
    if "edit" not in endpoint.roles:
        return None
    stats = endpoint.edit_stats
    return {
        "requests": stats.requests,
        "wins": stats.wins,
        "errors": stats.errors,
        "p50_ms": _round(stats.percentile(0.5)),
        "p95_ms": _round(stats.percentile(0.95)),
        "cost_usd": round(stats.cost_usd, 6),
        **edit_outcomes.status(endpoint.name),
    }


def suggestion_counts(
    endpoints: Iterable[Endpoint], inline: InlineOutcomes, edits: EditOutcomes
) -> list[tuple[str, str, int, int, int, int]]:
    """(endpoint, kind, shown, accepted, kept characters, inserted characters) per endpoint and
    kind of suggestion it serves: "inline" (shown: offered) and "next_edit"."""
    kinds = (
        ("inline", "inline", inline.offered, inline.accepted, inline.chars),
        ("edit", "next_edit", edits.shown, edits.accepted, edits.chars),
    )
    return [
        (e.name, kind, shown[e.name], accepted[e.name], chars.kept[e.name], chars.inserted[e.name])
        for e in endpoints
        for role, kind, shown, accepted, chars in kinds
        if role in e.roles
    ]


def health(endpoint: Endpoint) -> str:
    """The breaker's state, or, while it is closed, whether errors are frequent."""
    state = endpoint.breaker.state
    if state is BreakerState.CLOSED:
        return "degraded" if (endpoint.stats.error_rate.value or 0.0) > 0.2 else "healthy"
    return state.value


def _endpoint_status(endpoint: Endpoint) -> dict[str, Any]:
    stats = endpoint.stats
    health_now = health(endpoint)
    config = endpoint.config
    return {
        "name": endpoint.name,
        "kind": config.kind if config else "local",
        "model": config.model if config else "local",
        "roles": list(endpoint.roles),
        "health": health_now,
        "requests": stats.requests,
        "wins": stats.wins,
        "errors": stats.errors,
        "hedges": stats.hedges,
        "tokens": stats.tokens,
        "cost_usd": round(stats.cost_usd, 6),
        "p50_ms": _round(stats.percentile(0.5)),
        "p95_ms": _round(stats.percentile(0.95)),
        "ewma_ms": _round(stats.total_ms.value),
        "first_token_ewma_ms": _round(stats.first_token_ms.value),
        "first_token_estimate_ms": _round(math.exp(stats.ttft.mean) if stats.ttft.known else None),
        "error_rate": round(stats.error_rate.value or 0.0, 3),
        "retry_in_s": round(endpoint.breaker.retry_in_s, 1),
        "last_error": endpoint.last_error,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
