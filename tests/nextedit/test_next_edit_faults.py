"""Faults of the upstream over LSP: a stall, an error, garbage. Each gets no edit, within the
deadline, and the server goes on serving."""

from __future__ import annotations

import time
from pathlib import Path

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.lsp_session import open_document
from tests.support.mercury_session import SOURCE, mercury_session, next_edit, rename_in_signature
from tests.support.mercury_upstream import finish_the_rename

SHORT_DEADLINE = "edit_deadline_ms = 400\n"


async def test_stalls_errors_and_garbage_give_no_edit(tmp_path: Path) -> None:
    with FakeLLMServer(Behaviour(latency_s=30)) as mercury:
        async with mercury_session(tmp_path, mercury, routing=SHORT_DEADLINE) as client:
            uri = (tmp_path / "scale.py").as_uri()
            open_document(client, uri, SOURCE)
            rename_in_signature(client, uri)

            started = time.monotonic()
            assert await next_edit(client, uri, 4, 0, 16) == {"edits": []}
            assert time.monotonic() - started < 10  # the deadline, not the 30 s stall

            mercury.behaviour = Behaviour(fault="status:500")
            assert await next_edit(client, uri, 4, 0, 16) == {"edits": []}

            mercury.behaviour = Behaviour(text="<|current_file_content|>\nnot a region\n")
            assert await next_edit(client, uri, 4, 0, 16) == {"edits": []}

            mercury.behaviour = Behaviour(text="```\n" + "x = 1\n" * 60 + "```")
            assert await next_edit(client, uri, 4, 0, 16) == {"edits": []}

            mercury.behaviour = Behaviour(fault="malformed_sse")
            assert await next_edit(client, uri, 4, 0, 16) == {"edits": []}

            # Still serving: a good answer comes back as an edit.
            mercury.behaviour = Behaviour(text=finish_the_rename("value", "amount"))
            result = await next_edit(client, uri, 4, 0, 16)
            assert result["edits"] and result["edits"][0]["text"] == "amount"
