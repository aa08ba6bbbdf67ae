"""Emacs' built-in LSP client, eglot, against the real server: a real editor, run in batch mode.

Emacs loads `tests/clients/emacs/eglot-session.el`, which registers `gateway-ls serve` for
Python the way a user would, opens a file with M-x eglot, types at the end of a line and runs
M-x completion-at-point; the buffer it ends with is read back. `make test` installs Emacs
(Debian's emacs-nox, and elpa-eglot where Emacs does not bundle eglot: `make emacs`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.lsp_session import one_endpoint_config, server_env
from tests.support.real_tools import tool_missing

pytestmark = pytest.mark.editor

REPO = Path(__file__).resolve().parents[2]
SESSION = Path(__file__).with_name("emacs") / "eglot-session.el"
EMACS_S = 90.0  # Emacs, Python and the server starting on a loaded machine; no latency assertion
HAS_EGLOT = "(progn (package-activate-all) (require 'eglot))"


def emacs_binary() -> str:
    """Emacs with eglot; missing, the test is skipped on a developer's machine, failed in CI."""
    binary = shutil.which("emacs")
    if binary is not None:
        probe = subprocess.run(
            [binary, "--batch", "--eval", HAS_EGLOT], capture_output=True, timeout=60
        )
        if probe.returncode == 0:
            return binary
    tool_missing("Emacs with eglot is not installed: `make emacs` installs it (Debian packages)")


def run_eglot_session(
    tmp_path: Path, config: Path, source: Path, *, line: int, typed: str
) -> dict[str, Any]:
    """Emacs opens `source`, types `typed` at the end of 1-based `line` and completes there."""
    result = tmp_path / "eglot-result.json"
    env = server_env(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env["HOME"] = str(tmp_path / "home")  # no user init, no saved state
    env |= {
        "GATEWAY_LS_COMMAND": json.dumps(
            [sys.executable, "-m", "lsp_server", "serve", "--config", str(config)]
        ),
        "GATEWAY_TEST_FILE": str(source),
        "GATEWAY_TEST_LINE": str(line),
        "GATEWAY_TEST_TYPED": typed,
        "GATEWAY_TEST_RESULT": str(result),
    }
    finished = subprocess.run(
        [emacs_binary(), "--batch", "-l", str(SESSION)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=EMACS_S,
    )
    assert finished.returncode == 0 and result.exists(), f"Emacs failed:\n{finished.stderr}"
    seen: dict[str, Any] = json.loads(result.read_text())
    return seen


def test_a_completion_item_inserts_the_whole_suggestion(tmp_path: Path) -> None:
    suggestion = "tal = a + b\n    return {'sum': total, 'cost': f\"${total}\"}\n"
    with FakeLLMServer(Behaviour(text=suggestion)) as endpoint:
        config = one_endpoint_config(tmp_path, endpoint.base_url)
        source = tmp_path / "calc.py"
        source.write_text("def add(a, b):\n    \n")
        session = run_eglot_session(tmp_path, config, source, line=2, typed="to")
    assert session["candidates"] == ["total = a + b"]
    assert session["buffer"] == (
        "def add(a, b):\n    total = a + b\n    return {'sum': total, 'cost': f\"${total}\"}\n"
    )
    assert "Refactor with reasoning model…" in session["code_actions"]
    decision = session["status"]["decisions"][-1]
    assert decision["endpoint"] == "fast"
