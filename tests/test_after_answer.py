"""Work handed to `after_answer` waits for the request's answer where a front door writes it,
and runs at once where none does."""

from __future__ import annotations

import asyncio
import logging

import pytest

from lsp_server.after_answer import AfterAnswer, later, opened

pytestmark = pytest.mark.unit


def test_without_a_front_door_the_work_runs_at_once() -> None:
    done: list[str] = []
    later(lambda: done.append("records"))
    assert done == ["records"]


def test_the_work_waits_for_the_answer_and_keeps_its_order() -> None:
    done: list[str] = []
    after = AfterAnswer()
    with opened(after):
        later(lambda: done.append("first"))
        later(lambda: done.append("second"))
    assert done == []
    after.run()
    assert done == ["first", "second"]


def test_work_handed_over_once_the_answer_is_out_runs_at_once() -> None:
    done: list[str] = []
    after = AfterAnswer()
    with opened(after):
        after.run()
        later(lambda: done.append("late"))
    assert done == ["late"]


def test_a_task_started_by_the_request_hands_its_work_to_the_request() -> None:
    done: list[str] = []
    after = AfterAnswer()

    async def handler() -> None:
        later(lambda: done.append("records"))

    async def main() -> None:
        with opened(after):
            task = asyncio.get_running_loop().create_task(handler())
        await task
        assert done == []
        after.run()

    asyncio.run(main())
    assert done == ["records"]


def test_failing_work_is_logged_and_the_rest_still_runs(caplog: pytest.LogCaptureFixture) -> None:
    done: list[str] = []
    after = AfterAnswer()

    def fails() -> None:
        raise RuntimeError("broken statistics")

    with opened(after):
        later(fails)
        later(lambda: done.append("second"))
    with caplog.at_level(logging.ERROR):
        after.run()
    assert done == ["second"]
    assert "broken statistics" in caplog.text
