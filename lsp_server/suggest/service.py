"""The inline-suggestion service: a request in, one cleaned suggestion and what happened out.

Every front door asks it: the LSP and `gateway-ls complete` with a document and a cursor
(`suggest`), the gateway with a prompt and suffix it already holds (`complete`). It owns the
cache lookup, the privacy verdict, the router call and the cleaning, and knows nothing of the
protocol that asked. Context beyond the file (`context/`) joins a document's request here:
the store's ranked chunks, which each backend cuts to its own budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from lsp_server.backends.base import CompletionRequest, Usage
from lsp_server.config.model_names import LOCAL
from lsp_server.context.store import ContextStore
from lsp_server.failures import EndpointFailure, Refused
from lsp_server.privacy.guard import PrivacyGuard
from lsp_server.reasons import Reason
from lsp_server.routing.race_route import Routed
from lsp_server.routing.router import Router
from lsp_server.suggest.cache import CompletionCache
from lsp_server.suggest.client_request import client_completion
from lsp_server.suggest.offered import OfferedSuggestions
from lsp_server.suggest.postprocess import clean_suggestion, complete_lines
from lsp_server.suggest.prompt import build_completion_request
from lsp_server.suggest.streaming import StreamingCleaner, cut_at_stops

# `on_accepted(endpoint, uri, start, replaced, text)`: an accepted suggestion, to be measured.
OnAccepted = Callable[[str, str, int, str, str], None]

# A document suggested in once at start (`prepare`), as the first keystroke would be.
_SAMPLE_URI = "file:///first-keystroke.py"
_SAMPLE_TEXT = "import os\n\n\ndef first(a, b):\n    \n"
_SAMPLE_ANSWER = "return os.path.join(a, b)\n"


@dataclass(frozen=True, slots=True)
class Suggestion:
    """One suggestion and how it came: who answered, why them, what failed on the way."""

    text: str  # cleaned, ready to show
    endpoint: str | None  # None: nothing answered (see `reason`, `failures`, `unavailable`)
    reason: Reason
    latency_ms: float
    from_cache: bool = False
    timed_out: bool = False
    failures: tuple[EndpointFailure, ...] = ()
    usage: Usage | None = None  # the answering call's counts and finish reason
    tokens: int = 0  # tokens the answer took
    cut_short: bool = False  # it ran out of tokens or of time before it ended by itself
    # Why nothing could have served it, when nothing did: no endpoint, the local model off.
    unavailable: Refused | None = None
    # For a streamed request, what is left to send after the pieces passed to `on_text`.
    rest: str = ""

    @property
    def detail(self) -> str | None:
        """What went wrong, in one line, when something did."""
        if self.failures:
            return "; ".join(str(f) for f in self.failures)
        return "no answer within the deadline" if self.timed_out else None


class SuggestionService:
    def __init__(
        self,
        router: Router,
        privacy: PrivacyGuard,
        cache: CompletionCache,
        context: ContextStore | None = None,
        *,
        on_accepted: OnAccepted | None = None,
    ) -> None:
        """`context`: where context beyond the file comes from (None: the window alone);
        `on_accepted` hears each suggestion accepted (the kept rate's measure)."""
        self.router = router
        self.privacy = privacy
        self.cache = cache
        self.context = context
        self.offers = OfferedSuggestions()
        self._on_accepted = on_accepted

    async def suggest(
        self, *, uri: str, text: str, offset: int, language: str, pinned: str | None = None
    ) -> Suggestion:
        """One suggestion at `offset` in a document; `pinned` asks that one endpoint only
        (privacy wins over it)."""
        request = self._document_request(uri, text, offset, language)
        window = (offset - len(request.prefix), offset + len(request.suffix))
        if self.context is not None:
            self.context.completion_at(uri, text, language, window)
        stay_local = self.privacy.window_reason(uri, text, window[0], offset, window[1])
        cached = self.cache.get(uri, request.prefix, request.suffix) if pinned is None else None
        if cached is not None and (stay_local is None or cached.source == LOCAL):
            self.router.record_cache_hit(cached.source, uri)
            return Suggestion(cached.text, cached.source, Reason.CACHE, 0.0, from_cache=True)
        suggestion = await self._route(request, uri, stay_local, pinned, None, None)
        if suggestion.timed_out and not suggestion.text:
            # The local model had no time to read this prompt: it reads on while idle, so the
            # next keystroke here finds it read.
            self.router.prefill_local(request, local_only=stay_local)
        if suggestion.text and suggestion.endpoint is not None:
            self.cache.put(
                uri, request.prefix, request.suffix, suggestion.text, suggestion.endpoint
            )
        return suggestion

    # The request for a prompt and suffix a client sent, shaped as a keystroke's is.
    client_request = staticmethod(client_completion)

    async def complete(
        self,
        request: CompletionRequest,
        *,
        uri: str,
        sensitive: bool = False,
        pinned: str | None = None,
        on_text: Callable[[str], None] | None = None,
        on_attempt: Callable[[str], None] | None = None,
    ) -> Suggestion:
        """A suggestion for a prompt and suffix a client sent (the gateway's completions).

        Everything that goes upstream is judged at once: prompt, suffix and stop strings, and
        `uri` as a path; `sensitive` is the client saying so itself. With `on_text` the
        cleaned text streams out as it settles, and `rest` holds what follows it."""
        sent = "\n".join((request.prefix, request.suffix, request.prefix + request.suffix))
        sent = "\n".join((sent, *request.stop))
        stay_local = Reason.SENSITIVE if sensitive else self.privacy.text_reason(uri, sent)
        return await self._route(request, uri, stay_local, pinned, on_text, on_attempt)

    def prepare(self) -> None:
        """Do once, on any thread, what the first suggestion would do once on the event loop:
        a request built, judged (the privacy patterns compiled) and its answer cleaned."""
        request = build_completion_request(
            _SAMPLE_TEXT,
            len(_SAMPLE_TEXT) - 1,
            language="python",
            path=_SAMPLE_URI,
            max_tokens=self._max_tokens(),
        )
        self.privacy.prepare(_SAMPLE_URI, _SAMPLE_TEXT)
        clean_suggestion(cut_at_stops(_SAMPLE_ANSWER, request.stop), request)

    def prefill(self, *, uri: str, text: str, offset: int, language: str) -> bool:
        """Prepare the local model for a request at `offset` (the document was just opened or
        edited there), if it is the model that will answer; True if it started."""
        request = self._document_request(uri, text, offset, language)
        stay_local = self.privacy.window_reason(
            uri, text, offset - len(request.prefix), offset, offset + len(request.suffix)
        )
        return self.router.prefill_local(request, local_only=stay_local)

    async def load_local_if_it_answers(
        self, *, uri: str, text: str, pinned: str | None = None
    ) -> None:
        """Load the local model first when it will answer a request on this document, so a
        one-off request's budget is spent generating, not loading (`gateway-ls complete`)."""
        model = self.router.pool.local_model
        if model is None:
            return
        stay_local = self.privacy.text_reason(uri, text)
        if pinned == LOCAL or self.router.answerers("inline", stay_local).local_must_answer:
            await model.ensure_loaded()

    # -- what became of a suggestion ----------------------------------------------------------

    def offer(self, uri: str, offset: int, suggestion: Suggestion) -> str | None:
        """`suggestion`, inserted at `offset`, goes to an editor, which may show it: counted for
        the endpoint that answered; the id under which its acceptance may be reported (None:
        nothing to accept)."""
        if not suggestion.text or suggestion.endpoint is None:
            return None
        self.router.outcomes.inline_offered(endpoint=suggestion.endpoint)
        return self.offers.offer(
            uri=uri, offset=offset, text=suggestion.text, endpoint=suggestion.endpoint
        )

    def accepted(self, offer_id: str) -> bool:
        """The editor inserted the suggestion offered under `offer_id`: counted, and its kept
        rate measured; False when no such suggestion was offered lately."""
        offered = self.offers.take(offer_id)
        if offered is None:
            return False
        self.router.outcomes.inline_accepted(endpoint=offered.endpoint)
        if self._on_accepted is not None:
            self._on_accepted(offered.endpoint, offered.uri, offered.offset, "", offered.text)
        return True

    def forget(self, uri: str) -> None:
        self.cache.invalidate(uri)
        self.privacy.forget(uri)

    async def _route(
        self,
        request: CompletionRequest,
        uri: str,
        stay_local: Reason | None,
        pinned: str | None,
        on_text: Callable[[str], None] | None,
        on_attempt: Callable[[str], None] | None,
    ) -> Suggestion:
        cleaner = StreamingCleaner(request) if on_text is not None else None

        def stream(piece: str) -> None:
            assert cleaner is not None and on_text is not None
            sendable = cleaner.feed(piece)
            if sendable:
                on_text(sendable)

        routed = await self.router.inline(
            request,
            uri=uri,
            local_only=stay_local,
            pinned=pinned,
            on_text=stream if cleaner is not None else None,
            on_attempt=on_attempt,
        )
        raw = cut_at_stops(routed.text, request.stop)
        if routed.timed_out and cleaner is None:
            raw = complete_lines(raw)
        text = cleaner.clean(raw) if cleaner is not None else clean_suggestion(raw, request)
        unavailable = None
        if routed.endpoint is None and not routed.timed_out:
            unavailable = self.router.answerers("inline", stay_local).unavailable("inline")
        return Suggestion(
            text,
            routed.endpoint,
            routed.reason,
            routed.latency_ms,
            timed_out=routed.timed_out,
            failures=routed.failures,
            usage=routed.usage,
            tokens=routed.tokens,
            cut_short=self._cut_short(routed, raw, text, request),
            unavailable=unavailable,
            rest=cleaner.finish(text) if cleaner is not None else "",
        )

    def _cut_short(self, routed: Routed, raw: str, text: str, request: CompletionRequest) -> bool:
        """The answer ran out of tokens (the client's, or the endpoint's cap that cut them) or
        time, and post-processing did not end it earlier."""
        if routed.timed_out:
            return True
        if raw.rstrip() and not raw.rstrip().endswith(text.rstrip() or "\0"):
            return False  # post-processing ended it at a boundary of its own
        usage = routed.usage
        if usage is not None and usage.finish_reason is not None:
            return usage.finish_reason == "length"
        cap = routed.max_tokens if routed.max_tokens is not None else request.max_tokens
        return routed.tokens >= cap

    def _document_request(
        self, uri: str, text: str, offset: int, language: str
    ) -> CompletionRequest:
        request = build_completion_request(
            text, offset, language=language, path=uri, max_tokens=self._max_tokens()
        )
        if self.context is None:
            return request
        window = (offset - len(request.prefix), offset + len(request.suffix))
        chunks = self.context.ranked(uri, text, window, offset, self._context_tokens())
        if not chunks:
            return request
        return replace(request, context=chunks, workspace_path=self.context.workspace_path(uri))

    def _context_tokens(self) -> int:
        """The largest context budget of those who may answer: each cuts its own from it."""
        config = self.router.config
        budgets = [e.context_tokens for e in config.endpoints_with_role("inline")]
        local = self.router.pool.local_model
        if config.local.enabled and local is not None:
            budgets.append(local.context_tokens)
        return max(budgets, default=0)

    def _max_tokens(self) -> int:
        config = self.router.config
        limits = [e.max_tokens for e in config.endpoints_with_role("inline")]
        limits.append(config.local.max_tokens)
        return max(limits)
