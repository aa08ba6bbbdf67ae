"""`gateway-ls complete --next-edit FILE:LINE:COL`: the predicted next edit, as a unified diff.

A one-off command has no edit history; the model sees the region around the cursor, the
file and what the context store gathers. Nothing printed (exit 0) means no edit proposed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import sys

from lsp_server.cli.command_document import (
    COMMAND_MIN_DEADLINE_MS,
    CommandDocument,
    engine_with,
    read_command_document,
)
from lsp_server.cli.exit_codes import EXIT_FAILURE, EXIT_OK
from lsp_server.config.model import Config
from lsp_server.config.model_names import LOCAL
from lsp_server.text_edits import apply_edits


def next_edit_at(
    config: Config, location: str, *, deadline_ms: int | None, endpoint: str | None = None
) -> int:
    document = read_command_document(config, location, endpoint=endpoint, role="edit")
    if document is None:
        return EXIT_FAILURE
    budget = deadline_ms or max(config.routing.edit_deadline_ms, COMMAND_MIN_DEADLINE_MS)
    routing = dataclasses.replace(
        config.routing,
        edit_deadline_ms=budget,
        hedge_after_ms=min(config.routing.hedge_after_ms, max(1, budget - 1)),
    )
    local = dataclasses.replace(config.local, deadline_ms=max(config.local.deadline_ms, budget))
    config = dataclasses.replace(config, routing=routing, local=local)
    diff = asyncio.run(_diff(config, document, endpoint))
    if diff is None:
        return EXIT_FAILURE
    sys.stdout.write(diff)
    return EXIT_OK


async def _diff(config: Config, document: CommandDocument, pinned: str | None) -> str | None:
    """The diff ("" for no edit), or None (the reason on stderr) when nothing answered."""
    try:
        async with engine_with(config, document) as engine:
            model = engine.router.pool.local_model
            if model is not None and (
                pinned == LOCAL or engine.router.answerers("edit").local_must_answer
            ):
                await model.ensure_loaded()
            edit = await engine.next_edits.predict(
                uri=document.uri,
                text=document.text,
                offset=document.offset,
                language=document.language,
                pinned=pinned,
            )
    except Exception as error:
        print(f"gateway-ls: {error}", file=sys.stderr)
        return None
    if edit.endpoint is None:
        detail = "; ".join(str(f) for f in edit.failures) or edit.reason.meaning
        print(f"gateway-ls: nothing answered ({edit.reason}): {detail}", file=sys.stderr)
        return None
    note = f" — answer dropped: {edit.dropped}" if edit.dropped else ""
    print(
        f"gateway-ls: {edit.endpoint} ({edit.reason}, {edit.latency_ms:.0f} ms){note}",
        file=sys.stderr,
    )
    name = str(document.path)
    after = apply_edits(document.text, list(edit.edits))
    return "".join(
        difflib.unified_diff(
            document.text.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
        )
    )
