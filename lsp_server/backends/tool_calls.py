"""Streamed tool calls made regular, whatever shape the upstream sent them in.

The OpenAI spec for a streamed tool call: every piece names its call by `index`; the first
piece carries the call's `id` and function `name`, and the id never changes; the arguments
arrive in pieces after that. Upstreams bend it: some leave out `index`, some repeat the `id` on
every piece, some send a whole call in one piece, some never send an id, some write no
arguments at all. `ToolCallStream` takes pieces as they come and gives out pieces that keep the
spec, and at the end the calls whole (`"{}"` for arguments never written).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from lsp_server.backends.base import BackendError, ToolCall, ToolCallDelta
from lsp_server.failures import FailureKind

log = logging.getLogger(__name__)

# More calls than this in one answer is not a model at work; bounds memory against a hostile
# upstream (the arguments are bounded by the stream's own size limit).
MAX_TOOL_CALLS = 128
EMPTY_ARGUMENTS = "{}"


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass(slots=True)
class _Call:
    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""
    opened: bool = False  # its first piece (id and name) was given out


class ToolCallStream:
    """Regular tool-call pieces from an upstream's, and the whole calls at the end."""

    def __init__(self, endpoint: str) -> None:
        self._endpoint = endpoint
        self._calls: dict[int, _Call] = {}

    def feed(
        self,
        index: int | None,
        *,
        id: str | None = None,
        name: str | None = None,
        arguments: str | None = None,
    ) -> list[ToolCallDelta]:
        """The pieces to give out for one upstream piece. `index` None: the upstream gave
        none, so a piece with a new id (or the first piece) starts a new call and any other
        continues the last one."""
        call = self._call_for(index, id)
        if id and not call.id:
            call.id = id
        if name and not call.name:
            call.name = name
        pieces: list[ToolCallDelta] = []
        if not call.opened and call.name:
            call.opened = True
            call.id = call.id or new_call_id()
            pieces.append(ToolCallDelta(call.index, id=call.id, name=call.name))
        if arguments:
            call.arguments += arguments
            if call.opened:
                if pieces:
                    pieces[0] = ToolCallDelta(
                        call.index, id=call.id, name=call.name, arguments=call.arguments
                    )
                else:
                    pieces.append(ToolCallDelta(call.index, arguments=arguments))
        elif pieces and call.arguments:
            # Arguments that came before the name go out with the opening piece.
            pieces[0] = ToolCallDelta(
                call.index, id=call.id, name=call.name, arguments=call.arguments
            )
        return pieces

    def finish(self) -> list[ToolCallDelta]:
        """The last pieces: `"{}"` for every call that wrote no arguments. A call that never
        named its function cannot be made and is dropped, with a note in the log."""
        pieces = []
        for call in self._calls.values():
            if not call.opened:
                log.warning("%s: dropped a tool call without a function name", self._endpoint)
            elif not call.arguments:
                call.arguments = EMPTY_ARGUMENTS
                pieces.append(ToolCallDelta(call.index, arguments=EMPTY_ARGUMENTS))
        return pieces

    def calls(self) -> tuple[ToolCall, ...]:
        """The calls made so far, in index order."""
        return tuple(
            ToolCall(call.id, call.name, call.arguments or EMPTY_ARGUMENTS)
            for _, call in sorted(self._calls.items())
            if call.opened
        )

    def _call_for(self, index: int | None, id: str | None) -> _Call:
        if index is None:
            last = self._calls[max(self._calls)] if self._calls else None
            if last is not None and (not id or id == last.id):
                return last
            index = len(self._calls)
        call = self._calls.get(index)
        if call is None:
            if len(self._calls) >= MAX_TOOL_CALLS or index < 0 or index > MAX_TOOL_CALLS:
                raise BackendError(
                    self._endpoint, FailureKind.PROTOCOL, "too many tool calls in one answer"
                )
            call = self._calls[index] = _Call(index)
        return call
