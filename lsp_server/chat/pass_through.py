"""The Responses pass-through: a request handed as it is to an endpoint that speaks the
Responses API itself (`responses_path` in its configuration).

The endpoint is the one the chat route would ask first for the request's `model`; it alone is
asked, with its own model name. A request that must stay on this machine never goes there
(everything the client sent is judged, not only the conversation, and the gate decides, offline
"always" included): it then takes the chat path, where the plan holds the local model alone.
What the endpoint did is told to the outcome recorder as a chat's attempt is. Each endpoint's
Responses client is kept while its configuration holds, and made anew (the old one closed) when
it changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any

from lsp_server.backends.base import BackendError, ChatRequest, Usage
from lsp_server.backends.responses_upstream import ResponsesUpstream
from lsp_server.chat.service import ChatService
from lsp_server.config.model import EndpointConfig
from lsp_server.failures import FailureKind, RouteFailed
from lsp_server.permit import Permit
from lsp_server.reasons import Reason
from lsp_server.routing.attempt import Attempt
from lsp_server.routing.decision_log import DecisionKind
from lsp_server.routing.endpoint_pool import Endpoint
from lsp_server.routing.gate import StaysHome
from lsp_server.routing.outcomes import Outcomes

# Events after which the upstream has answered whole.
_ANSWERED = frozenset({"response.completed", "response.incomplete"})


@dataclass(frozen=True, slots=True)
class PassedThrough:
    """A request on its way to the endpoint that answers it in its own Responses events."""

    endpoint: str
    reason: Reason
    events: AsyncGenerator[dict[str, Any], None]  # close it (`aclose`) when done reading


class PassThrough:
    """Decides and runs pass-throughs over the chat service; owned by the `Engine`."""

    def __init__(self, chats: ChatService) -> None:
        self._chats = chats
        self._upstreams: dict[str, tuple[EndpointConfig, ResponsesUpstream]] = {}
        self._closing: set[asyncio.Future[None]] = set()

    def start(
        self,
        payload: dict[str, Any],
        chat: ChatRequest,
        *,
        model: str,
        uri: str,
        sensitive: bool,
        client: str = "",
        extra: Sequence[str] = (),
    ) -> PassedThrough | None:
        """The pass-through of `payload` (the request as the client sent it, `chat` its
        conversation), or None when it takes the chat path. Raises `Refused` as planning a
        chat does."""
        router = self._chats.router
        if not any(e.config is not None and e.config.responses_path for e in router.pool.all()):
            return None
        stay_local = self._chats.stay_local(
            chat, uri=uri, sensitive=sensitive, client=client, extra=extra
        )
        if router.gate.verdict(stay_local) is not None:
            return None
        plan = router.chats.plan(model, chat, local_only=None)
        first = plan.candidates[0]
        if first.config is None or not first.config.responses_path:
            return None
        try:
            permit = router.gate.permit(first.name, remote=True, held=stay_local)
        except StaysHome:
            return None  # offline "always" set just now: the chat path keeps it home
        events = self._run(payload, first, first.config, plan.reason, uri, permit)
        return PassedThrough(first.name, plan.reason, events)

    async def _run(
        self,
        payload: dict[str, Any],
        endpoint: Endpoint,
        config: EndpointConfig,
        reason: Reason,
        uri: str,
        permit: Permit,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The upstream's events as they come; a failure is `RouteFailed`, with the one
        failure it was."""
        tally = _Tally(self._chats.router.outcomes, endpoint, reason, uri)
        events = self._upstream(config).events(payload, permit=permit, usage=tally.usage)
        try:
            async with contextlib.aclosing(events):
                async for event in events:
                    tally.event()
                    if event.get("type") == "response" or event.get("type") in _ANSWERED:
                        tally.answered(event.get("response"))
                    yield event
            if tally.events == 0:
                raise BackendError(endpoint.name, FailureKind.PROTOCOL, "an empty answer")
        except BackendError as error:
            tally.failed(error)
            raise RouteFailed((error.failure,)) from None
        finally:
            tally.cut_short()

    async def aclose(self) -> None:
        """Close every Responses client, and those still closing after a reconfiguration."""
        upstreams = [upstream for _, upstream in self._upstreams.values()]
        self._upstreams.clear()
        await asyncio.gather(*(u.aclose() for u in upstreams), *self._closing)

    def _upstream(self, config: EndpointConfig) -> ResponsesUpstream:
        known = self._upstreams.get(config.name)
        if known is not None and known[0] == config:
            return known[1]
        if known is not None:
            closing = asyncio.ensure_future(known[1].aclose())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        upstream = ResponsesUpstream(config)
        self._upstreams[config.name] = (config, upstream)
        return upstream


class _Tally:
    """What one pass-through did, as an `Attempt` settled once: answered, failed, or cut
    short (the client went away, or stopped reading) when its generator is closed."""

    def __init__(self, outcomes: Outcomes, endpoint: Endpoint, reason: Reason, uri: str) -> None:
        self.outcomes = outcomes
        self.attempt = Attempt(endpoint=endpoint)
        self.reason = reason
        self.uri = uri
        self.events = 0
        outcomes.request_started(kind=DecisionKind.CHAT)

    @property
    def usage(self) -> Usage:
        return self.attempt.usage

    def event(self) -> None:
        self.events += 1
        if self.attempt.first_token_at is None:
            self.attempt.first_token_at = time.monotonic()

    def answered(self, response: Any) -> None:
        attempt = self.attempt
        if attempt.settled:
            return
        attempt.finished_at = time.monotonic()
        usage = response.get("usage") if isinstance(response, dict) else None
        attempt.usage.completion_tokens = _count(usage, "output_tokens")
        self.outcomes.settle(attempt, won=True)
        self.outcomes.request_ended(kind=DecisionKind.CHAT, hedged=False)
        self.outcomes.decision(
            kind=DecisionKind.CHAT,
            served_by=attempt.endpoint,
            reason=self.reason,
            started=attempt.started_at,
            prompt_tokens=_count(usage, "input_tokens"),
            tokens=attempt.usage.completion_tokens,
            uri=self.uri,
        )

    def failed(self, error: BackendError) -> None:
        attempt = self.attempt
        if attempt.settled:
            return
        attempt.error = error
        attempt.finished_at = time.monotonic()
        self.outcomes.settle(attempt)
        self.outcomes.request_ended(kind=DecisionKind.CHAT, hedged=False)
        self.outcomes.decision(
            kind=DecisionKind.CHAT,
            served_by=None,
            reason=Reason.FAILED,
            started=attempt.started_at,
            uri=self.uri,
            detail=str(error),
        )

    def cut_short(self) -> None:
        """Neither answered nor failed when reading stopped: a lower bound of its time."""
        attempt = self.attempt
        if attempt.settled:
            return
        attempt.cancelled = True
        self.outcomes.settle(attempt)
        self.outcomes.request_ended(kind=DecisionKind.CHAT, hedged=False)


def _count(usage: Any, key: str) -> int:
    """A token count from a Responses `usage` object; 0 when absent or not a count."""
    value = usage.get(key, 0) if isinstance(usage, dict) else 0
    return value if isinstance(value, int) and value >= 0 else 0
