"""An answer of plain JSON (`JsonResult`) is written as pygls' converter would write it, without
the converter walking it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pygls.lsp.server import LanguageServer

from lsp_server.lsp.json_result import JsonResult
from lsp_server.lsp.protocol import GatewayProtocol, json_params_converter

pytestmark = pytest.mark.unit

RESULT = {
    "edits": [
        {
            "text": "total = compute(a, b) # é",
            "range": {"start": {"line": 3, "character": 0}, "end": {"line": 4, "character": 12}},
            "textDocument": {"uri": "file:///w/edits.py", "version": 17},
            "command": {"title": "Accept", "command": "gatewayLs.x", "arguments": ["17"]},
        }
    ],
    "none": None,
    "flags": [True, False, 1.5],
}


class Writer:
    def __init__(self) -> None:
        self.bodies: list[Any] = []

    def write(self, data: bytes) -> None:
        self.bodies.append(json.loads(data.split(b"\r\n\r\n", 1)[1]))


def protocol() -> tuple[GatewayProtocol, Writer]:
    ls = LanguageServer(
        "json", "1", protocol_cls=GatewayProtocol, converter_factory=json_params_converter
    )
    writer = Writer()
    ls.protocol.set_writer(writer)  # type: ignore[arg-type]
    assert isinstance(ls.protocol, GatewayProtocol)
    return ls.protocol, writer


def test_a_json_result_is_written_as_the_converter_writes_a_dict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    through_converter, converted = protocol()
    through_converter._send_response(5, result=dict(RESULT))
    as_it_is, written = protocol()

    def no_converter(data: Any) -> Any:
        raise AssertionError("the converter walked a JsonResult")

    monkeypatch.setattr(as_it_is, "_serialize_message", no_converter)
    as_it_is._send_response(5, result=JsonResult(RESULT))
    assert written.bodies == converted.bodies
    assert written.bodies == [{"jsonrpc": "2.0", "id": 5, "result": RESULT}]
