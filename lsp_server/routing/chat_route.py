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

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lsp_server.backends.base import (
    BackendError,
    ChatEvent,
    ChatRequest,
    FailureKind,
    ToolCall,
    ToolCallDelta,
    Usage,
    unexpected_failure,
)
from lsp_server.backends.tool_calls import ToolCallStream
from lsp_server.config.model import Config
from lsp_server.reasons import Reason
from lsp_server.routing.circuit_breaker import BreakerState
from lsp_server.routing.decision_log import DecisionKind
from lsp_server.routing.endpoint_pool import Endpoint, EndpointPool
from lsp_server.routing.outcomes import Outcomes

log = logging.getLogger(__name__)

AUTO = "auto"
AUTOMATIC_MODELS = (AUTO, "gateway-ls")  # model names that mean "route automatically"
TASK_CLASSES = (AUTO, "fast", "reasoning", "local")
# Statuses by which an upstream refuses the request itself, not its own health.
REJECTED_STATUSES = frozenset({400, 413, 422})
HEDGE_MIN_SAMPLES = 10  # first-token samples before a chat is hedged at all
HEDGE_BURST = 5
PRIOR_MS = 1000.0  # before any data: the configured order, a step apart


class UnknownModel(LookupError):
    """The `model` names no task class and no endpoint; `names` are the valid ones."""

    def __init__(self, model: str, names: list[str]) -> None:
        super().__init__(f"the model {model!r} does not exist here; use one of: {', '.join(names)}")
        self.names = names


class NotAChatModel(ValueError):
    """The `model` names an endpoint that does not serve chat."""


class ChatRefused(Exception):
    """Nothing may be asked at all; `code` says why in a word a client can read:
    `no_endpoint_available` (nothing configured or allowed can serve it) or
    `tools_not_supported` (it needs tool calls, and the only model allowed has none)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class ChatFailed(Exception):
    """Every endpoint asked failed; `errors` are their failures, in the order asked."""

    def __init__(self, errors: list[BackendError], detail: str) -> None:
        super().__init__(detail)
        self.errors = errors

    @property
    def rejection(self) -> BackendError | None:
        """The last failure if it was the upstream refusing the request itself (a 400, 413
        or 422): the client is best told that, as the upstream said it."""
        last = self.errors[-1] if self.errors else None
        if last is not None and last.status in REJECTED_STATUSES:
            return last
        return None

    @property
    def unsupported(self) -> bool:
        """Every endpoint asked lacked what the request needs (tool calls)."""
        return bool(self.errors) and all(e.kind is FailureKind.UNSUPPORTED for e in self.errors)


@dataclass(frozen=True, slots=True)
class ChatRouted:
    """A chat answered: its text, its tool calls whole, and who answered why."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str  # "stop" | "length" | "tool_calls" | "content_filter"
    endpoint: str
    reason: Reason
    latency_ms: float
    usage: Usage
    hedged: bool = False


@dataclass(slots=True)
class ChatPlan:
    candidates: list[Endpoint]
    reason: Reason
    may_hedge: bool


@dataclass(slots=True)
class _Attempt:
    endpoint: Endpoint
    request: ChatRequest
    usage: Usage = field(default_factory=Usage)
    texts: list[str] = field(default_factory=list)
    calls: ToolCallStream | None = None
    started_at: float = field(default_factory=time.monotonic)
    first_event_at: float | None = None
    passed_on: bool = False  # something of it reached the caller
    error: BackendError | None = None


EventSink = Callable[[ChatEvent], None]


class ChatRoute:
    """Chooses and asks the endpoints for one chat; owned by the `Router`."""

    def __init__(
        self,
        pool: EndpointPool,
        outcomes: Outcomes,
        *,
        config: Callable[[], Config],
    ) -> None:
        self._pool = pool
        self._outcomes = outcomes
        self._config = config

    # -- choosing --------------------------------------------------------------------------

    def model_names(self) -> list[str]:
        """What `/v1/models` lists: the classes, then every remote endpoint. An endpoint named
        like a class takes the name (the configuration's word is the more specific)."""
        endpoints = [e.name for e in self._pool.all() if not e.is_local]
        return [*(c for c in TASK_CLASSES if c not in endpoints), *endpoints]

    def plan(self, model: str, request: ChatRequest, *, local_only: Reason | None) -> ChatPlan:
        """The endpoints to ask for `request`, in order. Raises `UnknownModel`,
        `NotAChatModel` or `ChatRefused` when there is nothing to ask."""
        model = model or AUTO
        if model in AUTOMATIC_MODELS:
            model = AUTO
        named = self._pool.get(model)
        if named is not None and named.is_local:
            named = None
        if named is None and model not in TASK_CLASSES:
            raise UnknownModel(model, [*AUTOMATIC_MODELS[1:], *self.model_names()])
        if named is not None and not self._chats(named):
            raise NotAChatModel(
                f"endpoint {model!r} does not serve chat (its roles: {', '.join(named.roles)}); "
                f"use model {AUTO!r} to route automatically"
            )
        if local_only is not None or model == "local":
            why = local_only or Reason.PINNED  # `local` names the local model
            return ChatPlan(self._local_only(request, local_only), why, False)
        if named is not None:
            return ChatPlan([named], Reason.PINNED, False)
        remotes, reason = self._class_endpoints(model)
        local = self._pool.local
        candidates = remotes + ([local] if local is not None else [])
        if not candidates:
            raise ChatRefused(
                "no_endpoint_available",
                "no endpoint serves chat and the local model is disabled ([local] enabled = false)",
            )
        may_hedge = not request.tools or self._config().routing.hedge_tool_calls
        return ChatPlan(candidates, reason, may_hedge and len(remotes) > 1)

    def _class_endpoints(self, model: str) -> tuple[list[Endpoint], Reason]:
        remotes = [e for e in self._pool.all() if not e.is_local]
        if model == "reasoning":
            chosen = [e for e in remotes if "refactor" in e.roles]
            return _healthy_first(chosen), Reason.CONFIGURED
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

        healthy = [e for e in endpoints if e.breaker.state is BreakerState.CLOSED]
        tripped = [e for e in endpoints if e.breaker.state is not BreakerState.CLOSED]
        return sorted(healthy, key=expected) + sorted(tripped, key=expected)

    def _local_only(self, request: ChatRequest, local_only: Reason | None) -> list[Endpoint]:
        local = self._pool.local
        why = (
            f"this request must stay on this machine ({local_only.value})"
            if local_only
            else "model 'local' names the local model"
        )
        if local is None:
            raise ChatRefused(
                "no_endpoint_available",
                f"{why} and the local model is disabled ([local] enabled = false)",
            )
        model = self._pool.local_model
        if request.uses_tools and model is not None and model.tools_supported is False:
            raise ChatRefused(
                "tools_not_supported",
                f"{why} and the local model cannot call tools (its chat template has no tool "
                "calling); configure a local model whose template has, or send no tools",
            )
        return [local]

    # -- asking ----------------------------------------------------------------------------

    async def run(
        self,
        plan: ChatPlan,
        request: ChatRequest,
        *,
        uri: str | None = None,
        on_event: EventSink | None = None,
        on_attempt: Callable[[str], None] | None = None,
    ) -> ChatRouted:
        """Ask the plan's endpoints in turn until one answers; `on_attempt` hears each name
        as it is asked, `on_event` each text or tool-call piece of the answer as it comes.
        Raises `ChatFailed` when none answered."""
        started = time.monotonic()
        self._outcomes.request_started(kind=DecisionKind.CHAT)
        deadline_s = self._config().routing.refactor_deadline_ms / 1000
        errors: list[BackendError] = []
        queue = list(plan.candidates)
        hedged = False
        index = 0
        while queue:
            remaining = deadline_s - (time.monotonic() - started)
            if remaining <= 0:
                errors.append(_deadline_error(queue[0]))
                break
            primary = queue.pop(0)
            backup = queue[0] if plan.may_hedge and queue else None
            delay_s = self._hedge_delay_s(primary) if backup is not None else None
            attempts = await self._ask(
                primary, backup, delay_s, request, remaining, on_event, on_attempt
            )
            if len(attempts) > 1:
                hedged = True
                queue.remove(attempts[1].endpoint)
            winner = next((a for a in attempts if a.calls is not None and _done(a)), None)
            for attempt in attempts:
                self._settle(attempt, won=attempt is winner, errors=errors)
            if winner is not None:
                self._outcomes.request_ended(kind=DecisionKind.CHAT, hedged=hedged)
                reason = plan.reason if index == 0 else Reason.FALLBACK
                if hedged and winner.endpoint is not primary:
                    reason = Reason.HEDGE_WIN
                return self._answer(winner, reason, started, uri, errors, hedged)
            if any(a.passed_on for a in attempts):
                break  # what reached the caller cannot be taken back
            index += 1
        self._outcomes.request_ended(kind=DecisionKind.CHAT, hedged=hedged)
        detail = "; ".join(f"{e.endpoint}: {e.kind.value}: {e.message}" for e in errors)
        self._outcomes.decision(
            kind=DecisionKind.CHAT,
            served_by=None,
            reason=Reason.FAILED,
            started=started,
            uri=uri,
            hedged=hedged,
            detail=detail,
        )
        raise ChatFailed(errors, detail or "no endpoint answered")

    def _hedge_delay_s(self, primary: Endpoint) -> float | None:
        """The primary's usual worst time to a first token, once known, while the hedge
        budget lasts; None: no hedge."""
        stats = primary.stats
        if len(stats.recent_first_token_ms) < HEDGE_MIN_SAMPLES:
            return None
        outcomes = self._outcomes
        ratio = self._config().routing.max_hedge_ratio
        if outcomes.hedged_chat_requests >= ratio * outcomes.chat_requests + HEDGE_BURST:
            return None
        p95 = stats.first_token_percentile(0.95)
        return None if p95 is None else p95 / 1000

    async def _ask(
        self,
        primary: Endpoint,
        backup: Endpoint | None,
        delay_s: float | None,
        request: ChatRequest,
        timeout_s: float,
        on_event: EventSink | None,
        on_attempt: Callable[[str], None] | None,
    ) -> list[_Attempt]:
        """Ask `primary`, and `backup` too if the primary has not started answering after
        `delay_s`; the first to answer is passed on and the other cancelled."""
        attempts = [_Attempt(primary, self._bounded(request, primary))]
        winner: list[_Attempt] = []
        tasks: list[asyncio.Task[None]] = []

        def sink(attempt: _Attempt) -> EventSink:
            def take(event: ChatEvent) -> None:
                if not winner:
                    winner.append(attempt)
                    for other, task in zip(attempts, tasks, strict=True):
                        if other is not attempt:
                            task.cancel()
                if winner[0] is attempt and on_event is not None:
                    attempt.passed_on = True
                    on_event(event)

            return take

        def start(attempt: _Attempt) -> None:
            if on_attempt is not None:
                on_attempt(attempt.endpoint.name)
            tasks.append(asyncio.create_task(_collect(attempt, sink(attempt))))

        start(attempts[0])
        try:
            async with asyncio.timeout(timeout_s):
                if backup is not None and delay_s is not None:
                    done, _ = await asyncio.wait(tasks, timeout=delay_s)
                    if not done and not winner:
                        attempts.append(_Attempt(backup, self._bounded(request, backup)))
                        start(attempts[1])
                await asyncio.gather(*tasks, return_exceptions=True)
        except TimeoutError:
            await _cancel(tasks)
            for attempt in attempts:
                if not _done(attempt) and attempt.error is None:
                    attempt.error = _deadline_error(attempt.endpoint)
        finally:
            await _cancel(tasks)
        return attempts

    def _bounded(self, request: ChatRequest, endpoint: Endpoint) -> ChatRequest:
        """The client's token cap, up to the endpoint's `chat_max_tokens`."""
        if endpoint.config is None:
            return request
        cap = endpoint.config.chat_max_tokens
        if request.max_tokens <= cap:
            return request
        return dataclasses.replace(request, max_tokens=cap)

    def _settle(self, attempt: _Attempt, *, won: bool, errors: list[BackendError]) -> None:
        endpoint = attempt.endpoint
        error = attempt.error
        elapsed_ms = (time.monotonic() - attempt.started_at) * 1000
        if error is not None:
            errors.append(error)
            # A shape the endpoint cannot serve, or a body the upstream refused: the request's
            # doing, not the endpoint's.
            requests_fault = (
                error.kind is FailureKind.UNSUPPORTED or error.status in REJECTED_STATUSES
            )
            self._outcomes.failure(
                endpoint=endpoint, error=error, endpoints_fault=not requests_fault
            )
            return
        first_ms = (
            None
            if attempt.first_event_at is None
            else max(0.0, (attempt.first_event_at - attempt.started_at) * 1000)
        )
        if not _done(attempt):  # cancelled: it lost a hedge
            self._outcomes.lost_race(
                endpoint=endpoint, at_least_ms=elapsed_ms, first_token_ms=first_ms
            )
            return
        self._outcomes.success(
            endpoint=endpoint,
            first_token_ms=first_ms,
            total_ms=max(0.0, elapsed_ms - attempt.usage.setup_ms),
            tokens=attempt.usage.completion_tokens,
            won=won,
        )

    def _answer(
        self,
        attempt: _Attempt,
        reason: Reason,
        started: float,
        uri: str | None,
        errors: list[BackendError],
        hedged: bool,
    ) -> ChatRouted:
        endpoint, usage = attempt.endpoint, attempt.usage
        calls = attempt.calls.calls() if attempt.calls is not None else ()
        finish = usage.finish_reason or "stop"
        if calls and finish == "stop":
            finish = "tool_calls"  # some servers say "stop" after a tool call
        latency_ms = (time.monotonic() - started) * 1000
        detail = "; ".join(f"{e.endpoint}: {e.kind.value}: {e.message}" for e in errors)
        self._outcomes.decision(
            kind=DecisionKind.CHAT,
            served_by=endpoint,
            reason=reason,
            started=started,
            prompt_tokens=usage.prompt_tokens,
            tokens=usage.completion_tokens,
            uri=uri,
            hedged=hedged,
            detail=detail or None,
        )
        return ChatRouted(
            text="".join(attempt.texts),
            tool_calls=calls,
            finish_reason=finish,
            endpoint=endpoint.name,
            reason=reason,
            latency_ms=latency_ms,
            usage=usage,
            hedged=hedged,
        )


async def _collect(attempt: _Attempt, sink: EventSink) -> None:
    """Run one endpoint's answer to its end, noting its events and passing them to `sink`."""
    calls = ToolCallStream(attempt.endpoint.name)
    stream = attempt.endpoint.backend.chat_events(attempt.request, attempt.usage)
    try:
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            async for event in stream:
                if attempt.first_event_at is None:
                    attempt.first_event_at = time.monotonic()
                if isinstance(event, ToolCallDelta):
                    calls.feed(event.index, id=event.id, name=event.name, arguments=event.arguments)
                else:
                    attempt.texts.append(event)
                sink(event)
    except BackendError as error:
        attempt.error = error
        return
    except Exception as exc:
        attempt.error = unexpected_failure(attempt.endpoint.name, exc)
        return
    attempt.calls = calls


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel each task once and wait for it to end. A task is never cancelled twice: a second
    cancellation would cut short its closing of the upstream connection, which would then
    stay open, streaming to no one."""
    for task in tasks:
        if not task.done() and not task.cancelling():
            task.cancel()
    await asyncio.shield(asyncio.gather(*tasks, return_exceptions=True))


def _done(attempt: _Attempt) -> bool:
    """Whether the attempt ran to the end of its answer (not failed, not cancelled)."""
    return attempt.calls is not None


def _deadline_error(endpoint: Endpoint) -> BackendError:
    return BackendError(endpoint.name, FailureKind.TIMEOUT, "no answer within the deadline")


def _healthy_first(endpoints: list[Endpoint]) -> list[Endpoint]:
    healthy = [e for e in endpoints if e.breaker.state is not BreakerState.OPEN]
    return healthy + [e for e in endpoints if e not in healthy]
