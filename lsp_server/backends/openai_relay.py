"""What is read of an OpenAI-compatible chat stream that is relayed (`sse_relay`): the usage,
whether an event carries a piece of the answer, and its tool calls.

A tool call's pieces pass as they came when they keep OpenAI's spec for a streamed call (each
piece names its call by `index`; the first carries the call's `id`, `type` and function `name`,
no later one repeats them: a client adds each piece's strings to the call's) and are written
again, regular, when they do not (`ToolCallStream`, as the answers the gateway rewrites). A call
that wrote no arguments gets `"{}"` in an event before the one that ends the answer. Once a
tool call came every event is read, so that the end is seen; they are few after it.
"""

from __future__ import annotations

import re
from typing import Any

from lsp_server import json_codec
from lsp_server.backends.base import ToolCallDelta, Usage
from lsp_server.backends.openai_chunks import as_list, count_usage, first_choice, tool_call_pieces
from lsp_server.backends.tool_calls import ToolCallStream

# A field to read: the usage, an error, a tool call.
WORTH_READING = re.compile(rb'"usage"|"error"|"tool_calls"')


class ChatRelayReader:
    """The `EventReader` of one relayed chat stream."""

    worth_reading = WORTH_READING

    def __init__(self, endpoint: str) -> None:
        self.attentive = False  # a tool call came: every event is read from then on
        self._calls = ToolCallStream(endpoint)
        self._ids: dict[int, str] = {}  # each call's id, once its first piece came
        self._envelope: dict[str, Any] = {}  # the last event read, for events written here
        self._ended = False  # the calls' last pieces were written

    def read(self, payload: dict[str, Any], usage: Usage, event: bytes) -> tuple[bool, bytes]:
        count_usage(payload, usage)
        choice = first_choice(payload)
        if choice is None:
            return False, event
        self._envelope = payload
        before = b""
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            usage.finish_reason = reason
            before = self.ending()
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return False, before + event
        raw_calls = as_list(delta.get("tool_calls"))
        piece = bool(delta.get("content") or delta.get("reasoning_content") or raw_calls)
        if not raw_calls:
            return piece, before + event
        self.attentive = True
        pieces: list[ToolCallDelta] = []
        regular = True
        for position, raw in enumerate(raw_calls):
            made = tool_call_pieces(self._calls, raw, position, True)
            regular = regular and self._as_sent(raw, made)
            pieces.extend(made)
        if regular:
            return piece, before + event
        rewritten = {**delta, "tool_calls": [_openai_delta(p) for p in pieces]}
        return piece, before + self._event(payload, choice, rewritten)

    def ending(self) -> bytes:
        if self._ended or not self.attentive:
            return b""
        self._ended = True
        pieces = self._calls.finish()
        if not pieces:
            return b""
        choice = {"index": 0, "finish_reason": None}
        return self._event(self._envelope, choice, {"tool_calls": list(map(_openai_delta, pieces))})

    def _as_sent(self, raw: Any, made: list[ToolCallDelta]) -> bool:
        """Whether the regular pieces made of the upstream's `raw` say what it says."""
        if not isinstance(raw, dict) or len(made) > 1:
            return False
        function = raw.get("function")
        function = function if isinstance(function, dict) else {}
        index, arguments = raw.get("index"), function.get("arguments") or ""
        if not isinstance(index, int) or not isinstance(arguments, str):
            return False
        if index not in self._ids:
            if not made or not made[0].id:
                return not arguments and not raw.get("id") and not function.get("name")
            first = made[0]
            self._ids[index] = first.id
            sent = (raw.get("id"), raw.get("type"), function.get("name"), arguments)
            return sent == (first.id, "function", first.name, first.arguments)
        if raw.get("id") or function.get("name"):
            return False  # a repeated id or name would be added to the call's by the client
        expected = [ToolCallDelta(index, arguments=arguments)] if arguments else []
        return made == expected

    @staticmethod
    def _event(payload: dict[str, Any], choice: dict[str, Any], delta: dict[str, Any]) -> bytes:
        written = {**payload, "choices": [{**choice, "delta": delta}]}
        written.pop("usage", None)
        return b"data: %s\n\n" % json_codec.dumps(written)


def _openai_delta(piece: ToolCallDelta) -> dict[str, Any]:
    """A regular piece as OpenAI streams it: the first of a call with its id, type and name."""
    if piece.id:
        function = {"name": piece.name, "arguments": piece.arguments}
        return {"index": piece.index, "id": piece.id, "type": "function", "function": function}
    return {"index": piece.index, "function": {"arguments": piece.arguments}}
