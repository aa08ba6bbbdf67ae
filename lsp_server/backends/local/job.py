"""One piece of model work on the worker thread, and its channel back to the event loop."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

# Sent after a job's last item: the consumer stops reading.
END = object()


@dataclass(eq=False)
class Job:
    """One generation: its channel to the event loop, its stop flag and its token counts."""

    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[Any]
    stop: threading.Event = field(default_factory=threading.Event)
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def send(self, item: object) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            self.stop.set()
