"""What the core can refuse or fail with: the one failure vocabulary.

An endpoint's failure is an `EndpointFailure` of a `FailureKind` (backends raise it inside a
`BackendError`); a request nobody may be asked for is `Refused` with a `RefusalCode`; a request
every endpoint asked failed is `RouteFailed`, holding each endpoint's failure in the order
asked. The front doors turn these into their own protocol's errors, each in one map
(`gateway/errors.py`, `lsp/errors.py`). The values are the strings on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FailureKind(StrEnum):
    NETWORK = "network"  # DNS failure, connection refused or reset: looks like no network
    TIMEOUT = "timeout"  # the endpoint's own read timed out
    DEADLINE = "deadline"  # the request's deadline passed while the endpoint was asked
    AUTH = "auth"  # 401/403 or a missing API key
    NOT_FOUND = "not_found"  # 404: wrong URL or model
    RATE_LIMITED = "rate_limited"  # 429
    SERVER = "server"  # 5xx
    PROTOCOL = "protocol"  # malformed JSON/SSE, truncated or oversized body, another 4xx
    # The conversation is longer than the model's context (413, or a 400/422 saying so).
    CONTEXT_OVERFLOW = "context_overflow"
    UNAVAILABLE = "unavailable"  # a local backend that is disabled or failed to load
    # The endpoint cannot serve this request's shape (tools offered to a model without tool
    # calling): a fact about the request, not the endpoint's health.
    UNSUPPORTED = "unsupported"


# Statuses by which an upstream refuses the request itself, not its own health.
REJECTED_STATUSES = frozenset({400, 413, 422})


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointFailure:
    """What went wrong with one endpoint asked for a request."""

    endpoint: str
    kind: FailureKind
    message: str
    status: int | None = None  # the upstream's HTTP status, when it sent one
    retry_after_s: float | None = None

    def __str__(self) -> str:
        return f"{self.endpoint}: {self.kind.value}: {self.message}"

    @property
    def requests_fault(self) -> bool:
        """The request's doing (a shape the endpoint cannot serve, a body the upstream
        refused), not the endpoint's health."""
        return self.kind is FailureKind.UNSUPPORTED or self.status in REJECTED_STATUSES


class RefusalCode(StrEnum):
    """Why nothing was asked at all, in a word a client can read."""

    MODEL_NOT_FOUND = "model_not_found"  # the model names no task class and no endpoint
    MODEL_NOT_SUPPORTED = "model_not_supported"  # it names an endpoint that does not chat
    NO_ENDPOINT_AVAILABLE = "no_endpoint_available"  # nothing configured or allowed can serve
    TOOLS_NOT_SUPPORTED = "tools_not_supported"  # it needs tools the only model allowed lacks
    LOCAL_MODEL_LOADING = "local_model_loading"  # only the local model may, and it is loading


class Refused(Exception):
    """Nothing may be asked for this request; `code` says why, `names` the valid model names
    when the model was not found."""

    def __init__(self, code: RefusalCode, message: str, names: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.code = code
        self.names = names


class RouteFailed(Exception):
    """Every endpoint asked failed; `failures` in the order asked."""

    def __init__(self, failures: tuple[EndpointFailure, ...], detail: str = "") -> None:
        super().__init__(detail or "; ".join(str(f) for f in failures) or "no endpoint answered")
        self.failures = failures

    @property
    def last(self) -> EndpointFailure | None:
        return self.failures[-1] if self.failures else None

    @property
    def rejection(self) -> EndpointFailure | None:
        """The last failure if it was the upstream refusing the request itself (a 400, 413
        or 422): the client is best told that, as the upstream said it."""
        last = self.last
        if last is not None and last.status in REJECTED_STATUSES:
            return last
        return None

    @property
    def unsupported(self) -> bool:
        """Every endpoint asked lacked what the request needs (tool calls)."""
        return bool(self.failures) and all(f.kind is FailureKind.UNSUPPORTED for f in self.failures)
