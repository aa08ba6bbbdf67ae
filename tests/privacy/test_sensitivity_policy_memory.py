"""`SensitivityPolicy` remembers the pattern that matched a document's paths, and still follows
a link that changes where it leads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lsp_server.privacy.policy import SensitivityPolicy

pytestmark = pytest.mark.unit


def test_the_same_document_gets_the_same_answer_again() -> None:
    policy = SensitivityPolicy(["**/.env", "**/*.pem"])
    for _ in range(3):
        assert policy.matching_glob("file:///p/.env") == "**/.env"
        assert policy.matching_glob("file:///p/cert.pem") == "**/*.pem"
        assert policy.matching_glob("file:///p/app.py") is None


@pytest.mark.skipif(os.name == "nt", reason="symbolic links need privileges on Windows")
def test_a_link_that_changes_where_it_leads_is_judged_again(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("K=v\n", encoding="utf-8")
    (tmp_path / "plain.py").write_text("x = 1\n", encoding="utf-8")
    link = tmp_path / "link.py"
    link.symlink_to(tmp_path / ".env")
    policy = SensitivityPolicy(["**/.env"])
    assert policy.matching_glob(link.as_uri()) == "**/.env"
    link.unlink()
    link.symlink_to(tmp_path / "plain.py")
    assert policy.matching_glob(link.as_uri()) is None
    link.unlink()
    link.symlink_to(tmp_path / ".env")
    assert policy.matching_glob(link.as_uri()) == "**/.env"
