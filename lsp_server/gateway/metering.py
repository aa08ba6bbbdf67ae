"""Every generation route's admission and charge: one call (`admit`) before the route asks
anything upstream, and one middleware (`Metering`) that writes the rate-limit headers on the
answer and settles the request when the answer is over, however it ended.

A route admits with what the request may cost and tells the meter what it learns: each streamed
piece (`streamed`), the endpoint being asked (`asking`), the answer's usage and how long the
upstream took (`answered`). The middleware also writes on every answer the time the gateway
itself added (`overhead`: `X-Gateway-LS-Overhead-Ms`). When
the answer ends without usage (a client gone mid-stream, an upstream that reports none), the
charge is the prompt's estimate plus the tokens of the text that streamed: an answer that had
text is never recorded as free.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Callable

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lsp_server.backends.base import Relayed, estimate_tokens
from lsp_server.core.engine import Engine
from lsp_server.gateway.openai_wire import GatewayError
from lsp_server.gateway.overhead import CLOCK_KEY, OVERHEAD_HEADER, GatewayClock, header_value
from lsp_server.limits.limiter import Admission, Demand
from lsp_server.limits.quota import LimitKind, Spent, Window

METER_KEY = "gateway_ls_meter"
ANONYMOUS = "anonymous"  # the client of a gateway that asks for no token
STATE_DOWN_RETRY_S = 2


class Meter:
    """One admitted (or refused) request, from its admission to its charge."""

    def __init__(
        self,
        engine: Engine,
        admission: Admission,
        demand: Demand,
        operation: str,
        observe: Callable[[Meter], None],
        clock: GatewayClock,
    ) -> None:
        self.engine = engine
        self.admission = admission
        self.demand = demand
        self.operation = operation  # "text_completion" | "chat", as OpenTelemetry names them
        self.started = time.monotonic()
        self.first_piece_s: float | None = None
        self.stream_path: str | None = None  # a streamed answer's: "relay" | "rewrite"
        self.endpoint = ""
        self.status = 0
        self.clock = clock
        self.overhead_s = 0.0  # the gateway's own time, once the answer is over
        self.spent: Spent | None = None
        self.cost_micros = 0
        self._streamed_chars = 0
        self._relayed_events = 0  # an upstream's own events passed on: a token each, estimated
        self._ended = self.started
        self._answer: Spent | None = None
        self._observe = observe

    @property
    def client(self) -> str:
        return self.demand.client

    def asking(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.clock.asking()

    def streamed(self, piece: object) -> None:
        if self.first_piece_s is None:
            self.first_piece_s = time.monotonic() - self.started
        if isinstance(piece, Relayed):
            self._relayed_events += piece.count(b"data:")
            return
        text = piece if isinstance(piece, str) else getattr(piece, "arguments", "") or ""
        self._streamed_chars += len(text) + len(getattr(piece, "name", "") or "")

    def answered(
        self,
        endpoint: str,
        prompt_tokens: int,
        completion_tokens: int,
        *,
        reported: bool,
        text_chars: int = 0,
        upstream_ms: float | None = None,
    ) -> None:
        """The answer's usage: the upstream's counts when `reported`, else estimates, which
        never count less than the text the answer had (`text_chars`, or what streamed).
        `upstream_ms`: how long the core's routed call took (None: since it was asked)."""
        self.clock.upstream_ended(None if upstream_ms is None else upstream_ms / 1000)
        self.endpoint = endpoint
        if not reported:
            text = max(text_chars, self._streamed_chars)
            completion_tokens = max(completion_tokens, estimate_tokens(text))
        self._answer = Spent(endpoint, prompt_tokens, completion_tokens, reported)

    def finish(self, status: int) -> None:
        """The answer is over: settle the reservation and report the request, once."""
        if self.spent is not None:
            return
        self.status = status
        self._ended = time.monotonic()
        self.overhead_s = self.clock.added_s()
        self.spent = self._answer or self._estimate()
        lease = self.admission.lease
        if lease is not None:
            latency = time.monotonic() - self.started
            self.cost_micros = self.engine.limits.settle(lease, self.spent, latency)
        self._observe(self)

    def finished_s(self) -> float:
        """Seconds from admission to the answer's end."""
        return self._ended - self.started

    def _estimate(self) -> Spent:
        streamed = estimate_tokens(self._streamed_chars) + self._relayed_events
        if not streamed and not self.endpoint:
            return Spent("", 0, 0, False)  # nothing was asked upstream
        return Spent(self.endpoint, estimate_tokens(self.demand.prompt_chars), streamed, False)

    def headers(self) -> list[tuple[bytes, bytes]]:
        """OpenAI's rate-limit headers, for the limits this client has."""
        verdict = self.admission.verdict
        pairs: list[tuple[str, str]] = []
        for name, window in (("requests", verdict.requests), ("tokens", verdict.tokens)):
            if window is not None:
                pairs += _window_headers(name, window)
        return [(k.encode(), v.encode()) for k, v in pairs]


def _window_headers(name: str, window: Window) -> list[tuple[str, str]]:
    return [
        (f"x-ratelimit-limit-{name}", str(window.limit)),
        (f"x-ratelimit-remaining-{name}", str(window.remaining)),
        (f"x-ratelimit-reset-{name}", duration_text(window.reset_s)),
    ]


def duration_text(seconds: float) -> str:
    """A duration as OpenAI writes it in `x-ratelimit-reset-*`: `20ms`, `1.5s`, `6m0s`."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    if minutes:
        return f"{int(minutes)}m{round(rest)}s"
    return f"{round(rest, 3):g}s"


def meter_of(request: Request) -> Meter | None:
    meter = request.scope.get("state", {}).get(METER_KEY)
    return meter if isinstance(meter, Meter) else None


class Admit:
    """The one call every generation route makes before it asks anything upstream."""

    def __init__(self, engine: Engine, observe: Callable[[Meter], None]) -> None:
        """`engine`: whose limiter admits and settles; `observe`: told of each ended request."""
        self.engine = engine
        self.observe = observe

    async def __call__(
        self,
        request: Request,
        *,
        client: str,
        operation: str,
        task_class: str,
        prompt_chars: int,
        max_tokens: int | None,
        model: str = "",
    ) -> Meter:
        """Admit the request for `client` (the name the bearer check gave it, empty when the
        gateway asks for no token), or raise the 429 (or 503) that says why not.

        `max_tokens` None: the client named no cap, so the endpoints' `chat_max_tokens` apply.
        `model`: what the client named, which bounds who may answer and so the price reserved.
        """
        demand = Demand(client or ANONYMOUS, prompt_chars, max_tokens, task_class, model)
        admission = await self.engine.limits.admit(demand)
        state = request.scope.setdefault("state", {})
        clock = state.get(CLOCK_KEY)
        if not isinstance(clock, GatewayClock):
            clock = state[CLOCK_KEY] = GatewayClock()
        meter = Meter(self.engine, admission, demand, operation, self.observe, clock)
        state[METER_KEY] = meter
        if admission.refused is not None:
            raise refusal(admission, demand.client)
        return meter


def refusal(admission: Admission, client: str) -> GatewayError:
    verdict = admission.verdict
    kind = verdict.refused
    if kind is LimitKind.BUDGET:
        if admission.budget_unchecked:
            return GatewayError(
                503,
                "the budget cannot be checked while the gateways' shared state is unreachable; "
                "try again shortly",
                code="budget_unavailable",
                headers={"Retry-After": str(STATE_DOWN_RETRY_S)},
            )
        end = admission.period_end or dt.datetime.now(dt.UTC)
        limits = admission.limits
        wait = max(1, math.ceil((end - dt.datetime.now(dt.UTC)).total_seconds()))
        return GatewayError(
            429,
            f"{client} has used its budget of ${limits.budget_usd:g} for this "
            f"{limits.budget_period}; it renews at {end:%Y-%m-%d %H:%M} UTC",
            code="insufficient_quota",
            kind="insufficient_quota",
            headers={"Retry-After": str(wait)},
        )
    assert kind is not None
    retry = max(verdict.retry_after_s, 0.001)
    what = {
        LimitKind.REQUESTS: "requests per minute",
        LimitKind.TOKENS: "tokens per minute",
        LimitKind.CONCURRENCY: "requests in flight",
    }[kind]
    return GatewayError(
        429,
        f"rate limit reached for {client} on {what}; try again in {duration_text(retry)}",
        code="rate_limit_exceeded",
        kind=kind.value,
        headers={
            "Retry-After": str(math.ceil(retry)),
            "retry-after-ms": str(math.ceil(retry * 1000)),
        },
    )


class Metering:
    """ASGI middleware: the gateway's own time on every answer (`overhead`), the rate-limit
    headers on a metered one, and its charge once the answer is over (sent whole, streamed to
    its end, or abandoned by the client)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 0
        clock = GatewayClock()
        scope.setdefault("state", {})[CLOCK_KEY] = clock

        async def send_with_headers(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [*message.get("headers", ())]
                meter = scope["state"].get(METER_KEY)
                if isinstance(meter, Meter):
                    headers += meter.headers()
                    if meter.stream_path is None and _is_event_stream(headers):
                        meter.stream_path = "rewrite"  # every stream the relay did not pass on
                headers.append((OVERHEAD_HEADER.encode(), header_value(clock.added_s())))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            meter = scope["state"].get(METER_KEY)
            if isinstance(meter, Meter):
                meter.finish(status or 500)


def _is_event_stream(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(
        name.lower() == b"content-type" and value.startswith(b"text/event-stream")
        for name, value in headers
    )
