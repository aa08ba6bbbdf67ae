"""The event loop every long-running front door runs on: uvloop where it is installed.

uvloop (libuv) does a socket or pipe read, a write and a task switch in a fraction of asyncio's
pure-Python selector loop; a keystroke makes a few dozen of them on its way through the language
server or the gateway. Where uvloop is missing (Windows), asyncio's own loop runs the same code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_on_fastest_loop(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the fastest loop available."""
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(main)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
