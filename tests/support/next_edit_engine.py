"""An `Engine` whose next edits go to a recording Mercury endpoint on loopback, with a local
model that stands in for the real one: the in-process next-edit tests' setting."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bench.harness.fake_llm_server import FakeLLMServer
from lsp_server.backends.base import ChatRequest, CompletionRequest, EditCall, Usage
from lsp_server.backends.factory import remote_backend
from lsp_server.backends.local_model import LocalModel, LocalState
from lsp_server.config.loader import load_config_file
from lsp_server.core.engine import Engine
from lsp_server.permit import Permit

SOURCE = "def scale(value, factor):\n    result = value * factor\n    return result\n"
RENAMED = SOURCE.replace("(value", "(amount")


class LocalStandIn(LocalModel):
    """A local model that is always ready and answers a next edit by finishing the rename."""

    def __init__(self, *, next_edits: bool = True) -> None:
        self.name = "local"
        self.is_local = True
        self.asked = 0
        self.next_edits = next_edits
        self.read_ahead: list[EditCall] = []  # next edits' calls it was given to read ahead

    @property
    def state(self) -> LocalState:
        return LocalState.READY

    @property
    def next_edit_supported(self) -> bool | None:
        return self.next_edits

    def prefill_edit(self, call: EditCall) -> bool:
        self.read_ahead.append(call)
        return True

    async def complete(
        self, request: CompletionRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        yield ""

    async def chat(
        self, request: ChatRequest, usage: Usage | None = None, *, permit: Permit
    ) -> AsyncIterator[str]:
        self.asked += 1
        yield "```python\ndef scale(amount, factor):\n    result = amount * factor\n"
        yield "    return result\n\n```"


def engine_for(
    tmp_path: Path, mercury: FakeLLMServer, local: LocalStandIn, monkeypatch: pytest.MonkeyPatch
) -> Engine:
    monkeypatch.setenv("INCEPTION_API_KEY", "test-key")
    config_path = tmp_path / "config.toml"
    config_path.write_text(
        '[routing]\nedit_deadline_ms = 5000\noffline = "never"\n'
        '[[endpoints]]\nname = "mercury"\nkind = "inception"\n'
        f'base_url = "{mercury.provider_base_url("inception")}"\n'
        'model = "mercury-edit-2"\nroles = ["edit"]\n',
        encoding="utf-8",
    )
    return Engine(
        load_config_file(config_path),
        local_factory=lambda config: local,
        remote_factory=remote_backend,
    )


def edit_bytes(server: FakeLLMServer) -> int:
    return sum(len(r.body) for r in server.requests if r.path.endswith("/edit/completions"))
