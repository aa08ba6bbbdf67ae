"""A message's kind is told once per class (`DispatchByClass`), and is what pygls' runtime
Protocol checks tell of each message."""

from __future__ import annotations

from typing import Any

import pytest
from lsprotocol import types
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage
from pygls.protocol.json_rpc import RPCError, RPCNotification, RPCRequest, RPCResponse

from lsp_server.lsp.protocol import message_kind

pytestmark = pytest.mark.unit

CHANGE = types.DidChangeTextDocumentParams(
    text_document=types.VersionedTextDocumentIdentifier(uri="file:///a.py", version=2),
    content_changes=[types.TextDocumentContentChangeWholeDocument(text="x = 1\n")],
)
MESSAGES = [
    JsonRPCRequestMessage(id=1, jsonrpc="2.0", method="textDocument/copilotInlineEdit", params={}),
    JsonRPCNotification(jsonrpc="2.0", method="gatewayLs/cursor", params={}),
    JsonRPCResponseMessage(id="7", jsonrpc="2.0", result={"edits": []}),
    types.InitializeRequest(
        id=1, params=types.InitializeParams(capabilities=types.ClientCapabilities())
    ),
    types.DidChangeTextDocumentNotification(params=CHANGE),
    types.ShutdownResponse(id=3, result=None),
    types.ResponseErrorMessage(id=4, error=types.ResponseError(code=-32601, message="no")),
]


def pygls_kind(message: Any) -> type[Any]:
    kinds = (RPCRequest, RPCNotification, RPCResponse)
    return next((kind for kind in kinds if isinstance(message, kind)), RPCError)


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_a_message_is_told_apart_as_pygls_tells_it(message: Any) -> None:
    assert message_kind(message) is pygls_kind(message)
    assert message_kind(message) is pygls_kind(message)  # remembered for its class


def test_a_message_that_is_no_attrs_class_is_left_to_pygls() -> None:
    assert message_kind({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {}}) is None
