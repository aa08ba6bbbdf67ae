"""The chat service: a conversation in, the routed answer out, privacy judged over all of it.

Front doors that bring their own conversation (the gateway's chat completions, and the
Responses API bridged onto them) call `chat`. It judges privacy over everything the request
would send upstream (every message's text, every tool call's name and arguments, every tool
result, the stop strings), then lets the router's chat route (`routing/chat_route.py`) choose
the endpoints for the `model` named (a task class or an endpoint) and ask them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lsp_server.backends.base import ChatEvent, ChatRequest
from lsp_server.config.model_names import AUTO
from lsp_server.privacy.guard import PrivacyGuard
from lsp_server.reasons import Reason
from lsp_server.routing.router import Router
from lsp_server.routing.sequential_route import Answered


class ChatService:
    def __init__(self, router: Router, privacy: PrivacyGuard) -> None:
        self.router = router
        self.privacy = privacy

    def stay_local(
        self,
        request: ChatRequest,
        *,
        uri: str,
        sensitive: bool,
        client: str = "",
        extra: Sequence[str] = (),
    ) -> Reason | None:
        """Why this conversation must stay on this machine, or None. Its texts are read apart
        and run together, so a secret split across two of them is still one; `extra` holds
        what else the client sent that goes upstream (judged first, as it seldom changes
        between turns). What `client` sent in its earlier turns is not judged again."""
        if sensitive:
            return Reason.SENSITIVE
        texts = [*extra, *sent_texts(request)]
        return self.privacy.conversation_reason(uri, texts, client=client, stop=request.stop)

    async def chat(
        self,
        request: ChatRequest,
        *,
        model: str = AUTO,
        uri: str,
        sensitive: bool = False,
        client: str = "",
        extra: Sequence[str] = (),
        on_event: Callable[[ChatEvent], None] | None = None,
        on_attempt: Callable[[str], None] | None = None,
        relay: bool = False,
    ) -> Answered:
        """The answer, text and tool calls, from the endpoints `model` names (`auto`, `fast`,
        `reasoning`, `local`, or an endpoint's name).

        Before asking anyone it raises `Refused` (for instance: an unknown model, or the
        request must stay local and the local model is off, or cannot call tools); after,
        `RouteFailed` when every endpoint asked failed. `client` names who sent it (its
        earlier turns are not judged again); what else it sent upstream beyond the
        conversation (`extra`), judged with it. `on_attempt` hears each
        endpoint's name as it is asked, `on_event` each text or tool-call piece as it comes;
        once a piece was passed on, a failure is not restarted on the next endpoint. `relay`:
        the caller passes the stream on to an OpenAI client as it comes, so an endpoint whose
        stream is already in that form may give its own events (`Relayed`) instead of pieces;
        the answer then holds no text.
        """
        stay_local = self.stay_local(
            request, uri=uri, sensitive=sensitive, client=client, extra=extra
        )
        plan = self.router.chats.plan(model, request, local_only=stay_local, relay=relay)
        return await self.router.sequential.run(
            plan, request, uri=uri, on_event=on_event, on_attempt=on_attempt
        )


def sent_texts(request: ChatRequest) -> list[str]:
    """Everything in a chat request that a person or a tool wrote: each message's text (the
    instructions, the text parts, the tool results) and each tool call's name and arguments."""
    texts = []
    for message in request.messages:
        texts.append(message.content)
        texts.extend(f"{call.name} {call.arguments}" for call in message.tool_calls)
    return texts
