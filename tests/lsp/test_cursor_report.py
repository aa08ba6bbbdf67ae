"""`gatewayLs/didMoveCursor` frames as clients send them, and as hostile ones might."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from lsprotocol import types

from lsp_server.lsp.cursor_report import CursorReport, parse_cursor_report

pytestmark = pytest.mark.unit

URI = "file:///ws/app.py"


def test_a_well_formed_report_is_read_from_a_mapping_or_attributes() -> None:
    want = CursorReport(URI, types.Position(line=12, character=4))
    frame = {"textDocument": {"uri": URI}, "position": {"line": 12, "character": 4}}
    assert parse_cursor_report(frame) == want
    as_attributes = SimpleNamespace(
        textDocument=SimpleNamespace(uri=URI), position=SimpleNamespace(line=12, character=4)
    )
    assert parse_cursor_report(as_attributes) == want


@pytest.mark.parametrize(
    "frame",
    [
        None,
        [],
        "file:///ws/app.py",
        {"textDocument": {"uri": URI}},
        {"position": {"line": 1, "character": 1}},
        {"textDocument": {"uri": ""}, "position": {"line": 1, "character": 1}},
        {"textDocument": {"uri": 7}, "position": {"line": 1, "character": 1}},
        {"textDocument": {"uri": URI}, "position": {"line": -1, "character": 1}},
        {"textDocument": {"uri": URI}, "position": {"line": 1.5, "character": 1}},
        {"textDocument": {"uri": URI}, "position": {"line": True, "character": 1}},
        {"textDocument": {"uri": URI}, "position": {"line": 1, "character": 2**40}},
        {"textDocument": {"uri": URI}, "position": {"line": "1", "character": 1}},
    ],
)
def test_a_malformed_report_is_ignored(frame: Any) -> None:
    assert parse_cursor_report(frame) is None
