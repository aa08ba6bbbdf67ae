"""The inline-suggestion service: document text and cursor in, one cleaned suggestion out.

Front doors (LSP, CLI) call this; it owns the cache lookup, the privacy verdict, the router call
and post-processing, and knows nothing of the protocol that asked.
"""

from __future__ import annotations

from dataclasses import dataclass

from lsp_server.privacy.guard import PrivacyGuard
from lsp_server.routing.endpoint_pool import LOCAL_NAME
from lsp_server.routing.router import Router
from lsp_server.suggest.cache import CompletionCache
from lsp_server.suggest.postprocess import clean_suggestion
from lsp_server.suggest.prompt import build_completion_request


@dataclass(frozen=True, slots=True)
class Suggestion:
    text: str
    endpoint: str | None
    reason: str
    latency_ms: float
    from_cache: bool = False


class SuggestionService:
    def __init__(self, router: Router, *, cache: CompletionCache | None = None) -> None:
        self.router = router
        self.cache = cache or CompletionCache()
        self.privacy = PrivacyGuard(lambda: router.config.routing)

    async def suggest(
        self, *, uri: str, text: str, offset: int, language: str, pinned: str | None = None
    ) -> Suggestion:
        """One suggestion at `offset`; `pinned` asks that one endpoint only (privacy wins)."""
        request = build_completion_request(
            text, offset, language=language, path=uri, max_tokens=self._max_tokens()
        )
        local_only = self.privacy.window_reason(
            uri, text, offset - len(request.prefix), offset, offset + len(request.suffix)
        )
        cached = self.cache.get(uri, request.prefix, request.suffix) if pinned is None else None
        if cached is not None and (local_only is None or cached.source == LOCAL_NAME):
            self.router.record_cache_hit(cached.source, uri)
            return Suggestion(cached.text, cached.source, "cache", 0.0, from_cache=True)
        routed = await self.router.inline(request, uri=uri, local_only=local_only, pinned=pinned)
        text_out = clean_suggestion(routed.text, request)
        if text_out and routed.endpoint is not None:
            self.cache.put(uri, request.prefix, request.suffix, text_out, routed.endpoint)
        return Suggestion(text_out, routed.endpoint, routed.reason, routed.latency_ms)

    def prefill(self, *, uri: str, text: str, offset: int, language: str) -> bool:
        """Prepare the local model for a request at `offset` (the document was just opened or
        edited there), if it is the model that will answer; True if it started."""
        request = build_completion_request(
            text, offset, language=language, path=uri, max_tokens=self._max_tokens()
        )
        local_only = self.privacy.window_reason(
            uri, text, offset - len(request.prefix), offset, offset + len(request.suffix)
        )
        return self.router.prefill_local(request, local_only=local_only)

    def forget(self, uri: str) -> None:
        self.cache.invalidate(uri)
        self.privacy.forget(uri)

    def _max_tokens(self) -> int:
        config = self.router.config
        limits = [e.max_tokens for e in config.endpoints_with_role("inline")]
        limits.append(config.local.max_tokens)
        return max(limits)
