"""The core's failures in the gateway's words: the one map to OpenAI and Responses errors.

A request nothing may serve (`Refused`) and a request every endpoint failed (`RouteFailed`) are
HTTP errors in OpenAI's shape; an upstream's failure during a Responses stream is a
`response.failed` event with the code Responses clients act on: Codex CLI and the Agents SDK
retry on `rate_limit_exceeded` and compact the conversation on `context_length_exceeded`.
"""

from __future__ import annotations

from lsp_server.failures import EndpointFailure, FailureKind, RefusalCode, Refused, RouteFailed
from lsp_server.gateway.openai_wire import GatewayError

# Every way the core can end a request without an answer.
CORE_FAILURES = (Refused, RouteFailed)

# How long a client should wait for a local model that is loading.
LOADING_RETRY_AFTER_S = "2"

_REFUSAL_STATUS = {
    RefusalCode.MODEL_NOT_FOUND: 404,
    RefusalCode.MODEL_NOT_SUPPORTED: 400,
    RefusalCode.TOOLS_NOT_SUPPORTED: 400,
    RefusalCode.NO_ENDPOINT_AVAILABLE: 503,
    RefusalCode.LOCAL_MODEL_LOADING: 503,
}
_MODEL_REFUSALS = frozenset({RefusalCode.MODEL_NOT_FOUND, RefusalCode.MODEL_NOT_SUPPORTED})

# The Responses codes of an upstream's failure, and their HTTP status when not streamed.
RESPONSES_STATUS = {
    "rate_limit_exceeded": 429,
    "context_length_exceeded": 400,
    "server_error": 502,
}


def openai_error(error: Refused | RouteFailed) -> GatewayError:
    """A refusal with its status (404 unknown model, 400 for a model or tools that cannot
    serve it, 503 nothing available); a failure as the upstream refused it (400/413/422), 400
    when none could call tools, else 502."""
    if isinstance(error, Refused):
        code = error.code
        headers = {"Retry-After": LOADING_RETRY_AFTER_S}
        return GatewayError(
            _REFUSAL_STATUS[code],
            str(error),
            code=code.value,
            param="model" if code in _MODEL_REFUSALS else None,
            headers=headers if code is RefusalCode.LOCAL_MODEL_LOADING else None,
        )
    rejection = error.rejection
    if rejection is not None and rejection.status is not None:
        message = f"{rejection.endpoint} refused the request: {rejection.message}"
        return GatewayError(rejection.status, message, code="upstream_rejected")
    if error.unsupported:
        message = f"no endpoint allowed to serve this request can call tools: {error}"
        return GatewayError(400, message, code="tools_not_supported")
    return GatewayError(502, f"no endpoint answered: {error}", code="upstream_failed")


def responses_code(failure: EndpointFailure | None) -> str:
    """The code a Responses client reads in `response.failed` for an upstream's failure."""
    if failure is None:
        return "server_error"
    if failure.kind is FailureKind.RATE_LIMITED or failure.status == 429:
        return "rate_limit_exceeded"
    if failure.kind is FailureKind.CONTEXT_OVERFLOW:
        return "context_length_exceeded"
    return "server_error"


def responses_failure(failed: RouteFailed) -> tuple[str, str]:
    """The Responses code and message of a request every endpoint failed."""
    last = failed.last
    message = str(failed)
    if last is not None and last.retry_after_s is not None:
        message += f" Please try again in {last.retry_after_s:g}s."
    return responses_code(last), message


def responses_error(failed: RouteFailed) -> GatewayError:
    """A non-streamed Responses request every endpoint failed."""
    code, message = responses_failure(failed)
    return GatewayError(RESPONSES_STATUS[code], f"no endpoint answered: {message}", code=code)
