"""A handler's records (`after_answer`) are made right after its answer is written, before the
server reads anything else; a failed or cancelled request still makes them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage

from lsp_server.after_answer import later
from lsp_server.lsp.protocol import GatewayProtocol, json_params_converter

pytestmark = pytest.mark.unit

EVENTS: list[str] = []
HANDED_OVER: list[int] = []  # requests that have handed their records over


class Writer:
    def write(self, data: bytes) -> None:
        EVENTS.append("answer" if b'"id"' in data else "notification")


def server() -> LanguageServer:
    ls = LanguageServer(
        "after", "1", protocol_cls=GatewayProtocol, converter_factory=json_params_converter
    )
    ls.protocol.set_writer(Writer())  # type: ignore[arg-type]

    @ls.feature("test/async")
    async def answered_later(ls: LanguageServer, params: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        later(lambda: EVENTS.append("records"))
        HANDED_OVER.append(1)
        if params.get("fail"):
            raise ValueError("no answer")
        if params.get("wait"):
            await asyncio.Event().wait()
        return {"ok": True}

    @ls.feature("test/noted")
    def noted_at_once(ls: LanguageServer, params: Any) -> Iterator[None]:
        """A generator, as pygls' own document handlers are: done as soon as it is run."""
        EVENTS.append("noted")
        yield from ()

    @ls.feature("test/sync")
    def answered_at_once(ls: LanguageServer, params: Any) -> dict[str, Any]:
        later(lambda: EVENTS.append("records"))
        return {"ok": True}

    return ls


def request(method: str, params: dict[str, Any], msg_id: int = 1) -> JsonRPCRequestMessage:
    return JsonRPCRequestMessage(id=msg_id, jsonrpc="2.0", method=method, params=params)


async def until(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0)


@pytest.fixture(autouse=True)
def fresh_events() -> None:
    EVENTS.clear()
    HANDED_OVER.clear()


@pytest.mark.parametrize("method", ["test/async", "test/sync"])
@pytest.mark.parametrize("params", [{}, {"fail": True}], ids=["answered", "failed"])
async def test_the_records_follow_the_answer(method: str, params: dict[str, Any]) -> None:
    ls = server()
    ls.protocol.handle_message(request(method, params))
    await asyncio.wait_for(until(lambda: "records" in EVENTS), timeout=5)
    assert EVENTS == ["answer", "records"]


async def test_a_cancelled_request_still_makes_its_records() -> None:
    ls = server()
    protocol = ls.protocol
    assert isinstance(protocol, GatewayProtocol)
    protocol.handle_message(request("test/async", {"wait": True}, msg_id=7))
    await asyncio.wait_for(until(lambda: bool(HANDED_OVER)), timeout=5)
    assert EVENTS == []  # the handler waits, its records handed over
    protocol.cancel_request(7)
    await asyncio.wait_for(until(lambda: "records" in EVENTS), timeout=5)
    assert EVENTS == ["answer", "records"]  # the cancellation's answer, then the records


async def test_a_notification_handled_at_once_leaves_nothing_behind() -> None:
    """pygls keeps a notification's future in its table of requests and never takes it out: a
    notification per keystroke would grow it without end."""
    ls = server()
    protocol = ls.protocol
    for _ in range(3):
        protocol.handle_message(JsonRPCNotification(jsonrpc="2.0", method="test/noted", params={}))
    await asyncio.wait_for(until(lambda: EVENTS.count("noted") == 3), timeout=5)
    await asyncio.wait_for(until(lambda: not protocol._request_futures), timeout=5)
