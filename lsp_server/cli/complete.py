"""`gateway-ls complete FILE:LINE:COL`: one suggestion, through the same router, on stdout."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from pathlib import Path

from lsp_server.cli.exit_codes import EXIT_FAILURE, EXIT_OK, UsageError
from lsp_server.config.model import Config
from lsp_server.core.engine import Engine
from lsp_server.failures import Refused
from lsp_server.progress import StderrProgress
from lsp_server.reasons import Reason
from lsp_server.routing.model_names import pinned_endpoint
from lsp_server.suggest.languages import LANGUAGE_BY_SUFFIX

COMMAND_MIN_DEADLINE_MS = 20_000


class LocationError(ValueError):
    pass


def parse_location(location: str) -> tuple[Path, int, int]:
    """`FILE:LINE:COL` with 1-based LINE and COL (COL counts characters)."""
    parts = location.rsplit(":", 2)
    if len(parts) != 3:
        raise LocationError(f"expected FILE:LINE:COL, got {location!r}")
    file, line_text, col_text = parts
    try:
        line, col = int(line_text), int(col_text)
    except ValueError:
        raise LocationError(f"LINE and COL must be numbers in {location!r}") from None
    if line < 1 or col < 1:
        raise LocationError(f"LINE and COL are 1-based in {location!r}")
    return Path(file), line, col


def offset_of(text: str, line: int, col: int) -> int:
    """The str offset of 1-based LINE:COL, clamped to the line's end and the text's end."""
    lines = text.splitlines(keepends=True)
    if line > len(lines):
        return len(text)
    start = sum(len(existing) for existing in lines[: line - 1])
    content = lines[line - 1].rstrip("\r\n")
    return start + min(col - 1, len(content))


def complete_at(
    config: Config, location: str, *, deadline_ms: int | None, endpoint: str | None = None
) -> int:
    try:
        path, line, col = parse_location(location)
    except LocationError as error:
        raise UsageError(str(error)) from None
    if endpoint is not None:
        try:
            pinned_endpoint(config, endpoint, "inline")
        except Refused as refused:
            raise UsageError(f"--endpoint {endpoint!r}: {refused}") from None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        print(f"gateway-ls: cannot read {path}: {error}", file=sys.stderr)
        return EXIT_FAILURE
    budget = deadline_ms or max(config.routing.inline_deadline_ms, COMMAND_MIN_DEADLINE_MS)
    routing = dataclasses.replace(
        config.routing,
        inline_deadline_ms=budget,
        hedge_after_ms=min(config.routing.hedge_after_ms, max(1, budget - 1)),
    )
    config = dataclasses.replace(config, routing=routing)
    suggestion = asyncio.run(_suggest(config, path, text, offset_of(text, line, col), endpoint))
    if suggestion is None:
        return EXIT_FAILURE
    sys.stdout.write(suggestion)
    if not suggestion.endswith("\n"):
        sys.stdout.write("\n")
    return EXIT_OK


def workspace_folder(path: Path) -> Path:
    """The folder whose files may join the prompt as context: the working directory when the
    file is inside it, else the file's own directory."""
    here, file = Path.cwd().resolve(), path.resolve()
    return here if file.is_relative_to(here) else file.parent


async def _suggest(
    config: Config, path: Path, text: str, offset: int, pinned: str | None
) -> str | None:
    """The suggestion, or None (the reason on stderr) when nothing answered."""
    engine = Engine.for_process(config, on_model_progress=StderrProgress())
    try:
        uri = path.resolve().as_uri()
        language = LANGUAGE_BY_SUFFIX.get(path.suffix, "")
        engine.context.set_workspace_folders([workspace_folder(path).as_uri()])
        engine.context.opened(uri, text, language)
        await engine.context.settled()  # the definitions of what the file imports
        suggestions = engine.suggestions
        await suggestions.load_local_if_it_answers(uri=uri, text=text, pinned=pinned)
        measured_before = any(e.stats.measured for e in engine.router.pool.all())  # earlier runs
        suggestion = await suggestions.suggest(
            uri=uri,
            text=text,
            offset=offset,
            language=language,
            pinned=pinned,
        )
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
    except Exception as error:
        print(f"gateway-ls: {error}", file=sys.stderr)
        return None
    finally:
        await engine.aclose()
