"""Who a refactor asks, in order: the `refactor` endpoints by health (none configured: the
inline endpoints' chat), then the local model, under the refactor's long deadline; a request
that must stay on this machine, the local model alone. The sequential route asks them."""

from __future__ import annotations

from lsp_server.backends.base import ChatRequest
from lsp_server.failures import EndpointFailure, RefusalCode, Refused
from lsp_server.reasons import Reason
from lsp_server.routing.answerers import Answerers
from lsp_server.routing.decision_log import DecisionKind
from lsp_server.routing.endpoint_pool import Endpoint, healthy_first
from lsp_server.routing.sequential_route import SequentialPlan, capped


def refactor_plan(
    answerers: Answerers,
    *,
    held: Reason | None,
    deadline_s: float,
    local_max_tokens: int | None,
) -> SequentialPlan:
    """The plan for one refactor, `answerers` being who may serve it (the gate's verdict in
    them) and `held` what its route found. Each endpoint is asked for at most its own
    `max_tokens`, the local model for at most `local_max_tokens`. Raises `Refused` when
    nothing may be asked."""
    candidates, reason = _candidates(answerers)
    if not candidates:
        if answerers.stay_local is not None:
            message = (
                f"this document must stay on this machine ({answerers.stay_local}) and the "
                "local model is disabled ([local] enabled = false)"
            )
        else:
            message = "no refactor endpoint is configured and the local model is off"
        raise Refused(RefusalCode.NO_ENDPOINT_AVAILABLE, message)
    fim_fallback = reason is Reason.INLINE_FALLBACK

    def bounded(request: ChatRequest, endpoint: Endpoint) -> ChatRequest:
        config = endpoint.config
        return capped(request, config.max_tokens if config is not None else local_max_tokens)

    def requests_fault(endpoint: Endpoint, failure: EndpointFailure) -> bool:
        # A fill-in-the-middle model asked to chat may not: not its health.
        return failure.requests_fault or (fim_fallback and not endpoint.is_local)

    return SequentialPlan(
        kind=DecisionKind.REFACTOR,
        candidates=candidates,
        reason=reason,
        held=held,
        deadline_s=deadline_s,
        bounded=bounded,
        requests_fault=requests_fault,
        restart_after_passed_on=True,
    )


def _candidates(answerers: Answerers) -> tuple[list[Endpoint], Reason]:
    local = answerers.local
    if answerers.stay_local is not None:
        return ([local] if local is not None else []), answerers.stay_local
    remotes = list(answerers.remotes)
    if answerers.inline_fallback:
        # No reasoning endpoint: the inline endpoints' chat, then the local model.
        reason = Reason.INLINE_FALLBACK
    else:
        reason = Reason.CONFIGURED if remotes else Reason.FALLBACK
    healthy, tripped = healthy_first(remotes)
    ordered = healthy + tripped
    if local is not None:
        ordered.append(local)
    return ordered, reason
