"""Clients that hold the gateway without finishing a request, bodies made to crash a parser, and
hostile upstreams on the gateway's chat path: `gateway-ls gateway` as a subprocess, raw sockets.

The gateway runs with short `header_timeout_ms` and `body_timeout_ms` and a small
`max_connections`, so each guard shows within a second or two.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.config.model import GatewayConfig
from tests.support import hostile_upstream as hostile
from tests.support.gateway_process import Gateway, running_gateway
from tests.support.lsp_session import endpoint_toml
from tests.support.report import ServerMemory, report_scenario

HEADER_TIMEOUT_S = 2.0  # room on a busy machine to open the connections of the cap test
BODY_TIMEOUT_S = 1.0
MAX_CONNECTIONS = 8
GUARDS = (
    "[local]\nenabled = false\n\n[gateway]\n"
    f"header_timeout_ms = {int(HEADER_TIMEOUT_S * 1000)}\n"
    f"body_timeout_ms = {int(BODY_TIMEOUT_S * 1000)}\nmax_connections = {MAX_CONNECTIONS}\n\n"
)
MARGIN_S = 3.0
BACKUP_TEXT = "compute(42)"
MAX_GROWTH_MB = 64


@pytest.fixture(scope="module")
def backup() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(Behaviour(text=BACKUP_TEXT + "\n"), name="backup") as server:
        yield server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, backup: FakeLLMServer) -> Iterator[Gateway]:
    config = GUARDS + endpoint_toml("backup", backup.base_url, roles='["inline", "refactor"]')
    with running_gateway(tmp_path_factory.mktemp("guarded"), config) as running:
        yield running


def address(gateway: Gateway) -> tuple[str, int]:
    host, _, port = gateway.root_url.removeprefix("http://").rpartition(":")
    return host, int(port)


@contextlib.contextmanager
def raw_connection(gateway: Gateway) -> Iterator[socket.socket]:
    with socket.create_connection(address(gateway), timeout=10) as connection:
        yield connection


def read_until_closed(connection: socket.socket, timeout_s: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection; and when it closed."""
    started = time.monotonic()
    connection.settimeout(timeout_s)
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := connection.recv(65536):
            received += chunk
    return received, time.monotonic() - started


def completion(gateway: Gateway) -> httpx.Response:
    return httpx.post(
        f"{gateway.base_url}/completions",
        json={"model": "gateway-ls", "prompt": "value = ", "max_tokens": 8},
        timeout=10,
    )


def test_a_connection_that_sends_nothing_or_dribbles_its_head_is_closed(gateway: Gateway) -> None:
    memory = ServerMemory(gateway.process.pid)
    with raw_connection(gateway) as silent, raw_connection(gateway) as dribbling:
        dribbling.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        for _ in range(int(HEADER_TIMEOUT_S / 0.1) + 20):  # well past the timeout
            try:
                dribbling.sendall(b"X")
            except OSError:
                break  # closed on us: what the test wants
            time.sleep(0.1)
        dribbled_for = time.monotonic() - started
        answer, _ = read_until_closed(dribbling, MARGIN_S)
        silent_answer, _ = read_until_closed(silent, MARGIN_S)
    assert dribbled_for < HEADER_TIMEOUT_S + MARGIN_S, dribbled_for
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert silent_answer.startswith(b"HTTP/1.1 408 "), silent_answer[:200]
    assert completion(gateway).status_code == 200  # the gateway itself is fine
    report_scenario(
        "gateway-slow-request-head",
        requests=3,
        failures_survived=2,
        memory_growth_mb=memory.growth_mb(),
    )


def test_an_endless_head_is_refused(gateway: Gateway) -> None:
    with raw_connection(gateway) as connection:
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        with contextlib.suppress(OSError):
            for _ in range(64):  # 64 x 4 KB, well past the 64 KB a head may have
                connection.sendall(b"X-Filler: " + b"y" * 4096 + b"\r\n")
        answer, _ = read_until_closed(connection, MARGIN_S)
    assert answer.startswith((b"HTTP/1.1 431 ", b"HTTP/1.1 400 ")), answer[:200]
    report_scenario(
        "gateway-endless-request-head", requests=1, failures_survived=1, memory_growth_mb=None
    )


def test_a_body_that_stalls_is_answered_408_and_the_connection_closed(gateway: Gateway) -> None:
    with raw_connection(gateway) as connection:
        connection.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
            b'content-length: 1000\r\n\r\n{"prompt": "'
        )
        answer, closed_after = read_until_closed(connection, BODY_TIMEOUT_S + MARGIN_S)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:300]
    assert b"request_timeout" in answer
    assert closed_after < BODY_TIMEOUT_S + MARGIN_S
    report_scenario(
        "gateway-slow-request-body", requests=1, failures_survived=1, memory_growth_mb=None
    )


def test_connections_are_capped_and_freed_by_the_head_timeout(gateway: Gateway) -> None:
    with contextlib.ExitStack() as stack:
        holders = [stack.enter_context(raw_connection(gateway)) for _ in range(MAX_CONNECTIONS)]
        time.sleep(0.1)
        capped = completion(gateway)
        for holder in holders:  # the guard lets go of them all
            read_until_closed(holder, HEADER_TIMEOUT_S + MARGIN_S)
    assert capped.status_code == 503, capped.text
    served = completion(gateway)
    assert served.status_code == 200, served.text
    report_scenario(
        "gateway-connection-cap",
        requests=2,
        failures_survived=MAX_CONNECTIONS,
        memory_growth_mb=None,
        failed_over=0,
    )


def test_a_body_nested_200000_deep_is_a_400(gateway: Gateway) -> None:
    body = b'{"prompt": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    for path in ("/completions", "/chat/completions"):
        response = httpx.post(
            f"{gateway.base_url}{path}",
            content=body,
            headers={"content-type": "application/json"},
            timeout=30,
        )
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "invalid_json"
    assert completion(gateway).status_code == 200
    report_scenario(
        "gateway-json-nested-200000-deep", requests=3, failures_survived=2, memory_growth_mb=None
    )


@pytest.mark.parametrize(
    ("scenario", "mode"),
    [
        ("endless-sse-line", hostile.endless_line),
        (
            "usage-not-a-number",
            lambda: hostile.streams_text(
                "fine()", usage='{"prompt_tokens": "n/a", "completion_tokens": 1e400}'
            ),
        ),
    ],
)
def test_chat_survives_a_hostile_refactor_endpoint(
    tmp_path: Path, backup: FakeLLMServer, scenario: str, mode: Callable[[], hostile.Mode]
) -> None:
    with hostile.HostileUpstream(mode()) as upstream:
        config = (
            GUARDS
            + endpoint_toml("hostile", upstream.base_url, fim=False, roles='["refactor"]')
            + endpoint_toml("backup", backup.base_url, fim=False, roles='["refactor"]')
        )
        with running_gateway(tmp_path, config) as running:
            memory = ServerMemory(running.process.pid)
            answers = []
            for stream in (False, True):
                response = httpx.post(
                    f"{running.base_url}/chat/completions",
                    json={
                        "model": "gateway-ls",
                        "messages": [{"role": "user", "content": "tidy this"}],
                        "stream": stream,
                    },
                    timeout=30,
                )
                assert response.status_code == 200, response.text
                answers.append(response)
            growth = memory.peak_growth_mb()
            log = running.log()
    served_by = [r.headers.get("x-gateway-ls-endpoint") for r in answers]
    expected = "backup" if scenario == "endless-sse-line" else "hostile"
    assert served_by == [expected, expected], served_by
    assert growth < MAX_GROWTH_MB, f"the gateway grew by {growth:.0f} MB"
    assert "Traceback" not in log, log[-3000:]
    report_scenario(
        f"gateway-chat-{scenario}",
        requests=2,
        failures_survived=2 if expected == "backup" else 0,
        memory_growth_mb=growth,
        failed_over=served_by.count("backup"),
    )


FLOOD_ADDRESS = "127.0.0.2"  # the flooding peer's own loopback address
FLOOD_CONNECTIONS = 400
OLD_CONNECTION_LIMIT = 256  # the default that 256 silent connections used to exhaust


def closed_by_server(connections: list[socket.socket], timeout_s: float) -> int:
    """How many of `connections` the server has answered or closed within `timeout_s`."""
    pending = set(connections)
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        for connection in pending:
            selector.register(connection, selectors.EVENT_READ)
        while pending and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=max(0.0, deadline - time.monotonic())):
                selector.unregister(key.fileobj)
                pending.discard(key.fileobj)
    return len(connections) - len(pending)


def test_a_healthy_client_is_served_while_a_peer_holds_400_half_open_connections(
    tmp_path: Path, backup: FakeLLMServer
) -> None:
    """One peer opens 400 connections and sends nothing, more than the 256 connections the
    gateway allows here; a client elsewhere, and one behind the flooding peer's own address,
    still get their answers, because each address keeps only its newest half-open connections."""
    cap = GatewayConfig().max_half_open_per_ip
    config = (
        "[local]\nenabled = false\n\n[gateway]\nheader_timeout_ms = 120000\n"
        f"max_connections = {OLD_CONNECTION_LIMIT}\n\n"
        + endpoint_toml("backup", backup.base_url, roles='["inline", "refactor"]')
    )
    request = {"model": "gateway-ls", "prompt": "value = ", "max_tokens": 8}
    with running_gateway(tmp_path, config) as gateway, contextlib.ExitStack() as stack:
        flood = [
            stack.enter_context(
                socket.create_connection(
                    address(gateway), timeout=10, source_address=(FLOOD_ADDRESS, 0)
                )
            )
            for _ in range(FLOOD_CONNECTIONS)
        ]
        elsewhere = completion(gateway)
        neighbour = httpx.Client(transport=httpx.HTTPTransport(local_address=FLOOD_ADDRESS))
        with neighbour:
            same_address = neighbour.post(
                f"{gateway.base_url}/completions", json=request, timeout=10
            )
        still_open = FLOOD_CONNECTIONS - closed_by_server(flood, timeout_s=5)
        assert gateway.process.poll() is None
    assert elsewhere.status_code == 200, elsewhere.text
    assert same_address.status_code == 200, same_address.text
    # The server let go of all but the newest half-open connections of the flooding address
    # (one fewer once the neighbour's connection took a place and then sent its head).
    assert cap - 1 <= still_open <= cap
    report_scenario(
        "gateway-half-open-flood",
        requests=2,
        failures_survived=FLOOD_CONNECTIONS,
        memory_growth_mb=None,
        failed_over=0,
    )
