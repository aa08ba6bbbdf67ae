"""`collection_held_off`: no cyclic collection while a command imports; what it imported is
frozen afterwards, and the collector is as it was."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from lsp_server.cli.collection import FULL_PASS_EVERY, collection_held_off, frozen_for_serving

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()  # the rest of the suite collects as usual
    gc.set_threshold(*thresholds)


@pytest.mark.parametrize("enabled", [True, False])
def test_collection_is_held_off_inside_and_restored_after(enabled: bool) -> None:
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with collection_held_off():
            assert not gc.isenabled()
            kept = [object() for _ in range(10)]
        assert gc.isenabled() is enabled
        assert gc.get_freeze_count() >= len(kept)
    finally:
        (gc.enable if was else gc.disable)()


def test_the_collector_comes_back_when_the_imports_fail() -> None:
    with pytest.raises(ImportError), collection_held_off():
        raise ImportError("no such module")
    assert gc.isenabled()


def test_a_server_about_to_serve_freezes_what_lives_and_makes_full_passes_rare() -> None:
    young, middle, _ = gc.get_threshold()
    cycle = _Node()
    cycle.next = cycle  # start-up garbage only a collection frees
    garbage = weakref.ref(cycle)
    del cycle
    kept = _Node()
    frozen_for_serving()
    assert garbage() is None
    assert not any(found is kept for found in gc.get_objects())  # frozen: walked no more
    assert gc.get_threshold() == (young, middle, FULL_PASS_EVERY)


class _Node:
    next: object = None
