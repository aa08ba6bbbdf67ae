"""`gateway-ls complete FILE:LINE:COL`: one suggestion, through the same router, on stdout."""

from __future__ import annotations

import asyncio
import dataclasses
import sys

from lsp_server.cli.command_document import (
    COMMAND_MIN_DEADLINE_MS,
    CommandDocument,
    engine_with,
    read_command_document,
)
from lsp_server.cli.exit_codes import EXIT_FAILURE, EXIT_OK
from lsp_server.config.model import Config
from lsp_server.reasons import Reason


def complete_at(
    config: Config, location: str, *, deadline_ms: int | None, endpoint: str | None = None
) -> int:
    document = read_command_document(config, location, endpoint=endpoint, role="inline")
    if document is None:
        return EXIT_FAILURE
    budget = deadline_ms or max(config.routing.inline_deadline_ms, COMMAND_MIN_DEADLINE_MS)
    routing = dataclasses.replace(
        config.routing,
        inline_deadline_ms=budget,
        hedge_after_ms=min(config.routing.hedge_after_ms, max(1, budget - 1)),
    )
    config = dataclasses.replace(config, routing=routing)
    suggestion = asyncio.run(_suggest(config, document, endpoint))
    if suggestion is None:
        return EXIT_FAILURE
    sys.stdout.write(suggestion)
    if not suggestion.endswith("\n"):
        sys.stdout.write("\n")
    return EXIT_OK


async def _suggest(config: Config, document: CommandDocument, pinned: str | None) -> str | None:
    """The suggestion, or None (the reason on stderr) when nothing answered."""
    try:
        async with engine_with(config, document) as engine:
            suggestions = engine.suggestions
            await suggestions.load_local_if_it_answers(
                uri=document.uri, text=document.text, pinned=pinned
            )
            measured_before = any(e.stats.measured for e in engine.router.pool.all())
            suggestion = await suggestions.suggest(
                uri=document.uri,
                text=document.text,
                offset=document.offset,
                language=document.language,
                pinned=pinned,
            )
    except Exception as error:
        print(f"gateway-ls: {error}", file=sys.stderr)
        return None
    detail = suggestion.detail or ""
    reason = str(suggestion.reason)
    if suggestion.reason is Reason.CONFIG_ORDER:
        reason = suggestion.reason.meaning
    elif suggestion.reason is Reason.EXPLORE and not measured_before:
        reason = "answered first of those asked; no latency measured yet"
    if suggestion.endpoint is None:
        why = detail or suggestion.reason.meaning
        print(f"gateway-ls: nothing answered ({reason}): {why}", file=sys.stderr)
        return None
    print(
        f"gateway-ls: {suggestion.endpoint} ({reason}, "
        f"{suggestion.latency_ms:.0f} ms){' — ' + detail if detail else ''}",
        file=sys.stderr,
    )
    return suggestion.text
