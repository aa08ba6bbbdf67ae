"""Endpoints asked in turn until one answers: the route of refactors and gateway chats.

The plan's endpoints are asked one after the other under the request's deadline; with
`may_hedge`, the next one is asked beside the current one when it has not started answering by
its usual 95th-percentile time to a first token, and the first to answer is passed on while the
other is cancelled. An attempt whose text or tool calls reached the caller is never replaced,
unless the caller can take the text back (`restart_after_passed_on`: a refactor shows only
progress before it applies the whole answer). Each attempt is told to the outcome recorder;
which endpoints make the plan is the caller's business (the chat route's task classes, the
refactor's reasoning endpoints).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from lsp_server.backends.base import (
    BackendError,
    ChatEvent,
    ChatRequest,
    Relayed,
    ToolCall,
    ToolCallDelta,
    Usage,
    unexpected_failure,
)
from lsp_server.backends.tool_calls import ToolCallStream
from lsp_server.failures import EndpointFailure, FailureKind, RouteFailed
from lsp_server.permit import Permit
from lsp_server.reasons import Reason
from lsp_server.routing.attempt import Attempt
from lsp_server.routing.decision_log import DecisionKind
from lsp_server.routing.endpoint_pool import Endpoint
from lsp_server.routing.gate import Gate, StaysHome
from lsp_server.routing.hedge_budget import hedge_delay_s
from lsp_server.routing.outcomes import Outcomes

EventSink = Callable[[ChatEvent], None]
# The call an attempt makes: the endpoint's streamed answer to what it is asked, under the
# gate's permit.
ChatCall = Callable[[Endpoint, ChatRequest, Usage, Permit], AsyncIterator[ChatEvent]]


def capped(request: ChatRequest, cap: int | None) -> ChatRequest:
    """`request` asking for no more than `cap` tokens (None: as it is)."""
    if cap is None or request.max_tokens <= cap:
        return request
    return dataclasses.replace(request, max_tokens=cap)


def chat_events(
    endpoint: Endpoint, request: ChatRequest, usage: Usage, permit: Permit
) -> AsyncIterator[ChatEvent]:
    return endpoint.backend.chat_events(request, usage, permit=permit)


def relay_events(
    endpoint: Endpoint, request: ChatRequest, usage: Usage, permit: Permit
) -> AsyncIterator[ChatEvent]:
    """The call of a caller that passes the stream on: the upstream's own events where the
    endpoint can give them (`Relayed`), else its pieces."""
    return endpoint.backend.relay_events(request, usage, permit=permit)


@dataclass(frozen=True, slots=True, kw_only=True)
class SequentialPlan:
    """Who to ask for one request, in order, and how."""

    kind: DecisionKind
    candidates: list[Endpoint]
    reason: Reason  # why the first candidate; a later one answers as a fallback
    # Why what the request is about must stay here, as its route found it: the gate's fact.
    held: Reason | None = None
    deadline_s: float
    may_hedge: bool = False
    # The request as one endpoint is asked it (its token cap bounded by the endpoint's own).
    bounded: Callable[[ChatRequest, Endpoint], ChatRequest] = lambda request, endpoint: request
    # Whether a failure of this endpoint is the request's doing, not the endpoint's health.
    requests_fault: Callable[[Endpoint, EndpointFailure], bool] = lambda endpoint, f: False
    restart_after_passed_on: bool = False
    call: ChatCall = chat_events


@dataclass(frozen=True, slots=True, kw_only=True)
class Answered:
    """One endpoint's whole answer, and who answered why."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    endpoint: str
    reason: Reason
    latency_ms: float
    usage: Usage
    max_tokens: int  # the most tokens the answering endpoint was asked for
    hedged: bool
    failures: tuple[EndpointFailure, ...]  # of the endpoints asked before it

    @property
    def finish_reason(self) -> str:
        """Why the answer ended: "stop" | "length" | "tool_calls" | "content_filter"."""
        finish = self.usage.finish_reason or "stop"
        if self.tool_calls and finish == "stop":
            return "tool_calls"  # some servers say "stop" after a tool call
        return finish


@dataclass(slots=True, kw_only=True)
class _Attempt(Attempt):
    """An attempt of the sequential route: what it is asked, and what it answered so far."""

    request: ChatRequest
    permit: Permit
    texts: list[str] = field(default_factory=list)
    calls: ToolCallStream | None = None  # set once the answer ran to its end
    passed_on: bool = False  # something of it reached the caller


class SequentialRoute:
    """Asks a plan's endpoints in turn; owned by the `Router`, shared by its routes."""

    def __init__(
        self, outcomes: Outcomes, gate: Gate, *, max_hedge_ratio: Callable[[], float]
    ) -> None:
        self._outcomes = outcomes
        self._gate = gate
        self._max_hedge_ratio = max_hedge_ratio

    async def run(
        self,
        plan: SequentialPlan,
        request: ChatRequest,
        *,
        uri: str | None = None,
        on_event: EventSink | None = None,
        on_attempt: Callable[[str], None] | None = None,
    ) -> Answered:
        """Ask the plan's endpoints in turn until one answers; `on_attempt` hears each name
        as it is asked, `on_event` each text or tool-call piece of the answer as it comes.
        Raises `RouteFailed` when none answered."""
        started = time.monotonic()
        outcomes = self._outcomes
        outcomes.request_started(kind=plan.kind)
        asked: list[_Attempt] = []
        try:
            return await self._run(plan, request, uri, on_event, on_attempt, started, asked)
        except asyncio.CancelledError:
            # Cancelled (a client gone, a refactor called off): what was asked is settled too.
            outcomes.request_ended(kind=plan.kind, hedged=len(asked) > 1)
            for attempt in asked:
                outcomes.settle(attempt)
            raise

    async def _run(
        self,
        plan: SequentialPlan,
        request: ChatRequest,
        uri: str | None,
        on_event: EventSink | None,
        on_attempt: Callable[[str], None] | None,
        started: float,
        asked: list[_Attempt],
    ) -> Answered:
        """`run`'s loop; `asked` holds the attempts of the endpoints being asked."""
        outcomes = self._outcomes
        failures: list[EndpointFailure] = []
        queue = list(plan.candidates)
        hedged = False
        index = 0
        while queue:
            remaining = plan.deadline_s - (time.monotonic() - started)
            if remaining <= 0:
                failures.append(_deadline_error(queue[0]).failure)
                break
            primary = queue.pop(0)
            permit = self._permit(plan, primary)
            if permit is None:
                continue  # offline "always" set since the plan was made: not asked
            backup = queue[0] if plan.may_hedge and queue else None
            delay_s = self._hedge_delay_s(primary) if backup is not None else None
            asked.clear()  # the endpoints asked before are settled
            attempts = await self._ask(
                plan,
                (primary, permit),
                backup,
                delay_s,
                request,
                remaining,
                (on_event, on_attempt),
                asked,
            )
            if len(attempts) > 1:
                hedged = True
                queue.remove(attempts[1].endpoint)
            winner = next((a for a in attempts if a.calls is not None), None)
            for attempt in attempts:
                self._settle(plan, attempt, won=attempt is winner, failures=failures)
            if winner is not None:
                outcomes.request_ended(kind=plan.kind, hedged=hedged)
                reason = plan.reason if index == 0 else Reason.FALLBACK
                if hedged and winner.endpoint is not primary:
                    reason = Reason.HEDGE_WIN
                return self._answer(plan, winner, reason, started, uri, failures, hedged)
            if any(a.passed_on for a in attempts) and not plan.restart_after_passed_on:
                break  # what reached the caller cannot be taken back
            index += 1
        outcomes.request_ended(kind=plan.kind, hedged=hedged)
        failed = RouteFailed(tuple(failures))
        outcomes.decision(
            kind=plan.kind,
            served_by=None,
            reason=Reason.FAILED,
            started=started,
            uri=uri,
            hedged=hedged,
            detail=str(failed),
        )
        raise failed

    def _permit(self, plan: SequentialPlan, endpoint: Endpoint) -> Permit | None:
        """The gate's leave to ask `endpoint` now, or None where it refuses."""
        try:
            return self._gate.permit(endpoint.name, remote=not endpoint.is_local, held=plan.held)
        except StaysHome:
            return None

    def _hedge_delay_s(self, primary: Endpoint) -> float | None:
        """The one hedge-delay rule (`hedge_delay_s`), with no configured delay, while the
        chats' hedge budget lasts; None: no hedge."""
        if not self._outcomes.chat_budget.hedge_left(self._max_hedge_ratio()):
            return None
        return hedge_delay_s(primary.stats, None)

    async def _ask(
        self,
        plan: SequentialPlan,
        primary: tuple[Endpoint, Permit],
        backup: Endpoint | None,
        delay_s: float | None,
        request: ChatRequest,
        timeout_s: float,
        sinks: tuple[EventSink | None, Callable[[str], None] | None],
        asked: list[_Attempt],
    ) -> list[_Attempt]:
        """Ask `primary`, and `backup` too if the primary has not started answering after
        `delay_s`; the first to answer is passed on and the other cancelled. The backup is
        asked only if the gate still lets it be. Each attempt joins `asked` as it starts."""
        on_event, on_attempt = sinks
        first, permit = primary
        attempts = asked
        attempts.append(
            _Attempt(endpoint=first, request=plan.bounded(request, first), permit=permit)
        )
        if backup is None or delay_s is None:
            await self._ask_alone(plan, attempts[0], timeout_s, on_event, on_attempt)
            return list(attempts)
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
            tasks.append(asyncio.create_task(_collect(plan.call, attempt, sink(attempt))))

        start(attempts[0])
        try:
            async with asyncio.timeout(timeout_s):
                done, _ = await asyncio.wait(tasks, timeout=delay_s)
                backup_permit = None if done or winner else self._permit(plan, backup)
                if backup_permit is not None:
                    bounded = plan.bounded(request, backup)
                    attempts.append(
                        _Attempt(endpoint=backup, request=bounded, permit=backup_permit, hedge=True)
                    )
                    start(attempts[1])
                await asyncio.gather(*tasks, return_exceptions=True)
        except TimeoutError:
            await _cancel(tasks)
            for attempt in attempts:
                _cut_by_deadline(attempt)
        finally:
            await _cancel(tasks)
        return list(attempts)

    async def _ask_alone(
        self,
        plan: SequentialPlan,
        attempt: _Attempt,
        timeout_s: float,
        on_event: EventSink | None,
        on_attempt: Callable[[str], None] | None,
    ) -> None:
        """Nothing to hedge with: the attempt runs in this task under the deadline, without a
        task of its own and the wake-ups between the two (as the race's `_run_alone`)."""
        if on_attempt is not None:
            on_attempt(attempt.endpoint.name)

        def take(event: ChatEvent) -> None:
            if on_event is not None:
                attempt.passed_on = True
                on_event(event)

        try:
            async with asyncio.timeout(timeout_s):
                await _collect(plan.call, attempt, take)
        except TimeoutError:
            _cut_by_deadline(attempt)

    def _settle(
        self,
        plan: SequentialPlan,
        attempt: _Attempt,
        *,
        won: bool,
        failures: list[EndpointFailure],
    ) -> None:
        if attempt.error is not None:
            failures.append(attempt.error.failure)
        fault = attempt.error is None or not plan.requests_fault(
            attempt.endpoint, attempt.error.failure
        )
        self._outcomes.settle(attempt, won=won, endpoints_fault=fault)

    def _answer(
        self,
        plan: SequentialPlan,
        attempt: _Attempt,
        reason: Reason,
        started: float,
        uri: str | None,
        failures: list[EndpointFailure],
        hedged: bool,
    ) -> Answered:
        usage = attempt.usage
        detail = "; ".join(str(f) for f in failures) or None
        decision = self._outcomes.decision(
            kind=plan.kind,
            served_by=attempt.endpoint,
            reason=reason,
            started=started,
            prompt_tokens=usage.prompt_tokens,
            tokens=usage.completion_tokens,
            uri=uri,
            hedged=hedged,
            detail=detail,
        )
        return Answered(
            text="".join(attempt.texts),
            tool_calls=attempt.calls.calls() if attempt.calls is not None else (),
            endpoint=attempt.endpoint.name,
            reason=reason,
            latency_ms=decision.latency_ms,
            usage=usage,
            max_tokens=attempt.request.max_tokens,
            hedged=hedged,
            failures=tuple(failures),
        )


async def _collect(call: ChatCall, attempt: _Attempt, sink: EventSink) -> None:
    """Run one endpoint's answer to its end, noting its events and passing them to `sink`."""
    calls = ToolCallStream(attempt.endpoint.name)
    stream = call(attempt.endpoint, attempt.request, attempt.usage, attempt.permit)
    try:
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            async for event in stream:
                if attempt.first_token_at is None:
                    attempt.first_token_at = time.monotonic()
                if isinstance(event, ToolCallDelta):
                    calls.feed(event.index, id=event.id, name=event.name, arguments=event.arguments)
                elif not isinstance(event, Relayed):  # relayed: the caller's alone to read
                    attempt.texts.append(event)
                sink(event)
    except BackendError as error:
        attempt.error = error
        return
    except asyncio.CancelledError:
        attempt.cancelled = True
        raise
    except Exception as exc:
        attempt.error = unexpected_failure(attempt.endpoint.name, exc)
        return
    finally:
        attempt.finished_at = time.monotonic()
    attempt.calls = calls


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel each task once and wait for it to end. A task is never cancelled twice: a second
    cancellation would cut short its closing of the upstream connection, which would then
    stay open, streaming to no one."""
    for task in tasks:
        if not task.done() and not task.cancelling():
            task.cancel()
    await asyncio.shield(asyncio.gather(*tasks, return_exceptions=True))


def _cut_by_deadline(attempt: _Attempt) -> None:
    """Note the deadline as the failure of an attempt it ended with neither an answer nor a
    failure of its own."""
    if attempt.calls is None and attempt.error is None:
        attempt.error = _deadline_error(attempt.endpoint)


def _deadline_error(endpoint: Endpoint) -> BackendError:
    return BackendError(endpoint.name, FailureKind.DEADLINE, "no answer within the deadline")
