"""A next edit's request assembled ahead of it, while typing pauses.

An editor asks for a next edit after a pause in typing, at the cursor the last change left
(the VS Code extension waits 0.4 s). Everything the request needs but the model's answer
depends only on the document and what the server has seen: the region, the edit history's
diffs, the context snippets, the privacy verdict over all of them and each endpoint's call.
Once typing pauses for `PAUSE_S`, and the context store has gathered what the change gave it,
that work is done off the request's path, and the request that comes for the same state uses
it; any other is assembled as it always was.

There is at most one prepared request (a document event anywhere changes the history every
prompt carries, so it drops it). Preparing yields to the event loop between its steps, so a
request that arrives meanwhile waits for one step at most, and a prepared request is only
used for the exact state it was made in: the same document text, cursor and language, no
document event since, the same configuration (which the privacy verdict depends on), the
same context store, and no recent edit aged out of the history since.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from lsp_server.backends.base import EditCall
from lsp_server.config.model import EndpointConfig
from lsp_server.nextedit.request import EditRequest
from lsp_server.reasons import Reason

log = logging.getLogger(__name__)

# A pause in typing this long starts the preparation: the context store gathers after the same
# pause, and typing that goes on costs no preparation a keystroke.
PAUSE_S = 0.25


@dataclass(frozen=True, slots=True)
class Prepared:
    """A request and its privacy verdict, made in `state` (what the request's assembly and
    verdict read besides the document), good until `until` on the history's clock."""

    request: EditRequest
    stay_local: Reason | None
    state: tuple[Any, ...]
    until: float
    # Each endpoint that may answer: the configuration its call was made for, and the call.
    calls: Mapping[str, tuple[EndpointConfig | None, EditCall]]
    withheld: int = 0  # pieces of context left out for privacy


@dataclass(frozen=True, slots=True)
class _Target:
    uri: str
    text: str
    offset: int
    language: str


Prepare = Callable[[str, str, int, str], Coroutine[Any, Any, Prepared | None]]


class Ahead:
    """Prepares one request at a time with `prepare` once typing pauses, and hands it out
    to the request it fits."""

    def __init__(self, prepare: Prepare, *, pause_s: float = PAUSE_S) -> None:
        self._prepare = prepare
        self._pause_s = pause_s
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._target: _Target | None = None
        self._prepared: Prepared | None = None

    def soon(self, uri: str, text: str, offset: int, language: str) -> None:
        """Prepare the request at `offset` in `text` once typing pauses (no event loop: never)."""
        self.drop()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._target = _Target(uri, text, offset, language)
        self._timer = loop.call_later(self._pause_s, self._start)

    def take(
        self, uri: str, text: str, offset: int, language: str, state: tuple[Any, ...], now: float
    ) -> Prepared | None:
        """The prepared request, if it was made for this request in this state."""
        prepared, target = self._prepared, self._target
        if prepared is None or target is None:
            return None
        fits = (
            target.uri == uri
            and target.offset == offset
            and target.language == language
            and target.text == text
            and prepared.state == state
            and now < prepared.until
        )
        return prepared if fits else None

    def drop(self) -> None:
        """Forget the prepared request and stop one under way (a document changed)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._target = self._prepared = None

    def _start(self) -> None:
        self._timer = None
        if self._target is not None:
            self._task = asyncio.get_running_loop().create_task(self._run(self._target))

    async def _run(self, target: _Target) -> None:
        try:
            prepared = await self._prepare(target.uri, target.text, target.offset, target.language)
        except Exception:  # the request is then assembled as it always was
            log.exception("preparing a next edit failed")
            prepared = None
        if self._target is target:
            self._prepared, self._task = prepared, None
