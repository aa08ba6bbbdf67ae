"""Refactor on request (routing rule 4): prompt the reasoning model, turn its answer into edits.

Protocol-free: the LSP layer supplies the document and a progress callback, and applies the edits
this returns. Nothing is returned unless the whole answer arrived and validated, so a cancel or an
error can never leave a partial edit behind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lsp_server.backends.base import ChatRequest, estimate_tokens
from lsp_server.config.model import CHAT_MAX_TOKENS, LOCAL_CHAT_MAX_TOKENS
from lsp_server.failures import Refused, RouteFailed
from lsp_server.privacy.guard import PrivacyGuard
from lsp_server.refactor.edits import OffsetEdit, RefactorOutputError, plan_refactor_edit
from lsp_server.refactor.prompt import build_refactor_messages
from lsp_server.routing.router import Router
from lsp_server.routing.sequential_route import Answered

DEFAULT_INSTRUCTION = (
    "Refactor this code to be clearer and more idiomatic without changing its behaviour."
)
# The local model's answer is sized to the selection: a rewrite is rarely more than twice as long
# as what it replaces, and a small CPU model writing on past that only burns the deadline.
LOCAL_MIN_TOKENS = 256


class RefactorFailed(Exception):
    """Why no edit was made, in words fit for the person who asked; `cause` is the core's
    refusal or failure when nothing could answer."""

    def __init__(self, message: str, cause: Refused | RouteFailed | None = None) -> None:
        super().__init__(message)
        self.cause = cause


@dataclass(frozen=True, slots=True)
class RefactorResult:
    edits: list[OffsetEdit]  # in str offsets of the text the refactor was asked for
    endpoint: str
    reason: str
    instruction: str


class RefactorService:
    def __init__(self, router: Router, privacy: PrivacyGuard) -> None:
        self._router = router
        self._privacy = privacy

    async def refactor(
        self,
        *,
        uri: str,
        text: str,
        start: int,
        end: int,
        language: str,
        instruction: str,
        on_tokens: Callable[[int, int], None] | None = None,
    ) -> RefactorResult:
        """`on_tokens(received, budget)` is called as the answer streams in."""
        if start >= end:
            raise RefactorFailed("select the code to refactor first")
        instruction = instruction.strip() or DEFAULT_INSTRUCTION
        messages = build_refactor_messages(
            document_text=text,
            selection_start=start,
            selection_end=end,
            language=language,
            path=uri,
            instruction=instruction,
        )
        # The whole document and the instruction: everything the prompt could carry.
        local_only = self._privacy.text_reason(uri, f"{text}\n{instruction}")
        received = 0

        def count(chunk: str) -> None:
            nonlocal received
            received += 1
            if on_tokens is not None:
                on_tokens(received, CHAT_MAX_TOKENS)

        request = ChatRequest(messages=messages, max_tokens=CHAT_MAX_TOKENS)
        try:
            routed = await self._router.refactor(
                request,
                uri=uri,
                local_only=local_only,
                on_text=count,
                local_max_tokens=local_answer_budget(end - start),
            )
        except (Refused, RouteFailed) as failure:
            raise RefactorFailed(f"refactor failed: {failure}", failure) from None
        endpoint = routed.endpoint
        try:
            edits = plan_refactor_edit(text, start, end, routed.text, language)
        except RefactorOutputError as error:
            if _cut_short(routed):
                raise RefactorFailed(
                    f"{endpoint} stopped at its limit of {routed.max_tokens} tokens before the "
                    "code was complete; nothing was changed (select less code, or raise the "
                    "endpoint's max_tokens)"
                ) from None
            raise RefactorFailed(f"{endpoint} answered, but {error}; nothing was changed") from None
        return RefactorResult(edits, endpoint, routed.reason, instruction)


def local_answer_budget(selection_chars: int) -> int:
    """Tokens the local model may write for a selection of this size."""
    wanted = estimate_tokens(2 * selection_chars) + LOCAL_MIN_TOKENS // 2
    return max(LOCAL_MIN_TOKENS, min(LOCAL_CHAT_MAX_TOKENS, wanted))


def _cut_short(routed: Answered) -> bool:
    """The answer stopped at its token limit, as the upstream said or as its count shows."""
    reason = routed.usage.finish_reason
    if reason is not None:
        return reason == "length"
    return routed.usage.completion_tokens >= routed.max_tokens
