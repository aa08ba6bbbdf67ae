"""Bookkeeping a request owes once its answer is out: run after the answer is written.

A front door that writes each answer itself opens `AfterAnswer` for a request (`opened`); the
work below it that only keeps records (a routed request's statistics, its decision) is then
handed to `later` instead of done on the request's path, and the front door runs it right
after the answer is written, before it reads anything else. Where no front door opened one (a
caller that awaits the router directly, the HTTP gateway), or once it has run, `later` runs
the work at once: nothing is ever left undone, and whoever awaits a request without a front
door reads its records as soon as it returns.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)


class AfterAnswer:
    """What one request owes once its answer is written, in the order it was handed over."""

    __slots__ = ("_done", "_work")

    def __init__(self) -> None:
        self._work: list[Callable[[], None]] = []
        self._done = False

    def add(self, work: Callable[[], None]) -> None:
        if self._done:
            _run(work)
        else:
            self._work.append(work)

    def run(self) -> None:
        """The answer is written: run what was handed over; anything handed over from now on
        runs at once."""
        self._done = True
        work, self._work = self._work, []
        for each in work:
            _run(each)


_CURRENT: contextvars.ContextVar[AfterAnswer | None] = contextvars.ContextVar(
    "gateway_ls_after_answer", default=None
)


@contextlib.contextmanager
def opened(after: AfterAnswer) -> Iterator[AfterAnswer]:
    """`after` collects the work of what starts in this context (a request's handler and the
    tasks it starts copy the context when they start)."""
    token = _CURRENT.set(after)
    try:
        yield after
    finally:
        _CURRENT.reset(token)


def later(work: Callable[[], None]) -> None:
    """Run `work` once the current request's answer is written, or now when nobody writes it."""
    after = _CURRENT.get()
    if after is None:
        _run(work)
    else:
        after.add(work)


def _run(work: Callable[[], None]) -> None:
    try:
        work()
    except Exception:  # bookkeeping: never the request's failure, nor the server's
        log.exception("recording a request's outcome failed")
