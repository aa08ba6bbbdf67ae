"""The core's refusals and failures in the LSP's words: the one map to what an editor is told,
as `gateway/errors.py` is for OpenAI and Responses errors.

A keystroke's request (an inline completion, a next edit) that nothing answered is an empty
answer, never a JSON-RPC error, which editors would show on every keystroke. A refactor, which
the person asked for, is answered with a message: its type says how serious it is (a local model
still loading is news, not an error), its text what happened and, where the failure's kind
says it, what to do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from lsp_server.failures import FailureKind, RefusalCode, Refused, RouteFailed

if TYPE_CHECKING:  # the core is imported after `initialize` is answered, not with the server
    from lsp_server.refactor.service import RefactorFailed

# What the person can do about an endpoint's failure, by its kind.
_HINTS = {
    FailureKind.AUTH: "check the endpoint's API key",
    FailureKind.RATE_LIMITED: "the endpoint is rate limited; try again shortly",
    FailureKind.CONTEXT_OVERFLOW: "the code is longer than the model's context; select less",
    FailureKind.NETWORK: "the endpoint cannot be reached; is the network up?",
    FailureKind.DEADLINE: "no answer in time; `routing.refactor_deadline_ms` sets how long",
}
_NEWS = frozenset({RefusalCode.LOCAL_MODEL_LOADING})


def refactor_message(failure: RefactorFailed) -> types.ShowMessageParams:
    """The message for a refactor that made no edit."""
    return types.ShowMessageParams(type=_severity(failure.cause), message=_text(failure))


def _severity(cause: Refused | RouteFailed | None) -> types.MessageType:
    if isinstance(cause, Refused) and cause.code in _NEWS:
        return types.MessageType.Info
    return types.MessageType.Error


def _text(failure: RefactorFailed) -> str:
    cause = failure.cause
    last = cause.last if isinstance(cause, RouteFailed) else None
    hint = _HINTS.get(last.kind) if last is not None else None
    return f"gateway-ls: {failure}" + (f" ({hint})" if hint else "")
