"""Every routing reason has a label in the VS Code extension's status (no raw code shown)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lsp_server.reasons import MEANINGS, Reason

pytestmark = pytest.mark.unit

STATUS_TS = Path(__file__).parents[2] / "clients" / "vscode" / "src" / "status.ts"


def labelled_reasons() -> set[str]:
    source = STATUS_TS.read_text(encoding="utf-8")
    table = re.search(r"const REASONS[^=]*=\s*\{(?P<body>.*?)\n\};", source, re.S)
    assert table is not None, "the REASONS table is gone from status.ts"
    keys = re.findall(r'^\s*(?:"([^"]+)"|([A-Za-z_][\w]*))\s*:', table["body"], re.M)
    return {quoted or bare for quoted, bare in keys}


def test_every_reason_has_a_vscode_label() -> None:
    missing = {reason.value for reason in Reason} - labelled_reasons()
    assert not missing, f"add a label to REASONS in status.ts for: {sorted(missing)}"


def test_the_extension_labels_no_reason_the_server_does_not_give() -> None:
    assert labelled_reasons() <= {reason.value for reason in Reason}


def test_every_reason_has_a_meaning() -> None:
    assert set(MEANINGS) == set(Reason)
