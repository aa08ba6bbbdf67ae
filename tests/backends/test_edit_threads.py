"""The threads of a next edit: every core while they read faster than the configured threads,
measured on the edit's own reading steps, and the configured count again once it ends. (With
the real model: test_copy_decoding.py.)"""

from __future__ import annotations

from types import SimpleNamespace

import llama_cpp
import pytest

from lsp_server.backends.local.edit_threads import HOLD_S, WIDE_GAIN, CoreVerdict, EditThreads


@pytest.fixture
def set_threads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every thread count set on the model, in order."""
    counts: list[int] = []
    monkeypatch.setattr(llama_cpp, "llama_set_n_threads", lambda _ctx, n, _batch: counts.append(n))
    return counts


def threads(known_tps: float | None, read: list[float], cores: int = 2) -> EditThreads:
    return EditThreads(
        SimpleNamespace(ctx=object()),  # type: ignore[arg-type]  # the setter is replaced
        configured=1,
        cores=cores,
        configured_tps=known_tps,
        configured_read=lambda tokens, seconds: read.append(tokens / seconds),
    )


def test_an_edit_runs_on_every_core_while_they_read_faster(set_threads: list[int]) -> None:
    read: list[float] = []
    with threads(100.0, read) as edit:
        edit.on_step(64, 64 / 180)  # 1.8 times the configured threads' speed
        edit.on_step(64, 64 / 180)
        assert edit.threads == 2
    assert set_threads == [2, 1]  # and the configured count once it ends
    assert read == []  # the pace of the configured threads hears none of it
    assert not edit.fell_back


def test_an_edit_on_cores_that_read_no_faster_goes_on_with_the_configured_threads(
    set_threads: list[int],
) -> None:
    read: list[float] = []
    with threads(100.0, read) as edit:
        edit.on_step(64, 64 / (WIDE_GAIN * 100 - 10))  # another process holds a core
        assert edit.threads == 1
        edit.on_step(64, 0.5)
    assert set_threads == [2, 1]
    assert read == [128.0]  # the steps on the configured threads are their pace's
    assert edit.fell_back


def test_without_a_known_pace_the_first_step_is_read_on_the_configured_threads(
    set_threads: list[int],
) -> None:
    read: list[float] = []
    with threads(None, read) as edit:
        assert edit.threads == 1
        edit.on_step(16, 0.2)  # too short to say
        assert edit.threads == 1
        edit.on_step(64, 0.64)  # 100 a second: learnt, then every core to compare
        assert edit.threads == 2
        edit.on_step(64, 64 / 90)  # slower: back
        assert edit.threads == 1
    assert read == [80.0, 100.0]
    assert set_threads == [2, 1]


def test_configured_threads_that_take_every_core_are_left_alone(set_threads: list[int]) -> None:
    with threads(100.0, [], cores=1) as edit:
        edit.on_step(64, 0.1)
        assert edit.threads == 1
    assert set_threads == []


def test_after_every_core_read_slower_the_next_edits_keep_to_the_configured_threads() -> None:
    """A core held by a build stays held a while: trying all cores again at once would pay
    the contended step on every edit."""
    now = [100.0]
    verdict = CoreVerdict(clock=lambda: now[0])
    assert verdict.allowed()
    verdict.slower()
    now[0] += HOLD_S - 1
    assert not verdict.allowed()
    now[0] += 1
    assert verdict.allowed()
