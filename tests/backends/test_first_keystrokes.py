"""The share of documents' first keystrokes the deadline cut, per preset (`gatewayLs.status`)."""

from __future__ import annotations

import pytest

from lsp_server.backends.local.first_keystrokes import FirstKeystrokes

pytestmark = pytest.mark.unit


def test_each_document_counts_once_per_preset_with_its_first_verdict() -> None:
    counts = FirstKeystrokes()
    counts.record("small", "file:///a.py", cut=True)
    counts.record("small", "file:///a.py", cut=False)  # a later keystroke: not a first
    counts.record("small", "file:///b.py", cut=False)
    counts.record("large", "file:///a.py", cut=False)
    assert counts.status() == {
        "small": {"documents": 2, "cut_share": 0.5},
        "large": {"documents": 1, "cut_share": 0.0},
    }


def test_the_documents_remembered_are_bounded() -> None:
    counts = FirstKeystrokes(documents_kept=2)
    for name in ("a", "b", "c"):
        counts.record("small", f"file:///{name}.py", cut=False)
    assert not counts.is_first("small", "file:///c.py")
    assert counts.is_first("small", "file:///a.py")  # forgotten: it would count again
    assert counts.status()["small"]["documents"] == 3
