"""pygls' protocol with eight additions.

- `$/cancelRequest` reaches command handlers too. pygls runs `workspace/executeCommand` handlers
  as inner tasks that a cancel of the outer request does not reach. A command handler links its
  task to the request id here, so a cancel from the editor stops it (and with it the model call)
  at once.
- A request whose params or envelope do not decode is answered with a JSON-RPC error. pygls
  raises while decoding, before it knows a request is there, and the client would wait forever.
- Handlers of notifications (and the inner steps of pygls' own handlers) are forgotten when they
  finish. pygls files them under made-up ids that nothing ever removes, so every `didChange`
  would stay in memory for the life of the server.
- `shutdown` while requests are still running answers cleanly (see `lsp_shutdown`).
- A request after `shutdown` is answered with Invalid Request, as LSP requires; pygls drops it
  and the client would wait forever.
- Documents split lines the way LSP does (see `documents`).
- Messages are written with orjson (see `json_codec`), and without logging each whole message,
  an answer of plain JSON without pygls' converter (see `JsonResult`); a message's kind is
  told once per message class (see `DispatchByClass`).
- The params of a method lsprotocol has no type for (the next edit's, the cursor report's)
  stay JSON (see `json_params_converter`).
- What a handler hands to `after_answer` (a routed request's records) runs right after its
  answer is written, not before.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
from collections.abc import Generator
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcMethodNotFound,
)
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCProtocol,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
    default_converter,
)
from pygls.protocol.json_rpc import RPCError, RPCNotification, RPCRequest, RPCResponse
from pygls.protocol.language_server import lsp_method

from lsp_server import json_codec
from lsp_server.after_answer import AfterAnswer
from lsp_server.after_answer import opened as opened_after_answer
from lsp_server.lsp.documents import LspWorkspace
from lsp_server.lsp.json_result import JsonResult

if TYPE_CHECKING:
    from cattrs import Converter

log = logging.getLogger(__name__)

# The methods beyond the LSP specification this server answers, announced under `experimental`
# in its capabilities (the next edit's, `lsp/next_edit.py`, in the Copilot language server's
# words).
EXPERIMENTAL_CAPABILITIES = {"copilotInlineEdit": True, "didShowInlineEdit": True}


def json_params_converter() -> Converter:
    """pygls' converter, except that the params of a request or notification whose method
    lsprotocol does not type stay the JSON they came as, for the handler to read as a mapping.
    pygls would build a namedtuple class for every object in them, about a quarter of a
    millisecond of each next edit."""
    converter: Converter = default_converter()
    for message in (JsonRPCRequestMessage, JsonRPCNotification):
        converter.register_structure_hook(message, _as_sent)
    return converter


def _as_sent(data: dict[str, Any], cls: type[Any]) -> Any:
    return cls(**data)


@dataclass(frozen=True, slots=True)
class UnreadableRequest:
    """A request that did not decode; it is still owed an answer."""

    id: int | str | None
    error: JsonRpcException


class JsonCodecWriting(JsonRPCProtocol):
    """pygls' `_send_data`, encoding with `json_codec` (orjson) and without logging each
    whole message, and an answer whose result is a `JsonResult` written without the
    converter; for either end of a connection."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._writes: set[asyncio.Future[Any]] = set()

    def _send_data(self, data: Any) -> None:
        if not data:
            return
        if self.writer is None:
            log.error("unable to send data: no transport")
            return
        if type(data) is JsonRPCResponseMessage and type(data.result) is JsonResult:
            data = {"jsonrpc": data.jsonrpc, "id": data.id, "result": data.result}
        try:
            body = json_codec.encode(data, self._serialize_message)
            if self._include_headers:
                header = (
                    f"Content-Length: {len(body)}\r\n"
                    f"Content-Type: {self.CONTENT_TYPE}; charset={self.CHARSET}\r\n\r\n"
                )
                body = header.encode("ascii") + body
            written = self.writer.write(body)
            if inspect.isawaitable(written):  # the WebSocket writer
                pending = asyncio.ensure_future(written)
                self._writes.add(pending)
                pending.add_done_callback(self._writes.discard)
        except BrokenPipeError:
            log.exception("error sending data: the pipe is closed")
            raise
        except Exception as error:
            log.exception("error sending data")
            self._server._report_server_error(error, JsonRpcInternalError)


class DispatchByClass(JsonRPCProtocol):
    """pygls' `handle_message`, telling a request, a notification and a response apart once
    per message class. pygls asks runtime-checkable Protocols for every message, which Python
    3.11 answers by walking their attributes: about 13 µs for a request and 38 µs for a
    response. The messages are attrs classes, whose instances all have the same attributes,
    so the answer for the first instance of a class is the answer for all; any other message
    goes through pygls as it is."""

    def handle_message(self, message: Any) -> None:
        kind = message_kind(message)
        if kind is None:
            super().handle_message(message)
            return
        if message.jsonrpc != self.VERSION:
            log.warning("ignoring a message that is not JSON-RPC 2.0: %.200r", message)
            return
        if self._shutdown and getattr(message, "method", "") != types.EXIT:
            log.warning("the server is shutting down: ignoring %.200r", message)
            return
        context = contextvars.copy_context()
        if kind is RPCRequest:
            context.run(self._handle_request, message.id, message.method, message.params)
        elif kind is RPCNotification:
            context.run(self._handle_notification, message.method, message.params)
        elif kind is RPCResponse:
            context.run(self._handle_response, message.id, message.result)
        else:
            context.run(self._handle_response, message.id, None, message.error)


# The Protocol pygls finds an attrs message class's instances to follow (`RPCError` when none
# of the others), by class: one entry per message class there is.
_KINDS: dict[type[Any], type[Any]] = {}
_PYGLS_ORDER = (RPCRequest, RPCNotification, RPCResponse)


def message_kind(message: Any) -> type[Any] | None:
    """pygls' answer for `message`, remembered for its class; None: not an attrs class."""
    cls = type(message)
    kind = _KINDS.get(cls)
    if kind is None and attrs.has(cls):
        kind = next((k for k in _PYGLS_ORDER if isinstance(message, k)), RPCError)
        _KINDS[cls] = kind
    return kind


class GatewayProtocol(JsonCodecWriting, DispatchByClass, LanguageServerProtocol):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._linked: dict[object, asyncio.Task[object]] = {}

    def link_current_task(self) -> object:
        """Tie the running task to the request being handled; returns the request id."""
        msg_id = self._ctx_msg_id.get()
        task = asyncio.current_task()
        if msg_id is not None and task is not None:
            self._linked[msg_id] = task
            task.add_done_callback(lambda _: self._linked.pop(msg_id, None))
        return msg_id

    def _handle_cancel_notification(self, msg_id: object) -> None:
        linked = self._linked.pop(msg_id, None)
        if linked is not None:
            linked.cancel()
        super()._handle_cancel_notification(msg_id)  # type: ignore[arg-type]

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(
        self, params: types.InitializeParams
    ) -> Generator[Any, Any, types.InitializeResult]:
        result = yield from super().lsp_initialize(params)
        result.capabilities.experimental = dict(EXPERIMENTAL_CAPABILITIES)
        # pygls builds a plain Workspace; ours only changes how documents split lines (no
        # documents exist yet, and it adds no state).
        self._workspace.__class__ = LspWorkspace
        return result

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        """Cancel what is still running over a snapshot first: pygls cancels pending requests
        while iterating over the live table, and a cancelled plain future removes itself from
        that table inside `cancel()`."""
        current = self.msg_id
        for task in list(self._linked.values()):
            task.cancel()
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current and not future.done():
                future.cancel()
        return (yield from super().lsp_shutdown(*args))

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if "method" not in data or "id" not in data:
                raise
            if not _is_message_id(data["id"]):
                return UnreadableRequest(None, JsonRpcInvalidRequest("invalid id"))
            try:
                self._get_handler(data["method"])
            except JsonRpcMethodNotFound as unknown:
                return UnreadableRequest(data["id"], unknown)
            return UnreadableRequest(data["id"], _as_invalid_params(error))

    def handle_message(self, message: Any) -> None:
        if isinstance(message, UnreadableRequest):
            log.warning("answering an unreadable request: %s", message.error)
            self._send_error(message.id, message.error)
            return
        version = getattr(message, "jsonrpc", None) if not isinstance(message, dict) else None
        if version != self.VERSION:
            self._reject_non_jsonrpc(message)
            return
        if self._shutdown and _is_request(message) and message.method != types.EXIT:
            self._send_error(message.id, JsonRpcInvalidRequest("the server is shutting down"))
            return
        super().handle_message(message)

    def _reject_non_jsonrpc(self, message: Any) -> None:
        """Not JSON-RPC 2.0; a request among such is answered with Invalid Request."""
        log.warning("ignoring a message that is not JSON-RPC 2.0: %.200r", message)
        if isinstance(message, dict):
            is_request, msg_id = "method" in message and "id" in message, message.get("id")
        else:
            is_request, msg_id = hasattr(message, "method"), getattr(message, "id", None)
        if is_request:
            msg_id = msg_id if _is_message_id(msg_id) else None
            self._send_error(msg_id, JsonRpcInvalidRequest("not a JSON-RPC 2.0 message"))

    def _send_error(self, msg_id: int | str | None, error: JsonRpcException) -> None:
        if msg_id is not None:
            self._send_response(msg_id, error=error.to_response_error())
            return
        # JSON-RPC wants `"id": null` here, which lsprotocol's converter would leave out.
        body = {"code": error.code, "message": error.message}
        self._send_data({"jsonrpc": self.VERSION, "id": None, "error": body})

    def _execute_handler(
        self,
        msg_id: Any,
        handler: Any,
        callback: Any,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        after = AfterAnswer()
        with opened_after_answer(after):
            super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is None or future.done():  # answered already
            after.run()
        else:  # after pygls' own callback, which writes the answer
            future.add_done_callback(partial(_run_after_answer, after))
        if future is not None:
            # pygls never takes a notification's future out of its table (its callback only
            # checks the result): one done at once must be forgotten too.
            future.add_done_callback(partial(self._forget_future, msg_id))

    def _forget_future(self, msg_id: Any, future: Future[Any] | asyncio.Future[Any]) -> None:
        """Deferred to the loop: a plain future runs this inside `cancel()`, and pygls cancels
        futures while it iterates over them at shutdown."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            self._forget_now(msg_id, future)
        else:
            loop.call_soon(self._forget_now, msg_id, future)

    def _forget_now(self, msg_id: Any, future: Future[Any] | asyncio.Future[Any]) -> None:
        if self._request_futures.get(msg_id) is future:
            del self._request_futures[msg_id]

    def cancel_request(self, msg_id: Any) -> None:
        """Cancel a request being handled, as a `$/cancelRequest` from the client would."""
        self._handle_cancel_notification(msg_id)


def _run_after_answer(after: AfterAnswer, future: Future[Any] | asyncio.Future[Any]) -> None:
    after.run()


def _is_request(message: Any) -> bool:
    return isinstance(getattr(message, "method", None), str) and _is_message_id(
        getattr(message, "id", None)
    )


def _is_message_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _as_invalid_params(error: JsonRpcException) -> JsonRpcException:
    """pygls reports a params value of the wrong shape as Internal Error when cattrs fails
    other than by validation; to the client both are params it must fix."""
    if isinstance(error, JsonRpcInvalidParams):
        return error
    return JsonRpcInvalidParams(f"params do not decode: {error.__cause__ or error}")
