"""The chat service: a conversation in, the routed answer out, privacy judged over all of it.

The gateway's chat route asks it; it makes the privacy verdict over every message and stop
string, refuses at once what nothing could serve, and routes the rest as refactor-class
traffic (the `refactor` endpoints, or the inline endpoints' chat, then the local model).
"""

from __future__ import annotations

from collections.abc import Callable

from lsp_server.backends.base import ChatRequest
from lsp_server.privacy.guard import PrivacyGuard
from lsp_server.reasons import Reason
from lsp_server.routing.answerers import NothingCanServe
from lsp_server.routing.router import Routed, Router


class ChatService:
    def __init__(self, router: Router, privacy: PrivacyGuard) -> None:
        self.router = router
        self.privacy = privacy

    def stay_local(self, request: ChatRequest, *, uri: str, sensitive: bool) -> Reason | None:
        """Why this conversation must stay on this machine, or None. The messages are read
        apart and run together, so a secret split across two of them is still one."""
        if sensitive:
            return Reason.SENSITIVE
        parts = [m.content for m in request.messages]
        sent = "\n".join((*parts, "".join(parts), *request.stop))
        return self.privacy.text_reason(uri, sent)

    async def chat(
        self,
        request: ChatRequest,
        *,
        uri: str,
        sensitive: bool = False,
        pinned: str | None = None,
        on_text: Callable[[str], None] | None = None,
        on_attempt: Callable[[str], None] | None = None,
    ) -> Routed:
        """The answer; raises `NothingCanServe` before asking anyone when nothing could, and
        `RoutingFailed` when everything asked failed. With `on_text` the answer streams, and a
        failure after text was passed on is not restarted on the next endpoint."""
        stay_local = self.stay_local(request, uri=uri, sensitive=sensitive)
        unavailable = self.router.answerers("refactor", stay_local).unavailable("refactor")
        if unavailable is not None:
            raise NothingCanServe(unavailable)
        return await self.router.refactor(
            request,
            uri=uri,
            local_only=stay_local,
            pinned=pinned,
            on_text=on_text,
            on_attempt=on_attempt,
            restart_after_text=on_text is None,
        )
