"""`gateway-ls complete --next-edit FILE:LINE:COL`: the predicted next edit, as a unified diff.

A one-off command has no edit history; the model sees the region around the cursor, the
file and what the context store gathers. Nothing printed (exit 0) means no edit proposed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import sys
from pathlib import Path

from lsp_server.cli.complete import (
    COMMAND_MIN_DEADLINE_MS,
    LocationError,
    offset_of,
    parse_location,
    workspace_folder,
)
from lsp_server.cli.exit_codes import EXIT_FAILURE, EXIT_OK, UsageError
from lsp_server.config.model import Config
from lsp_server.config.model_names import LOCAL
from lsp_server.core.engine import Engine
from lsp_server.failures import Refused
from lsp_server.progress import StderrProgress
from lsp_server.routing.model_names import pinned_endpoint
from lsp_server.suggest.languages import LANGUAGE_BY_SUFFIX
from lsp_server.text_edits import apply_edits


def next_edit_at(
    config: Config, location: str, *, deadline_ms: int | None, endpoint: str | None = None
) -> int:
    try:
        path, line, col = parse_location(location)
    except LocationError as error:
        raise UsageError(str(error)) from None
    if endpoint is not None:
        try:
            pinned_endpoint(config, endpoint, "edit")
        except Refused as refused:
            raise UsageError(f"--endpoint {endpoint!r}: {refused}") from None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        print(f"gateway-ls: cannot read {path}: {error}", file=sys.stderr)
        return EXIT_FAILURE
    budget = deadline_ms or max(config.routing.edit_deadline_ms, COMMAND_MIN_DEADLINE_MS)
    routing = dataclasses.replace(
        config.routing,
        edit_deadline_ms=budget,
        hedge_after_ms=min(config.routing.hedge_after_ms, max(1, budget - 1)),
    )
    local = dataclasses.replace(config.local, deadline_ms=max(config.local.deadline_ms, budget))
    config = dataclasses.replace(config, routing=routing, local=local)
    diff = asyncio.run(_diff(config, path, text, offset_of(text, line, col), endpoint))
    if diff is None:
        return EXIT_FAILURE
    sys.stdout.write(diff)
    return EXIT_OK


async def _diff(
    config: Config, path: Path, text: str, offset: int, pinned: str | None
) -> str | None:
    """The diff ("" for no edit), or None (the reason on stderr) when nothing answered."""
    engine = Engine.for_process(config, on_model_progress=StderrProgress())
    try:
        uri = path.resolve().as_uri()
        language = LANGUAGE_BY_SUFFIX.get(path.suffix, "")
        engine.context.set_workspace_folders([workspace_folder(path).as_uri()])
        engine.context.opened(uri, text, language)
        await engine.context.settled()
        model = engine.router.pool.local_model
        if model is not None and (
            pinned == LOCAL or engine.router.answerers("edit").local_must_answer
        ):
            await model.ensure_loaded()
        edit = await engine.next_edits.predict(
            uri=uri, text=text, offset=offset, language=language, pinned=pinned
        )
        if edit.endpoint is None:
            detail = "; ".join(str(f) for f in edit.failures) or edit.reason.meaning
            print(f"gateway-ls: nothing answered ({edit.reason}): {detail}", file=sys.stderr)
            return None
        note = f" — answer dropped: {edit.dropped}" if edit.dropped else ""
        print(
            f"gateway-ls: {edit.endpoint} ({edit.reason}, {edit.latency_ms:.0f} ms){note}",
            file=sys.stderr,
        )
        after = apply_edits(text, list(edit.edits))
        name = str(path)
        return "".join(
            difflib.unified_diff(
                text.splitlines(keepends=True),
                after.splitlines(keepends=True),
                fromfile=f"a/{name}",
                tofile=f"b/{name}",
            )
        )
    except Exception as error:
        print(f"gateway-ls: {error}", file=sys.stderr)
        return None
    finally:
        await engine.aclose()
