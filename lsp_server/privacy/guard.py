"""The one privacy verdict every front door asks for: inline suggestions, refactors, the gateway.

A request must stay on this machine when its document is sensitive by path, when a secret is in
what would be sent, or when the document holds a private key anywhere. What would be sent is
judged generously: the whole lines around a prompt window and one line more each way (up to
`CONTEXT_MARGIN` characters beyond each edge), so a window that starts or ends inside a token
still sees the whole token, and a value cut from its name on the line before still has it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence

from lsp_server.config.model import RoutingConfig
from lsp_server.privacy.conversation_memo import ConversationMemo
from lsp_server.privacy.policy import (
    MULTI_LINE_MARKER,
    PrivacyVerdict,
    SecretMemo,
    SensitivityPolicy,
    classify,
)
from lsp_server.privacy.secret_rules import find_private_key, first_secret
from lsp_server.reasons import Reason

log = logging.getLogger(__name__)

# Longer than any single-line secret the rules know; on a minified line the scan stops here.
CONTEXT_MARGIN = 4096
_MAX_MEMOS = 256


def context_span(text: str, start: int, end: int) -> tuple[int, int]:
    """`text[start:end]` widened to whole lines and one more line each way (a name on one line
    and its value on the next), at most `CONTEXT_MARGIN` further each way."""
    floor = max(0, start - CONTEXT_MARGIN)
    newline = text.rfind("\n", floor, start)
    if newline != -1:
        newline = text.rfind("\n", floor, newline)
    span_start = newline + 1 if newline != -1 else floor
    ceiling = min(len(text), end + CONTEXT_MARGIN)
    newline = text.find("\n", end, ceiling)
    if newline != -1:
        newline = text.find("\n", newline + 1, ceiling)
    span_end = newline if newline != -1 else ceiling
    return span_start, span_end


class PrivacyGuard:
    """Privacy verdicts under the routing configuration in force (which may change at run time)."""

    def __init__(self, routing: Callable[[], RoutingConfig]) -> None:
        self._routing = routing
        self._globs: Sequence[str] = ()
        self._policy = SensitivityPolicy(())
        self._memos: OrderedDict[str, SecretMemo] = OrderedDict()
        self._conversations = ConversationMemo()
        # Pieces of context left out of prompts by `may_join` since start: a count, never
        # what they held (`gatewayLs.status`).
        self.withheld = 0

    def prepare(self, uri: str, text: str) -> None:
        """Compile the path patterns in force and run the rules over `text` once, on any
        thread: the first keystroke would otherwise spend a fifth of a second of its budget
        compiling. `uri` is judged without a memo, so nothing of it is kept."""
        routing = self._routing()
        classify(self._policy_for(routing), uri, text, redact_secrets=True)
        _private_key_anywhere(text)

    def window_reason(
        self, uri: str, text: str, start: int, cursor: int, end: int
    ) -> Reason | None:
        """Why a prompt window `text[start:end]` around `cursor` must stay here, or None.

        Keystroke after keystroke in one document, the prompt is judged through that
        document's `SecretMemo`: a keystroke rescans the lines around the cursor, and a moved
        window the blocks of lines at its edges.
        """
        routing = self._routing()
        span_start, span_end = context_span(text, start, end)
        verdict = classify(
            self._policy_for(routing),
            uri,
            text[span_start:cursor],
            text[cursor:span_end],
            redact_secrets=routing.redact_secrets,
            memo=self._memo_for(uri),
        )
        if not verdict.local_only and routing.redact_secrets:
            verdict = _private_key_anywhere(text)
        return self._reason(uri, verdict)

    def text_reason(self, uri: str, text: str) -> Reason | None:
        """Why a request carrying all of `text` must stay here, or None."""
        return self.texts_reason(uri, (text,))

    def texts_reason(self, uri: str, texts: Iterable[str]) -> Reason | None:
        """Why a request carrying each of `texts` (pieces from `uri`, each read on its own)
        must stay here, or None; the path is judged once for all of them."""
        routing = self._routing()
        verdict = classify(self._policy_for(routing), uri, "", redact_secrets=False)
        if not verdict.local_only and routing.redact_secrets:
            for text in texts:
                finding = first_secret(text)
                if finding is not None:
                    verdict = PrivacyVerdict(
                        local_only=True, reason="secret-in-prompt", detail=finding.kind
                    )
                    break
        return self._reason(uri, verdict)

    def conversation_reason(
        self, uri: str, texts: Sequence[str], *, client: str, stop: Sequence[str] = ()
    ) -> Reason | None:
        """Why a conversation carrying `texts` (its messages' texts, in order) and `stop`
        (its stop strings, judged on their own each time) must stay here, or None.

        The texts are read apart and run together, so a secret split across two is still one.
        Turn after turn, the texts a client sent before are not read again: `client`'s
        `ConversationMemo` judges from the first text not yet judged clean.
        """
        routing = self._routing()
        policy = self._policy_for(routing)
        verdict = classify(policy, uri, "\n".join(stop), redact_secrets=routing.redact_secrets)
        if not verdict.local_only and routing.redact_secrets:
            kind = self._conversations.first_secret_kind(client, texts)
            if kind is not None:
                verdict = PrivacyVerdict(local_only=True, reason="secret-in-prompt", detail=kind)
        return self._reason(uri, verdict)

    def excerpt_reason(self, uri: str, excerpt: str, document: str = "") -> Reason | None:
        """Why `excerpt` (whole lines of `document`, at `uri`) must not join the prompt of
        another request, or None. Stricter than a window: a secret in it rules it out even
        with `redact_secrets` off (nobody asked for it to be sent), and so does a private key
        anywhere in the document. The path alone is judged when `excerpt` is empty."""
        verdict = classify(self._policy_for(self._routing()), uri, excerpt, redact_secrets=True)
        if not verdict.local_only and document:
            verdict = _private_key_anywhere(document)
        return self._reason(uri, verdict)

    def may_join(self, uri: str, piece: str, document: str = "") -> bool:
        """The one rule for what only adds context to a request (a snippet, a chunk of an
        open file, another document's recent edit, an imported definition): it joins the
        prompt unless `excerpt_reason` rules it out (a sensitive path, a secret in it, a
        private key in its `document`); a piece left out is counted and the request goes on
        without it. What a request is about is judged whole instead (`window_reason`,
        `texts_reason`, `conversation_reason`): it goes whole or stays here."""
        if self.excerpt_reason(uri, piece, document) is None:
            return True
        self.withheld += 1
        return False

    def forget(self, uri: str) -> None:
        self._memos.pop(uri, None)

    def _policy_for(self, routing: RoutingConfig) -> SensitivityPolicy:
        if routing.sensitive_globs != self._globs:
            self._policy = SensitivityPolicy(routing.sensitive_globs)
            self._globs = routing.sensitive_globs
        return self._policy

    def _memo_for(self, uri: str) -> SecretMemo:
        memo = self._memos.get(uri)
        if memo is None:
            memo = self._memos[uri] = SecretMemo()
            if len(self._memos) > _MAX_MEMOS:
                self._memos.popitem(last=False)
        else:
            self._memos.move_to_end(uri)
        return memo

    @staticmethod
    def _reason(uri: str, verdict: PrivacyVerdict) -> Reason | None:
        if not verdict.local_only:
            return None
        log.debug("%s stays on this machine: %s (%s)", uri, verdict.reason, verdict.detail)
        return Reason.SENSITIVE


def _private_key_anywhere(text: str) -> PrivacyVerdict:
    """A document holding a private key block is sensitive wherever the window is."""
    if MULTI_LINE_MARKER in text and find_private_key(text):
        return PrivacyVerdict(local_only=True, reason="secret-in-prompt", detail="private-key")
    return PrivacyVerdict(local_only=False)
