"""The document a one-off command works on: `FILE:LINE:COL` read, checked and opened.

`complete` and `complete --next-edit` share it: the location's parsing, the pinned endpoint's
check for the command's role, reading the file, and an engine that has the file open with its
workspace's context gathered.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from lsp_server.cli.exit_codes import UsageError
from lsp_server.config.model import Config, Role
from lsp_server.config.model_names import pinned_endpoint
from lsp_server.core.engine import Engine
from lsp_server.failures import Refused
from lsp_server.progress import StderrProgress
from lsp_server.suggest.languages import LANGUAGE_BY_SUFFIX

COMMAND_MIN_DEADLINE_MS = 20_000


class LocationError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class CommandDocument:
    path: Path
    text: str
    offset: int

    @property
    def uri(self) -> str:
        return self.path.resolve().as_uri()

    @property
    def language(self) -> str:
        return LANGUAGE_BY_SUFFIX.get(self.path.suffix, "")


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


def read_command_document(
    config: Config, location: str, *, endpoint: str | None, role: Role
) -> CommandDocument | None:
    """The document at `location`, or None (the reason on stderr) when the file cannot be
    read. A malformed location, or an `--endpoint` that cannot serve `role`, is a UsageError."""
    try:
        path, line, col = parse_location(location)
    except LocationError as error:
        raise UsageError(str(error)) from None
    if endpoint is not None:
        try:
            pinned_endpoint(config, endpoint, role)
        except Refused as refused:
            raise UsageError(f"--endpoint {endpoint!r}: {refused}") from None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        print(f"gateway-ls: cannot read {path}: {error}", file=sys.stderr)
        return None
    return CommandDocument(path, text, offset_of(text, line, col))


def workspace_folder(path: Path) -> Path:
    """The folder whose files may join the prompt as context: the working directory when the
    file is inside it, else the file's own directory."""
    here, file = Path.cwd().resolve(), path.resolve()
    return here if file.is_relative_to(here) else file.parent


@asynccontextmanager
async def engine_with(config: Config, document: CommandDocument) -> AsyncIterator[Engine]:
    """An engine with `document` open and the definitions of what it imports gathered."""
    engine = Engine.for_process(config, on_model_progress=StderrProgress())
    try:
        engine.context.set_workspace_folders([workspace_folder(document.path).as_uri()])
        engine.context.opened(document.uri, document.text, document.language)
        await engine.context.settled()
        yield engine
    finally:
        await engine.aclose()
