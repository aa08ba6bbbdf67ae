"""The next-edit service: a document and a cursor (or a client's own prompt) in, the smallest
edits of the predicted next edit and what happened out.

It assembles the request from what the server has seen (the editable region, the edit
history, the context store's recently viewed chunks), judges every part of it for privacy,
asks the router (each `edit` endpoint in its own format), and turns the answer into edits
inside the region, or none. It knows nothing of the protocol that asked.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace

from lsp_server.backends.base import ContextChunk, EditCall, Usage
from lsp_server.config.model import EndpointConfig
from lsp_server.context.store import ContextStore
from lsp_server.failures import EndpointFailure, Refused
from lsp_server.nextedit.ahead import PAUSE_S, Ahead, Prepared
from lsp_server.nextedit.edit_filter import EditFilter
from lsp_server.nextedit.edits import OutsideTheRegion, hull, region_edits
from lsp_server.nextedit.history import EditHistory
from lsp_server.nextedit.kept_rate import KEPT_WINDOW_S, KeptRate
from lsp_server.nextedit.prompts import edit_call, format_of, read_answer
from lsp_server.nextedit.region import context_window, editable_region
from lsp_server.nextedit.request import EditRequest
from lsp_server.permit import Permit
from lsp_server.privacy.guard import PrivacyGuard
from lsp_server.reasons import Reason
from lsp_server.routing.endpoint_pool import Endpoint
from lsp_server.routing.router import Router
from lsp_server.text_edits import OffsetEdit

# Tokens of recently viewed code in a next-edit prompt.
SNIPPET_TOKENS = 1024
MAX_PENDING_OUTCOMES = 256  # edits shown and not yet accepted or dismissed, remembered by id
_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class NextEdit:
    """A predicted next edit: `edits` of the document (sorted, none when nothing changes) and
    the rewritten region they come from; who answered and why, and what failed."""

    id: str
    edits: tuple[OffsetEdit, ...]
    region: tuple[int, int]
    new_region: str | None  # None: no edit proposed, or the answer was dropped
    endpoint: str | None
    reason: Reason
    latency_ms: float
    timed_out: bool = False
    failures: tuple[EndpointFailure, ...] = ()
    dropped: str | None = None  # why an answer was not used
    # All of `edits` as one replacement: what a client showing one change per edit takes.
    hull: OffsetEdit | None = None
    # Why nothing could have served it, when nothing did: no endpoint, the local model off.
    unavailable: Refused | None = None
    usage: Usage | None = None  # the answering call's counts
    tokens: int = 0  # tokens the answer took
    # Pieces of context (other documents' edits, snippets) left out because they were
    # sensitive or held a secret: a count, never their content.
    withheld: int = 0
    replaced: str = ""  # the text `hull` replaces


class NextEditService:
    def __init__(
        self,
        router: Router,
        privacy: PrivacyGuard,
        context: ContextStore | None = None,
        *,
        prepare_after_s: float = PAUSE_S,
        kept_window_s: float = KEPT_WINDOW_S,
    ) -> None:
        """`prepare_after_s`: the pause in typing after which a request is prepared;
        `kept_window_s`: how long after an acceptance the kept rate is measured."""
        self.router = router
        self.privacy = privacy
        self.context = context
        self.history = EditHistory()
        self.filter = EditFilter()
        self.kept = KeptRate(self.history, router.edit_outcomes, window_s=kept_window_s)
        # id -> (uri, edit), awaiting an outcome
        self._shown: OrderedDict[str, tuple[str, NextEdit]] = OrderedDict()
        self._last_shown: dict[str, str] = {}  # uri -> id of the edit last shown there
        self._ahead = Ahead(self._prepared, pause_s=prepare_after_s)
        self._events = 0  # document events seen: each changes the history a prompt carries
        self._asked = False  # whether a next edit was ever asked: else none is prepared

    # -- what the server sees ---------------------------------------------------------------

    def opened(self, uri: str, text: str) -> None:
        self._event()
        self.history.opened(uri, text)

    def changed(self, uri: str, text: str, line: int | None) -> None:
        self._event()
        self.history.changed(uri, self._path(uri), text, line)

    def closed(self, uri: str) -> None:
        self._event()
        self.history.closed(uri)

    def prepare(self, *, uri: str, text: str, offset: int, language: str) -> None:
        """A change left the cursor at `offset`: assemble the next edit's request there once
        typing pauses (`nextedit.ahead`), if the client asks for next edits at all."""
        if self._asked:
            self._ahead.soon(uri, text, offset, language)

    def close(self) -> None:
        self._ahead.drop()

    def _event(self) -> None:
        self._events += 1
        self._ahead.drop()

    # -- predictions ------------------------------------------------------------------------

    async def predict(
        self, *, uri: str, text: str, offset: int, language: str, pinned: str | None = None
    ) -> NextEdit:
        """The next edit around `offset` in a document the server holds."""
        self._asked = True
        self._dismiss_unanswered(uri)
        state = self._state()
        prepared = self._ahead.take(uri, text, offset, language, state, self.history.now())
        if prepared is not None:
            return await self._route(
                prepared.request,
                prepared.stay_local,
                pinned,
                prepared.calls,
                withheld=prepared.withheld,
            )
        request = self._assemble(uri, text, offset, language)
        return await self.answer(request, pinned=pinned)

    async def answer(
        self, request: EditRequest, *, sensitive: bool = False, pinned: str | None = None
    ) -> NextEdit:
        """The next edit for an assembled request (a gateway client's prompt, or `predict`'s);
        `sensitive` is the client saying so itself."""
        stay_local = Reason.SENSITIVE if sensitive else self._privacy(request)
        request, withheld = self._shareable(request, stay_local)
        return await self._route(request, stay_local, pinned, withheld=withheld)

    def _assemble(self, uri: str, text: str, offset: int, language: str) -> EditRequest:
        region = editable_region(text, offset)
        snippets: tuple[ContextChunk, ...] = ()
        if self.context is not None:
            snippets = self.context.ranked(uri, text, region, offset, SNIPPET_TOKENS)
        return EditRequest(
            uri=uri,
            path=self._path(uri),
            text=text,
            cursor=offset,
            region=region,
            history=self.history.recent(),
            snippets=snippets,
            language=language,
        )

    def _state(self) -> tuple[object, ...]:
        """What a request's assembly and privacy verdict read besides the document: the
        configuration, the context store's contents, the history's events."""
        revision = self.context.revision if self.context is not None else 0
        return (self.router.config, revision, self._events)

    async def _prepared(self, uri: str, text: str, offset: int, language: str) -> Prepared | None:
        """`predict`'s assembly and privacy verdict, done ahead: the context gathered first,
        and the loop given back between the steps; None if the state moved meanwhile."""
        if self.context is not None:
            await self.context.settled()
        state = self._state()
        request = self._assemble(uri, text, offset, language)
        await asyncio.sleep(0)
        if self._state() != state:
            return None
        stay_local = self._window_reason(request)
        if stay_local is None:
            await asyncio.sleep(0)
            if self._state() != state:
                return None
            stay_local = self._own_history_reason(request)
        request, withheld = self._shareable(request, stay_local)
        answerers = self.router.answerers("edit", stay_local)
        local = (answerers.local,) if answerers.local is not None else ()
        calls = {
            e.name: (e.config, edit_call(request, e.config)) for e in (*answerers.remotes, *local)
        }
        if answerers.local is not None and answerers.local_must_answer:
            self._read_ahead_locally(calls[answerers.local.name][1])
        until = self.history.recent_until()
        return Prepared(request, stay_local, state, until, calls, withheld)

    def _read_ahead_locally(self, call: EditCall) -> None:
        """The local model alone will answer (offline, or a sensitive document): it reads the
        prompt now, while typing pauses, so the request finds it read (a request or a
        keystroke stops it; what it read stays for the next edit)."""
        model = self.router.pool.local_model
        if model is not None:
            model.prefill_edit(call)

    async def _route(
        self,
        request: EditRequest,
        stay_local: Reason | None,
        pinned: str | None,
        calls: Mapping[str, tuple[EndpointConfig | None, EditCall]] | None = None,
        *,
        withheld: int = 0,
    ) -> NextEdit:
        """`calls`: each endpoint's call made ahead, used while its configuration stands;
        `withheld`: pieces of context left out for privacy."""
        answer_tokens = len(request.region_text) // 2 + 64

        def ask(endpoint: Endpoint, usage: Usage, permit: Permit) -> AsyncIterator[str]:
            made = calls.get(endpoint.name) if calls is not None else None
            if made is not None and made[0] is endpoint.config:
                return endpoint.backend.edit(made[1], usage, permit=permit)
            return endpoint.backend.edit(edit_call(request, endpoint.config), usage, permit=permit)

        routed = await self.router.edit(
            ask,
            prompt_chars=len(request.text),
            answer_tokens=answer_tokens,
            uri=request.uri,
            local_only=stay_local,
            pinned=pinned,
        )
        new_region: str | None = None
        edits: list[OffsetEdit] = []
        dropped = None
        if routed.endpoint is not None and routed.text:
            answering = self.router.pool.get(routed.endpoint)
            form = format_of(answering.config if answering is not None else None)
            try:
                new_region = read_answer(form, routed.text)
                if new_region is not None:
                    edits = region_edits(request, new_region)
            except (OutsideTheRegion, ValueError) as error:
                new_region, edits, dropped = None, [], str(error)
        unavailable = None
        if routed.endpoint is None and not routed.timed_out:
            unavailable = self.router.answerers("edit", stay_local).unavailable("edit")
        edit = NextEdit(
            id=str(next(_ids)),
            edits=tuple(edits),
            region=request.region,
            new_region=new_region,
            endpoint=routed.endpoint,
            reason=routed.reason,
            latency_ms=routed.latency_ms,
            timed_out=routed.timed_out,
            failures=routed.failures,
            dropped=dropped,
            hull=hull(edits, request.text) if edits else None,
            unavailable=unavailable,
            usage=routed.usage,
            tokens=routed.tokens,
            withheld=withheld,
        )
        return self._screened(request, edit)

    def _screened(self, request: EditRequest, edit: NextEdit) -> NextEdit:
        """The edit as it may be shown: dropped when the filter says it is not worth it."""
        if edit.hull is None:
            return edit
        eagerness = self.router.config.routing.edit_eagerness
        why = self.filter.verdict(request, edit.edits, eagerness)
        if why is not None:
            return replace(edit, edits=(), new_region=None, hull=None, dropped=why)
        return replace(edit, replaced=request.text[edit.hull.start : edit.hull.end])

    # -- what became of an edit -------------------------------------------------------------

    def proposed(self, uri: str, edit: NextEdit) -> None:
        """An edit went to a client, which may show it."""
        if edit.endpoint is None or not edit.edits:
            return
        self._shown[edit.id] = (uri, edit)
        self._shown.move_to_end(edit.id)
        while len(self._shown) > MAX_PENDING_OUTCOMES:
            self._shown.popitem(last=False)
        self._last_shown[uri] = edit.id

    def shown(self, edit_id: str) -> None:
        shown = self._shown.get(edit_id)
        if shown is not None and shown[1].endpoint is not None:
            self.router.edit_outcomes.shown[shown[1].endpoint] += 1

    def accepted(self, edit_id: str) -> bool:
        """Counted, and the kept rate measured once its window is over."""
        uri, edit = self._shown.pop(edit_id, (None, None))
        if uri is None or edit is None or edit.endpoint is None or edit.hull is None:
            return False
        self.router.edit_outcomes.accepted[edit.endpoint] += 1
        self.kept.accepted(edit.endpoint, uri, edit.hull.start, edit.replaced, edit.hull.text)
        return True

    def dismissed(self, edit_id: str, *, passed_over: bool = False) -> bool:
        """Counted; dismissed by the user (not `passed_over`), not shown again at the same
        place for a while."""
        uri, edit = self._shown.pop(edit_id, (None, None))
        if uri is None or edit is None or edit.endpoint is None or edit.hull is None:
            return False
        self.router.edit_outcomes.dismissed[edit.endpoint] += 1
        if not passed_over:
            self.filter.dismissed(uri, edit.replaced, edit.hull.text)
        return True

    def _dismiss_unanswered(self, uri: str) -> None:
        """A new request where an edit was shown and not accepted: it was passed over."""
        previous = self._last_shown.pop(uri, None)
        if previous is not None:
            self.dismissed(previous, passed_over=True)

    # -- privacy ------------------------------------------------------------------------------

    def _privacy(self, request: EditRequest) -> Reason | None:
        """Why what the request is about must stay here: the file around the region (its
        path and contents) and this document's own recent edits, which go whole or not at
        all. What only adds context is `_shareable`'s."""
        return self._window_reason(request) or self._own_history_reason(request)

    def _window_reason(self, request: EditRequest) -> Reason | None:
        window = context_window(request.text, request.region)
        return self.privacy.window_reason(
            request.uri, request.text, window[0], request.cursor, window[1]
        )

    def _own_history_reason(self, request: EditRequest) -> Reason | None:
        own = [edit.lines for edit in request.history if edit.uri == request.uri]
        return self.privacy.texts_reason(request.uri, own) if own else None

    def _shareable(
        self, request: EditRequest, stay_local: Reason | None
    ) -> tuple[EditRequest, int]:
        """`request` without the context that may not leave the machine (another document's
        recent edit, a snippet: from a sensitive path or holding a secret), and how many
        pieces that was; the rule is the privacy guard's (`may_join`). A request that stays
        here anyway keeps all of it. A client's own Mercury messages, which carry every
        piece, give way to a prompt written from what is left."""
        if self.router.gate.verdict(stay_local) is not None:
            return request, 0
        history = tuple(
            edit
            for edit in request.history
            if edit.uri == request.uri or self.privacy.may_join(edit.uri, edit.lines)
        )
        snippets = tuple(
            chunk for chunk in request.snippets if self.privacy.may_join(chunk.path, chunk.text)
        )
        withheld = len(request.history) - len(history) + len(request.snippets) - len(snippets)
        if not withheld:
            return request, 0
        return replace(request, history=history, snippets=snippets, mercury_messages=()), withheld

    def _path(self, uri: str) -> str:
        path = self.context.workspace_path(uri) if self.context is not None else ""
        return path or uri.rsplit("/", 1)[-1]
