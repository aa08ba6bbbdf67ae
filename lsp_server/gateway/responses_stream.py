"""The answer to a Responses API request, as the Responses API streams and returns it.

`ResponseStream` turns the chat's text pieces and tool-call pieces into the Responses
event sequence (`response.created`, `response.in_progress`, `output_item.added`,
`content_part.added`, `output_text.delta`/`.done`, `content_part.done`,
`function_call_arguments.delta`/`.done`, `output_item.done`, then `response.completed`,
`response.incomplete` or `response.failed`), each with its `sequence_number`. Its final
response is also the non-streamed answer, so both carry the same output.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

log = logging.getLogger(__name__)


def responses_usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


class ResponseStream:
    """One response, built from a chat's pieces as they come, as Responses events.

    Feed it `text(piece)` and `tool_call(index, ...)` in the order the chat streams them, then
    end it with `complete(...)` or `fail(...)`; each returns the events to send. `response()`
    is the response object as it stands, the non-streamed answer once ended.

    Text goes into one message item until a tool call begins. Tool-call items stay open until
    text comes or the answer ends, so pieces of parallel calls may interleave: each event names
    its item (`item_id`, `output_index`).
    """

    def __init__(self, echo: dict[str, Any], *, response_id: str | None = None) -> None:
        self._echo = echo
        self.id = response_id or _new_id("resp")
        self.created_at = int(time.time())
        self.model: str = echo.get("model") or "auto"
        self.status = "in_progress"
        self._output: list[dict[str, Any]] = []
        self._message: dict[str, Any] | None = None  # the message item being written
        self._open_calls: list[dict[str, Any]] = []  # tool-call items still being written
        self._calls: dict[int, dict[str, Any]] = {}  # the chat's call index -> its item
        self._sequence = 0
        self._usage: dict[str, Any] | None = None
        self._error: dict[str, Any] | None = None
        self._incomplete: dict[str, Any] | None = None

    def response(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": self.status,
            "error": self._error,
            "incomplete_details": self._incomplete,
            "output": [_shown(item) for item in self._output],
            "usage": self._usage,
            **self._echo,
            "model": self.model,
        }

    def opening(self) -> list[dict[str, Any]]:
        return [
            self._event("response.created", response=self.response()),
            self._event("response.in_progress", response=self.response()),
        ]

    def text(self, piece: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        message = self._message
        if message is None:
            events += self._close_calls()
            message = {
                "id": _new_id("msg"),
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
                "_text": "",
            }
            self._message = message
            events += self._add(message)
            events.append(
                self._event(
                    "response.content_part.added",
                    **self._place(message),
                    content_index=0,
                    part=_text_part(""),
                )
            )
        message["_text"] += piece
        if piece:
            events.append(
                self._event(
                    "response.output_text.delta",
                    **self._place(message),
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            )
        return events

    def tool_call(
        self, index: int, *, call_id: str = "", name: str = "", arguments: str = ""
    ) -> list[dict[str, Any]]:
        """A piece of the chat's tool call `index`: its first piece names it (`call_id`,
        `name`); every piece may add argument text."""
        events = self._close_message()
        item = self._calls.get(index)
        if item is None:
            item = {
                "id": _new_id("fc"),
                "type": "function_call",
                "status": "in_progress",
                "call_id": call_id or _new_id("call"),
                "name": name,
                "arguments": "",
            }
            self._calls[index] = item
            self._open_calls.append(item)
            events += self._add(item)
        elif item not in self._open_calls:
            log.debug("tool call %d continues after text; its late pieces are dropped", index)
            return events
        if arguments:
            item["arguments"] += arguments
            events.append(
                self._event(
                    "response.function_call_arguments.delta", **self._place(item), delta=arguments
                )
            )
        return events

    def complete(
        self, input_tokens: int, output_tokens: int, finish_reason: str = "stop"
    ) -> list[dict[str, Any]]:
        """The end of a chat that answered; a `length` or `content_filter` finish ends the
        response as incomplete, as the Responses API does."""
        events = self._close_message() + self._close_calls()
        self._usage = responses_usage(input_tokens, output_tokens)
        if finish_reason == "length":
            self._incomplete = {"reason": "max_output_tokens"}
        elif finish_reason == "content_filter":
            self._incomplete = {"reason": "content_filter"}
        if self._incomplete is not None:
            self.status = "incomplete"
            return [*events, self._event("response.incomplete", response=self.response())]
        self.status = "completed"
        return [*events, self._event("response.completed", response=self.response())]

    def fail(self, code: str, message: str) -> list[dict[str, Any]]:
        """The end of a chat that failed: what was streamed stays, marked incomplete."""
        for item in [*([self._message] if self._message else []), *self._open_calls]:
            _finish_item(item, "incomplete")
        self._message = None
        self._open_calls = []
        self.status = "failed"
        self._error = {"code": code, "message": message}
        return [self._event("response.failed", response=self.response())]

    # -- the items ---------------------------------------------------------------------------

    def _add(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        self._output.append(item)
        return [
            self._event(
                "response.output_item.added", output_index=len(self._output) - 1, item=_shown(item)
            )
        ]

    def _place(self, item: dict[str, Any]) -> dict[str, Any]:
        return {"item_id": item["id"], "output_index": self._output.index(item)}

    def _close_message(self) -> list[dict[str, Any]]:
        message = self._message
        if message is None:
            return []
        self._message = None
        place = self._place(message)
        text = message["_text"]
        return [
            self._event(
                "response.output_text.done", **place, content_index=0, text=text, logprobs=[]
            ),
            self._event(
                "response.content_part.done", **place, content_index=0, part=_text_part(text)
            ),
            *self._item_done(message),
        ]

    def _close_calls(self) -> list[dict[str, Any]]:
        events = []
        for item in self._open_calls:
            item["arguments"] = item["arguments"] or "{}"
            events.append(
                self._event(
                    "response.function_call_arguments.done",
                    **self._place(item),
                    arguments=item["arguments"],
                )
            )
            events += self._item_done(item)
        self._open_calls = []
        return events

    def _item_done(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        _finish_item(item, "completed")
        index = self._output.index(item)
        return [self._event("response.output_item.done", output_index=index, item=_shown(item))]

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event


def _finish_item(item: dict[str, Any], status: str) -> None:
    item["status"] = status
    if item["type"] == "message":
        item["content"] = [_text_part(item.pop("_text"))]


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _shown(item: dict[str, Any]) -> dict[str, Any]:
    """An item as a client sees it, without the text still being gathered."""
    return {key: value for key, value in item.items() if not key.startswith("_")}
