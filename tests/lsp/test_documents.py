"""LSP line semantics and position clamping, and the bounded stdio reader."""

from __future__ import annotations

import io

import pytest
from lsprotocol import types
from pygls.workspace import PositionCodec

from lsp_server.lsp.bounded_stdin import UNREADABLE_BODY, BoundedStdin
from lsp_server.lsp.documents import LspTextDocument, lsp_lines, offset_at, position_at

pytestmark = pytest.mark.unit


def document(
    text: str, encoding: types.PositionEncodingKind = types.PositionEncodingKind.Utf16
) -> LspTextDocument:
    codec = PositionCodec(encoding)
    return LspTextDocument("file:///t.py", source=text, position_codec=codec)


def test_only_lsp_line_breaks_split_lines() -> None:
    text = "a\x0cb\nc\u2028d\r\ne\rf"
    assert lsp_lines(text) == ("a\x0cb\n", "c\u2028d\r\n", "e\r", "f")
    assert lsp_lines("plain\nlines\n") == ("plain\n", "lines\n")
    assert lsp_lines("") == ()


def test_a_form_feed_does_not_shift_later_lines() -> None:
    doc = document("x = 1\n\x0c\ny = 2\n")
    assert offset_at(doc, types.Position(line=2, character=1)) == len("x = 1\n\x0c\ny")


def test_positions_are_utf16_and_clamped_to_the_line() -> None:
    doc = document('s = "🐍é"\nnext\n')
    snake_end = len('s = "🐍'.encode("utf-16-le")) // 2
    assert offset_at(doc, types.Position(line=0, character=snake_end)) == len('s = "🐍')
    # In the middle of the surrogate pair: the position before the snake.
    assert offset_at(doc, types.Position(line=0, character=snake_end - 1)) == len('s = "')
    assert offset_at(doc, types.Position(line=0, character=999)) == len('s = "🐍é"')
    assert offset_at(doc, types.Position(line=9, character=0)) == len(doc.source)


def test_an_offset_becomes_a_position_in_the_negotiated_encoding() -> None:
    text = 'x = 1\r\nlabel = "😀é ok"\rz\n'
    offset = text.index("ok")
    expected = {
        types.PositionEncodingKind.Utf8: len('label = "😀é '.encode()),
        types.PositionEncodingKind.Utf16: len('label = "😀é '.encode("utf-16-le")) // 2,
        types.PositionEncodingKind.Utf32: len('label = "😀é '),
    }
    for encoding, character in expected.items():
        doc = document(text, encoding)
        assert position_at(doc, offset) == types.Position(line=1, character=character)
        assert offset_at(doc, position_at(doc, offset)) == offset
        assert position_at(doc, text.index("z")) == types.Position(line=2, character=0)
        assert position_at(doc, len(text)) == types.Position(line=3, character=0)


def test_positions_on_plain_lines_after_wide_ones_count_every_line_above() -> None:
    doc = document("é😀\r\nabc\n\ttab\n")
    assert offset_at(doc, types.Position(line=1, character=2)) == len("é😀\r\nab")
    assert offset_at(doc, types.Position(line=1, character=99)) == len("é😀\r\nabc")
    assert offset_at(doc, types.Position(line=2, character=1)) == len("é😀\r\nabc\n\t")
    # A new text: its lines and their starts are new too.
    doc.apply_change(types.TextDocumentContentChangeWholeDocument(text="x\n" + doc.source))
    assert offset_at(doc, types.Position(line=2, character=0)) == len("x\né😀\r\n")


def test_incremental_change_after_a_form_feed_lands_on_the_right_line() -> None:
    doc = document("a\x0cb\nc\n")
    doc.apply_change(
        types.TextDocumentContentChangePartial(
            range=types.Range(
                start=types.Position(line=1, character=0), end=types.Position(line=1, character=1)
            ),
            text="C",
        )
    )
    assert doc.source == "a\x0cb\nC\n"


def test_an_absurd_content_length_is_skipped_without_reserving_memory() -> None:
    stream = io.BytesIO(b"x" * 100 + b"rest")
    reader = BoundedStdin(stream, limit=10)
    assert reader.read(100) == UNREADABLE_BODY
    assert stream.read() == b"rest"
    assert BoundedStdin(io.BytesIO(b"abc"), limit=10).read(3) == b"abc"
    assert BoundedStdin(io.BytesIO(b"short"), limit=2).read(1_000_000) == b""
