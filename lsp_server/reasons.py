"""Why a request went where it went: the one list of routing reasons.

Every decision the router records, every outcome a front door reports (the `gatewayLs.status`
decisions, `gateway-ls complete` on stderr, `gateway-ls stats`, the gateway's
`X-Gateway-LS-Reason` header) carries one of these. The VS Code extension has a label for each
(`clients/vscode/src/status.ts`); a test fails when one is missing. The values are the strings
on the wire, so a `Reason` compares equal to its value.
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    FASTEST = "fastest"
    CONFIG_ORDER = "config-order"
    BREAKER_OPEN = "breaker-open"
    EXPLORE = "explore"
    PROBE = "probe"
    HEDGE_WIN = "hedge-win"
    FALLBACK = "fallback"
    PINNED = "pinned"
    CACHE = "cache"
    SENSITIVE = "sensitive"
    OFFLINE = "offline"
    LOCAL_ONLY = "local-only"
    LOCAL_LOADING = "local-loading"
    LOCAL_DECLINES = "local-declines"
    NO_ENDPOINT = "no-endpoint"
    DEADLINE = "deadline"
    CONFIGURED = "configured"
    INLINE_FALLBACK = "inline-fallback"
    FAILED = "failed"

    @property
    def meaning(self) -> str:
        return MEANINGS[self]


MEANINGS: dict[Reason, str] = {
    Reason.FASTEST: "the endpoint expected to answer first, from measured latency",
    Reason.CONFIG_ORDER: "first in the configuration: no latency measured yet",
    Reason.BREAKER_OPEN: "chosen because a faster endpoint's circuit breaker is open",
    Reason.EXPLORE: "an exploration riding along answered first (learning a rival's latency)",
    Reason.PROBE: "a probe of an endpoint coming back from an outage answered first",
    Reason.HEDGE_WIN: "the hedge sent after `hedge_after_ms` answered before the primary",
    Reason.FALLBACK: "the endpoint before it failed, so the next one answered",
    Reason.PINNED: "the one endpoint the caller asked for by name",
    Reason.CACHE: "served again from the completion cache, no model asked",
    Reason.SENSITIVE: "a sensitive path or a secret in the prompt: kept on the local model",
    Reason.OFFLINE: 'offline (detected, or `offline = "always"`): kept on the local model',
    Reason.LOCAL_ONLY: "no remote endpoint serves this request: the local model answers",
    Reason.LOCAL_LOADING: "only the local model could answer, and it is still loading",
    Reason.LOCAL_DECLINES: (
        "only the local model could answer, and its preset is not asked for this (it does not "
        "predict next edits)"
    ),
    Reason.NO_ENDPOINT: "no endpoint could serve this request",
    Reason.DEADLINE: "nothing answered within the deadline",
    Reason.CONFIGURED: "the configured endpoint for this kind of request",
    Reason.INLINE_FALLBACK: "no refactor endpoint: an inline endpoint's chat answered",
    Reason.FAILED: "every endpoint asked failed",
}
