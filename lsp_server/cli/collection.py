"""The cyclic garbage collector, held off while a command imports what it runs on.

Imports allocate hundreds of thousands of objects and free almost none of them, yet each pass
of the collector walks them all: at start-up it collected nothing and cost the language server
about a third of its own share of the time to its `initialize` answer. Afterwards what was
imported is frozen (left out of every later pass), which also makes the passes during
keystrokes shorter.

A server freezes again once it is built and warmed up (`frozen_for_serving`): its engine and
its connections live as long as the process, and every full pass under load would walk them
again while requests wait. Frozen, they no longer count either in what decides when the next
full pass comes (one once the objects moved to the oldest generation since the last pass reach
a quarter of those it kept), so full passes would come several times as often, each walking
every request in flight: at a team's load (bench_team) one every 5 s holding the event loop
10 to 19 ms. A server therefore makes them come at most every `FULL_PASS_EVERY` passes of the
middle generation (each a few milliseconds; about a minute apart at that load), which is also
how long cyclic garbage that reached the oldest generation may wait.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

FULL_PASS_EVERY = 100  # passes of the middle generation; Python's own default is 10


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
    pass, and full passes rarer: a server about to take traffic."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_PASS_EVERY)
