"""`GET /metrics`: the gateway's requests, latencies, tokens, spend and limits for Prometheus.

Each gateway process serves its own registry (several on one host are scraped one by one, as
Prometheus expects). Names follow OpenTelemetry's GenAI conventions where one exists
(`gen_ai.client.operation.duration` is `gen_ai_client_operation_duration_seconds`, with `.`
written as `_` and the unit as a suffix); the others start with `gateway_ls_`. Every label takes
values from a bounded set: configured clients and endpoints, task classes, outcomes, limits.
Nothing of a request (no prompt, path or id) is a label.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from lsp_server.gateway.metering import Meter

# OpenTelemetry's advised bucket boundaries for these instruments.
DURATION_BUCKETS = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
FIRST_TOKEN_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
)
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
# The gateway's own time: a relay's is about a millisecond, a loaded one's tens.
OVERHEAD_BUCKETS = (0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512)
REDIS_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5)
BREAKER_STATES = {"closed": 0.0, "half_open": 0.5, "open": 1.0}

# No `_created` series beside every counter and histogram: they double what is stored and
# scrapers take a counter's reset from its drop.
disable_created_metrics()


def outcome_of(status: int) -> str:
    if 200 <= status < 300:
        return "ok"
    if status == 429:
        return "limited"
    if status == 499:
        return "cancelled"
    return "client_error" if status < 500 else "error"


# Each endpoint's name and health ("healthy", "degraded", "half_open", "open").
EndpointHealth = Callable[[], Iterable[tuple[str, str]]]
# (endpoint, kind, shown, accepted, kept characters, inserted characters) per endpoint and kind
# of suggestion ("inline", "next_edit").
SuggestionCounts = Callable[[], Iterable[tuple[str, str, int, int, int, int]]]


class GatewayMetrics:
    def __init__(
        self, endpoint_health: EndpointHealth, suggestion_counts: SuggestionCounts
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ("endpoint", "task_class")
        self.requests = Counter(
            "gateway_ls_requests",
            "Gateway requests by endpoint, task class and outcome.",
            ("endpoint", "task_class", "outcome"),
            registry=self.registry,
        )
        self.duration = Histogram(
            "gen_ai_client_operation_duration_seconds",
            "Duration of a generation request, from admission to the answer's end.",
            ("gen_ai_operation_name", *labels),
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.first_token = Histogram(
            "gen_ai_server_time_to_first_token_seconds",
            "Time to the first streamed piece of an answer.",
            ("gen_ai_operation_name", *labels),
            buckets=FIRST_TOKEN_BUCKETS,
            registry=self.registry,
        )
        self.token_usage = Histogram(
            "gen_ai_client_token_usage",
            "Tokens per request, by type (input or output).",
            ("gen_ai_operation_name", "gen_ai_token_type", "endpoint"),
            buckets=TOKEN_BUCKETS,
            registry=self.registry,
        )
        self.tokens = Counter(
            "gateway_ls_tokens",
            "Tokens charged per client, by type.",
            ("client", "type"),
            registry=self.registry,
        )
        self.spend = Counter(
            "gateway_ls_spend_usd",
            "Spend charged per client, in US dollars, at the endpoints' prices.",
            ("client",),
            registry=self.registry,
        )
        self.limited = Counter(
            "gateway_ls_limited_requests",
            "Requests refused by a limit, per client and limit.",
            ("client", "limit"),
            registry=self.registry,
        )
        self.overhead = Histogram(
            "gateway_ls_overhead_seconds",
            "Time the gateway itself added to an answer: before the upstream was asked, and "
            "from the upstream's last byte to the client's end (the whole figure, also for "
            "streams, whose X-Gateway-LS-Overhead-Ms header holds the part before the upstream).",
            ("gen_ai_operation_name",),
            buckets=OVERHEAD_BUCKETS,
            registry=self.registry,
        )
        self.streamed = Counter(
            "gateway_ls_streamed_answers",
            "Streamed answers by path: `relay` passes an upstream's own events on, `rewrite` "
            "writes each event (another kind's answer, a cleaned completion, the Responses API).",
            ("path",),
            registry=self.registry,
        )
        self.redis = Histogram(
            "gateway_ls_redis_duration_seconds",
            "Round trips to the shared state for limits, by call.",
            ("call",),
            buckets=REDIS_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_Breakers(endpoint_health))
        self.registry.register(_Suggestions(suggestion_counts))
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}

    def observe(self, meter: Meter) -> None:
        """A metered request is over."""
        endpoint = meter.endpoint or "none"
        task_class = meter.demand.task_class
        child = self._child
        child(self.requests, endpoint, task_class, outcome_of(meter.status)).inc()
        child(self.overhead, meter.operation).observe(meter.overhead_s)
        if meter.stream_path is not None:
            child(self.streamed, meter.stream_path).inc()
        refused = meter.admission.refused
        if refused is not None:
            child(self.limited, meter.client, refused.value).inc()
            return
        operation = meter.operation
        elapsed = meter.finished_s()
        child(self.duration, operation, endpoint, task_class).observe(elapsed)
        if meter.first_piece_s is not None:
            child(self.first_token, operation, endpoint, task_class).observe(meter.first_piece_s)
        spent = meter.spent
        if spent is None or not (spent.input_tokens or spent.output_tokens):
            return
        for kind, count in (("input", spent.input_tokens), ("output", spent.output_tokens)):
            child(self.token_usage, operation, kind, endpoint).observe(count)
            child(self.tokens, meter.client, kind).inc(count)
        child(self.spend, meter.client).inc(meter.cost_micros / 1_000_000)

    def _child(self, metric: Any, *values: str) -> Any:
        """`metric.labels(*values)`, kept: prometheus_client checks the values and takes a lock
        on every call, several microseconds each, seven a request. The label values are
        bounded (endpoints, task classes, outcomes, configured clients), and so is this."""
        key = (metric, values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def observe_redis(self, call: str, seconds: float) -> None:
        self.redis.labels(call).observe(seconds)

    async def handle(self, request: Request) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


class _Breakers(Collector):
    """Each endpoint's breaker, read when scraped: 0 closed, 0.5 half-open, 1 open."""

    def __init__(self, endpoint_health: EndpointHealth) -> None:
        self._health = endpoint_health

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "gateway_ls_breaker_state",
            "Circuit breaker per endpoint: 0 closed, 0.5 half-open, 1 open.",
            labels=("endpoint",),
        )
        for name, health in self._health():
            family.add_metric((name,), BREAKER_STATES.get(health, 0.0))
        yield family

    def describe(self) -> Iterator[Metric]:
        return iter(())


class _Suggestions(Collector):
    """What became of each endpoint's suggestions, read when scraped: shown (an inline
    suggestion: offered), accepted, and of the characters accepted ones inserted, those still
    in the document 30 s later; the kept rate is kept over inserted. A gateway's clients report
    no acceptance (the OpenAI-shaped routes have no word for it), so its counts are zero."""

    def __init__(self, counts: SuggestionCounts) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        labels = ("endpoint", "kind")
        families = (
            CounterMetricFamily(
                "gateway_ls_suggestions_shown",
                "Suggestions shown per endpoint and kind (inline: offered to the client).",
                labels=labels,
            ),
            CounterMetricFamily(
                "gateway_ls_suggestions_accepted",
                "Suggestions the client reported accepted, per endpoint and kind.",
                labels=labels,
            ),
            CounterMetricFamily(
                "gateway_ls_suggestion_kept_chars",
                "Characters of accepted suggestions still in the document 30 s after acceptance.",
                labels=labels,
            ),
            CounterMetricFamily(
                "gateway_ls_suggestion_inserted_chars",
                "Characters accepted suggestions inserted, counted once measured 30 s later.",
                labels=labels,
            ),
        )
        for endpoint, kind, *figures in self._counts():
            for family, figure in zip(families, figures, strict=True):
                family.add_metric((endpoint, kind), figure)
        yield from families

    def describe(self) -> Iterator[Metric]:
        return iter(())
