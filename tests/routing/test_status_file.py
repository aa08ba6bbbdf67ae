"""The status a running server publishes for `gateway-ls stats`: the router's own status, written
again when it changes and only then, and removed on exit."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import threading
import time

import pytest

from lsp_server.routing.router import Router
from lsp_server.routing.status_file import StatusPublisher, read_running, status_dir
from tests.support.stand_in import REQUEST, StandIn, stand_in_router

pytestmark = pytest.mark.unit


def published() -> tuple[dict[str, object], int]:
    """The file this process published: its JSON and its inode (a write makes a new one)."""
    path = status_dir() / f"{os.getpid()}.json"
    return json.loads(path.read_text(encoding="utf-8")), path.stat().st_ino


def expected(router: Router) -> dict[str, object]:
    status = {"pid": os.getpid(), "kind": "gateway", **router.status()}
    loaded: dict[str, object] = json.loads(json.dumps(status))
    return loaded


async def test_the_published_status_is_the_routers_and_changes_with_it() -> None:
    router = stand_in_router([StandIn("alpha", []), StandIn("beta", [])])
    publisher = StatusPublisher(router.status, kind="gateway")
    try:
        for _ in range(3):
            await router.inline(REQUEST)
        await publisher.publish()
        first, first_inode = published()
        assert first == expected(router)
        assert first["inline_requests"] == 3
        assert len(first["decisions"]) == 3  # type: ignore[arg-type]

        await publisher.publish()  # nothing changed: the file is not written again
        assert published() == (first, first_inode)

        await router.inline(REQUEST)
        await publisher.publish()
        second, second_inode = published()
        assert second_inode != first_inode
        assert second == expected(router)
        assert second["inline_requests"] == 4
        assert [entry["pid"] for entry in read_running()] == [os.getpid()]
    finally:
        await publisher.stop()
        await router.aclose()
    assert not (status_dir() / f"{os.getpid()}.json").exists()


async def test_a_new_configuration_shows_in_the_status() -> None:
    router = stand_in_router([StandIn("alpha", [])])
    try:
        before = router.status()["config"]
        assert router.status()["config"] is before  # the same configuration: made once
        routing = dataclasses.replace(router.config.routing, inline_deadline_ms=777)
        router.reconfigure(dataclasses.replace(router.config, routing=routing))
        assert before["routing"]["inline_deadline_ms"] == 5000
        assert router.status()["config"]["routing"]["inline_deadline_ms"] == 777
    finally:
        await router.aclose()


async def test_a_write_under_way_when_the_server_stops_leaves_no_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    router = stand_in_router([StandIn("alpha", [])])
    publisher = StatusPublisher(router.status, kind="gateway")
    write = publisher._write
    started = threading.Event()

    def slow_write(body: bytes) -> bool:  # a slow disk: the write ends after stop() began
        started.set()
        time.sleep(0.3)
        return write(body)

    monkeypatch.setattr(publisher, "_write", slow_write)
    try:
        publisher.start()
        await asyncio.to_thread(started.wait, 5)
    finally:
        await publisher.stop()
        await router.aclose()
    assert not (status_dir() / f"{os.getpid()}.json").exists()
