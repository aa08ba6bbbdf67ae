"""Gateway chat (and the Responses API bridged onto it), routed by task class.

The `model` a client names is a task class or an endpoint:

- `auto` (and `gateway-ls`): the `agent` endpoints, fastest first by live latency (expected time
  to the first token, inflated by the error rate, as inline ranks them). With no `agent`
  endpoint configured, the `refactor` endpoints stand in (reason `configured`), and with none of
  those either the chat of the `inline` endpoints (`inline-fallback`), as refactors fall back:
  a configuration written before the `agent` role still serves agents.
- `fast`: every remote endpoint that chats (roles `agent` or `refactor`, or `inline` without
  fill-in-the-middle), fastest first.
- `reasoning`: the `refactor` endpoints, healthy ones first in configured order.
- `local`: the local model alone.
- an endpoint's name: that endpoint alone.

The local model is the last resort of every class. Privacy wins over all of it: a request that
must stay on this machine goes to the local model or nowhere. Endpoints with an open breaker go
after the healthy ones; successes and failures feed the same statistics and breakers as inline
traffic. An attempt that has passed anything on to the caller is never replaced by another.

Hedging: a request is hedged (a second endpoint asked when the first has not started answering
by its usual 95th-percentile time to first token) only when it cannot call a tool, or when
`routing.hedge_tool_calls` says so: two answers that both call a tool would have the agent run
it twice. Hedges share the inline hedge budget's ratio (`max_hedge_ratio`).
"""

from __future__ import annotations

from collections.abc import Callable

from lsp_server.backends.base import ChatRequest
from lsp_server.config.model import Config
from lsp_server.config.model_names import AUTO, AUTOMATIC_MODELS, LOCAL, TASK_CLASSES, unknown_model
from lsp_server.failures import RefusalCode, Refused
from lsp_server.reasons import Reason
from lsp_server.routing.decision_log import DecisionKind
from lsp_server.routing.endpoint_pool import Endpoint, EndpointPool, healthy_first
from lsp_server.routing.gate import Gate
from lsp_server.routing.sequential_route import (
    ChatCall,
    SequentialPlan,
    capped,
    chat_events,
    relay_events,
)

PRIOR_MS = 1000.0  # before any data: the configured order, a step apart


class ChatRoute:
    """Chooses the endpoints for one chat (the `Router`'s sequential route asks them)."""

    def __init__(self, pool: EndpointPool, *, config: Callable[[], Config], gate: Gate) -> None:
        self._pool = pool
        self._config = config
        self._gate = gate

    # -- choosing --------------------------------------------------------------------------

    def plan(
        self, model: str, request: ChatRequest, *, local_only: Reason | None, relay: bool = False
    ) -> SequentialPlan:
        """The endpoints to ask for `request`, in order. Raises `Refused` when there is
        nothing to ask (`model_not_found`, `model_not_supported`, `no_endpoint_available`,
        `tools_not_supported`). `local_only`: why the conversation must stay here, as the
        chat service found it; the gate adds the offline mode. `relay`: the caller passes the
        answer on as it streams, and takes an upstream's own events where one can give them."""
        return self._choose(
            model, request, local_only=local_only, call=relay_events if relay else chat_events
        )

    def _choose(
        self, model: str, request: ChatRequest, *, local_only: Reason | None, call: ChatCall
    ) -> SequentialPlan:
        held = local_only
        local_only = self._gate.verdict(held)
        model = model or AUTO
        if model in AUTOMATIC_MODELS:
            model = AUTO
        named = self._pool.get(model)
        if named is not None and named.is_local:
            named = None
        if named is None and model not in TASK_CLASSES:
            raise unknown_model(self._config(), model, "agent")
        if named is not None and not self._chats(named):
            raise Refused(
                RefusalCode.MODEL_NOT_SUPPORTED,
                f"endpoint {model!r} does not serve chat (its roles: {', '.join(named.roles)}); "
                f"use model {AUTO!r} to route automatically",
            )
        if local_only is not None or model == LOCAL:
            why = local_only or Reason.PINNED  # `local` names the local model
            here = self._local_only(request, local_only)
            return self._plan(here, why, held, may_hedge=False, call=call)
        if named is not None:
            return self._plan([named], Reason.PINNED, held, may_hedge=False, call=call)
        remotes, reason = self._class_endpoints(model)
        local = self._pool.local
        candidates = remotes + ([local] if local is not None else [])
        if not candidates:
            raise Refused(
                RefusalCode.NO_ENDPOINT_AVAILABLE,
                "no endpoint serves chat and the local model is disabled ([local] enabled = false)",
            )
        may_hedge = not request.tools or self._config().routing.hedge_tool_calls
        may_hedge = may_hedge and len(remotes) > 1
        return self._plan(candidates, reason, held, may_hedge=may_hedge, call=call)

    def may_answer(self, model: str) -> list[Endpoint]:
        """The remote endpoints a chat naming `model` may be asked of, before its privacy is
        judged: the local model, which may answer any, is left out (it costs nothing). None
        for a model `plan` would refuse."""
        model = model or AUTO
        if model in AUTOMATIC_MODELS:
            model = AUTO
        named = self._pool.get(model)
        if named is not None:
            return [] if named.is_local or not self._chats(named) else [named]
        if model == LOCAL or model not in TASK_CLASSES:
            return []
        return self._class_endpoints(model)[0]

    def _plan(
        self,
        candidates: list[Endpoint],
        reason: Reason,
        held: Reason | None,
        *,
        may_hedge: bool,
        call: ChatCall,
    ) -> SequentialPlan:
        return SequentialPlan(
            kind=DecisionKind.CHAT,
            candidates=candidates,
            reason=reason,
            held=held,
            deadline_s=self._config().routing.refactor_deadline_ms / 1000,
            may_hedge=may_hedge,
            bounded=_chat_bounded,
            requests_fault=lambda endpoint, failure: failure.requests_fault,
            call=call,
        )

    def _class_endpoints(self, model: str) -> tuple[list[Endpoint], Reason]:
        remotes = [e for e in self._pool.all() if not e.is_local]
        if model == "reasoning":
            chosen = [e for e in remotes if "refactor" in e.roles]
            healthy, tripped = healthy_first(chosen)
            return healthy + tripped, Reason.CONFIGURED
        if model == "fast":
            return self._by_latency([e for e in remotes if self._chats(e)]), Reason.FASTEST
        agents = [e for e in remotes if "agent" in e.roles]
        if agents:
            return self._by_latency(agents), Reason.FASTEST
        # No agent endpoint: the refactor endpoints chat for agents, else the inline ones.
        refactor = [e for e in remotes if "refactor" in e.roles]
        if refactor:
            return self._by_latency(refactor), Reason.CONFIGURED
        inline = [e for e in remotes if "inline" in e.roles]
        return self._by_latency(inline), Reason.INLINE_FALLBACK

    def _chats(self, endpoint: Endpoint) -> bool:
        roles = endpoint.roles
        if "agent" in roles or "refactor" in roles:
            return True
        if endpoint.config is not None and not endpoint.config.fim:
            return True  # an inline endpoint that already answers through its chat
        # A FIM endpoint chats only as the fallback of a configuration with no chat endpoint.
        return not any(
            "agent" in e.roles or "refactor" in e.roles for e in self._pool.all() if not e.is_local
        )

    def _by_latency(self, endpoints: list[Endpoint]) -> list[Endpoint]:
        """Healthy endpoints fastest first (expected first token, errors counted in), then
        those whose breaker is open or probing, as a last resort."""
        order = {e.name: i for i, e in enumerate(endpoints)}

        def expected(endpoint: Endpoint) -> float:
            return endpoint.stats.expected_ms(PRIOR_MS * (1 + 0.05 * order[endpoint.name]))

        healthy, tripped = healthy_first(endpoints)
        return sorted(healthy, key=expected) + sorted(tripped, key=expected)

    def _local_only(self, request: ChatRequest, local_only: Reason | None) -> list[Endpoint]:
        local = self._pool.local
        why = (
            f"this request must stay on this machine ({local_only.value})"
            if local_only
            else "model 'local' names the local model"
        )
        if local is None:
            raise Refused(
                RefusalCode.NO_ENDPOINT_AVAILABLE,
                f"{why} and the local model is disabled ([local] enabled = false)",
            )
        model = self._pool.local_model
        if request.uses_tools and model is not None and model.tools_supported is False:
            raise Refused(
                RefusalCode.TOOLS_NOT_SUPPORTED,
                f"{why} and the local model cannot call tools (its chat template has no tool "
                "calling); configure a local model whose template has, or send no tools",
            )
        return [local]


def _chat_bounded(request: ChatRequest, endpoint: Endpoint) -> ChatRequest:
    """The client's token cap, up to the endpoint's `chat_max_tokens`."""
    return capped(request, endpoint.config.chat_max_tokens if endpoint.config else None)
