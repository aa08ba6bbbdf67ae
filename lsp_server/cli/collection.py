"""The cyclic garbage collector, held off while a command imports what it runs on.

Imports allocate hundreds of thousands of objects and free almost none of them, yet each pass
of the collector walks them all: at start-up it collected nothing and cost the language server
about a third of its own share of the time to its `initialize` answer. Afterwards what was
imported is frozen (left out of every later pass), which also makes the passes during
keystrokes shorter.

A server freezes again once it is built and warmed up (`frozen_for_serving`): its engine, its
connections and the first requests' caches live as long as the process, and every full pass
under load would walk them again while requests wait.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collection_held_off() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def frozen_for_serving() -> None:
    """Collect what start-up left behind, then leave everything alive now out of every later
    pass: a server about to take traffic."""
    gc.collect()
    gc.freeze()
