"""End to end: two `gateway-ls gateway` processes share routing state through a real redis-server.

An outage seen through one gateway reroutes the other within a second, without it sending a
single request to the dead endpoint (counted at the endpoint). Redis killed: both keep serving,
each warns once. Redis back: they reconnect and share again. Nothing of a prompt, a path, a key
or a token is ever written to Redis: everything in it, and every message published, is read
back after traffic and holds only endpoint names and numbers.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import redis

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from bench.harness.redis_server import RedisServer
from tests.support.config_text import LOCAL_OFF
from tests.support.gateway_process import Gateway, running_gateway
from tests.support.lsp_session import endpoint_toml, server_env

PREFIX = "def add(a, b):\n    "
SUFFIX = "\n\nprint(add(1, 2))\n"
ROUTING = "[routing]\ninline_deadline_ms = 3000\nhedge_after_ms = 1000\n"
OUTAGE = Behaviour(fault="status:503", retry_after="30")
PROPAGATION_LIMIT_S = 1.0


def shared_config(redis_url: str, *servers: FakeLLMServer, gateway_extra: str = "") -> str:
    endpoints = "".join(endpoint_toml(s.name, s.base_url) for s in servers)
    gateway = f'[gateway]\nstate_url = "{redis_url}"\n{gateway_extra}'
    return ROUTING + LOCAL_OFF + gateway + endpoints


def complete(
    gateway: Gateway, *, prompt: str = PREFIX, headers: dict[str, str] | None = None
) -> str:
    """One inline request; the name of the endpoint that answered."""
    response = httpx.post(
        f"{gateway.base_url}/completions",
        json={"model": "gateway-ls", "prompt": prompt, "suffix": SUFFIX, "max_tokens": 16},
        headers=headers or {},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return response.headers["x-gateway-ls-endpoint"]


def status(gateway: Gateway) -> dict[str, Any]:
    response = httpx.get(f"{gateway.base_url}/gateway-ls/status", timeout=5)
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return body


def health(gateway: Gateway, endpoint: str) -> str:
    shown: str = next(e["health"] for e in status(gateway)["endpoints"] if e["name"] == endpoint)
    return shown


def wait_until(predicate: Callable[[], bool], timeout_s: float, every_s: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every_s)
    return predicate()


def stats_output(gateway: Gateway, tmp_path: Path) -> str:
    printed = subprocess.run(
        [sys.executable, "-m", "lsp_server", "stats", "--url", gateway.root_url],
        capture_output=True,
        text=True,
        timeout=30,
        env=server_env(tmp_path),
    )
    assert printed.returncode == 0, printed.stderr
    return printed.stdout


def see_open(gateway: Gateway, *names: str) -> None:
    """Ask each of `names` by name through `gateway` until it has opened their breakers.

    Asked by name, not left to the router: which endpoint an automatic request explores is a
    draw, and this is about what one gateway learns reaching the other.
    """
    for _ in range(5):
        closed = [name for name in names if health(gateway, name) != "open"]
        if not closed:
            return
        for name in closed:
            httpx.post(
                f"{gateway.base_url}/completions",
                json={"model": name, "prompt": PREFIX, "suffix": SUFFIX, "max_tokens": 16},
                timeout=10,
            )
    pytest.fail(f"{names} never opened: {status(gateway)['endpoints']}")


def connected(gateway: Gateway, peers: int = 1) -> bool:
    shared = status(gateway)["shared_state"]
    return bool(shared["connected"]) and shared["peers"] == peers


@pytest.fixture
def endpoints() -> Iterator[tuple[FakeLLMServer, FakeLLMServer, FakeLLMServer]]:
    with (
        FakeLLMServer(Behaviour(text="return a + b\n"), name="primary") as primary,
        FakeLLMServer(Behaviour(text="return b + a\n", latency_s=0.2), name="backup") as backup,
        FakeLLMServer(Behaviour(text="return a+b\n", latency_s=0.4), name="spare") as spare,
    ):
        yield primary, backup, spare


@contextlib.contextmanager
def two_gateways(tmp_path: Path, config: str) -> Iterator[tuple[Gateway, Gateway]]:
    with (
        running_gateway(tmp_path / "a", config) as first,
        running_gateway(tmp_path / "b", config) as second,
    ):
        assert wait_until(lambda: connected(first) and connected(second), 10), (
            first.log() + second.log()
        )
        yield first, second


def test_an_outage_seen_by_one_gateway_reroutes_the_other(
    tmp_path: Path,
    redis_server: RedisServer,
    endpoints: tuple[FakeLLMServer, FakeLLMServer, FakeLLMServer],
) -> None:
    primary = endpoints[0]
    with two_gateways(tmp_path, shared_config(redis_server.url, *endpoints)) as (first, second):
        # Both prefer the primary (the router may try another now and then to compare).
        assert complete(first) and complete(second)
        assert [complete(second) for _ in range(3)].count("primary") >= 2

        primary.behaviour = OUTAGE
        see_open(first, "primary")  # the first gateway pays for finding out
        sent_to_primary = len(primary.requests)

        # One second later the second gateway routes around the outage it never saw itself.
        time.sleep(PROPAGATION_LIMIT_S)
        for _ in range(5):
            assert complete(second) in ("backup", "spare")
        assert len(primary.requests) == sent_to_primary, "the second gateway asked the dead one"
        assert health(second, "primary") == "open"


def test_gateways_keep_serving_without_redis_and_share_again_when_it_is_back(
    tmp_path: Path,
    redis_server: RedisServer,
    endpoints: tuple[FakeLLMServer, FakeLLMServer, FakeLLMServer],
) -> None:
    primary, backup = endpoints[0], endpoints[1]
    with two_gateways(tmp_path, shared_config(redis_server.url, *endpoints)) as (first, second):
        shown = stats_output(first, tmp_path)
        assert f"shared state {redis_server.url}: connected, 1 other gateway(s)" in shown
        redis_server.kill()
        for gateway in (first, second):

            def disconnected(g: Gateway = gateway) -> bool:
                return not status(g)["shared_state"]["connected"]

            assert wait_until(disconnected, 5)
        for _ in range(10):
            assert complete(first) and complete(second)
        time.sleep(1.5)  # a few reconnection attempts fail meanwhile
        for gateway in (first, second):
            shared = status(gateway)["shared_state"]
            assert shared["connected"] is False and shared["error"]
            warnings = [line for line in gateway.log().splitlines() if "unavailable" in line]
            assert len(warnings) == 1, gateway.log()
            assert "routing on this process's own statistics" in warnings[0]
        assert f"shared state {redis_server.url}: NOT connected" in stats_output(first, tmp_path)

        redis_server.start()  # same port, empty: no persistence
        assert wait_until(lambda: connected(first) and connected(second), 10)
        backup.behaviour = primary.behaviour = OUTAGE  # now an outage, seen through the second
        see_open(second, "primary", "backup")
        assert wait_until(
            lambda: health(first, "primary") == health(first, "backup") == "open",
            PROPAGATION_LIMIT_S,
        )
        sent = len(primary.requests), len(backup.requests)
        assert complete(first) == "spare"
        assert (len(primary.requests), len(backup.requests)) == sent
        assert "is back" in first.log()


def test_a_late_gateway_starts_with_the_breakers_and_samples_already_shared(
    tmp_path: Path,
    redis_server: RedisServer,
    endpoints: tuple[FakeLLMServer, FakeLLMServer, FakeLLMServer],
) -> None:
    primary = endpoints[0]
    config = shared_config(redis_server.url, *endpoints)
    with running_gateway(tmp_path / "a", config) as first:
        assert wait_until(lambda: connected(first, peers=0), 10)
        for _ in range(3):
            complete(first)
        primary.behaviour = OUTAGE
        see_open(first, "primary")
        with running_gateway(tmp_path / "b", config) as late:
            assert wait_until(lambda: connected(late), 10)
            assert health(late, "primary") == "open"
            answered = {e["name"] for e in status(first)["endpoints"] if e["wins"]}
            seen = {e["name"]: e for e in status(late)["endpoints"]}
            for name in answered:  # the first gateway's estimates, not its counts
                assert seen[name]["first_token_estimate_ms"] is not None
                assert seen[name]["requests"] == 0
            sent = len(primary.requests)
            assert complete(late) in ("backup", "spare")
            assert len(primary.requests) == sent


class _Recorder:
    """Every message published on every channel while it runs."""

    def __init__(self, url: str) -> None:
        self._client = redis.Redis.from_url(url)
        self._pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        self._pubsub.psubscribe("*")
        self.messages: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._pubsub.get_message(timeout=0.1)
            if message and message["type"] == "pmessage":
                self.messages.append(message["data"])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._pubsub.close()
        self._client.close()


def _everything_stored(url: str) -> dict[bytes, list[bytes]]:
    """Every key, and what it holds."""
    # A client without decode_responses answers bytes; redis-py's annotations cover str too.
    client = redis.Redis.from_url(url)
    found: dict[bytes, list[bytes]] = {}
    try:
        for key in client.scan_iter(count=1000):
            kind = client.type(key)
            held = found.setdefault(key, [])
            if kind == b"string":
                held.append(cast(bytes | None, client.get(key)) or b"")
            elif kind == b"list":
                held.extend(cast(list[bytes], client.lrange(key, 0, -1)))
            elif kind == b"hash":
                for field, value in cast(dict[bytes, bytes], client.hgetall(key)).items():
                    held += [field, value]
            elif kind in (b"set", b"zset"):
                members = client.smembers(key) if kind == b"set" else client.zrange(key, 0, -1)
                held.extend(cast(Iterable[bytes], members))
            elif kind == b"stream":
                stream = cast(list[tuple[bytes, dict[bytes, bytes]]], client.xrange(key))
                for _, fields in stream:
                    for field, value in fields.items():
                        held += [field, value]
            else:
                pytest.fail(f"unexpected key type {kind!r}")
    finally:
        client.close()
    return found


def _strings_in(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, list):
        return set().union(*(_strings_in(v) for v in value)) if value else set()
    if isinstance(value, dict):
        return set(value) | _strings_in(list(value.values()))
    return set()


def test_nothing_of_a_prompt_path_key_or_token_reaches_redis(
    tmp_path: Path,
    redis_server: RedisServer,
    endpoints: tuple[FakeLLMServer, FakeLLMServer, FakeLLMServer],
) -> None:
    primary = endpoints[0]
    api_key = "sk-live-" + "9f3Kq7ZxW2mB8vN4pL6tR1yU"
    client_token = "tok-" + "H7d9Qm2Lx8Vb4Nc6"
    prompt_marker = "PROMPT_MARKER_7f1c"
    path_marker = "PATH_MARKER_c3e9"
    secret_in_prompt = "AKIA" + "QWERTYUIOP123456"
    config = shared_config(
        redis_server.url,
        *endpoints,
        gateway_extra='token_env = "TEAM_TOKEN"\n',
    ).replace(ROUTING, ROUTING + "redact_secrets = false\n")
    config = config.replace('model = "fake-model"', 'model = "fake-model"\napi_key_env = "API_KEY"')
    recorder = _Recorder(redis_server.url)
    env = {"TEAM_TOKEN": client_token, "API_KEY": api_key}
    try:
        with (
            running_gateway(tmp_path / "a", config, env=env) as first,
            running_gateway(tmp_path / "b", config, env=env) as second,
        ):
            auth = {"Authorization": f"Bearer {client_token}"}
            headers = {**auth, "X-Gateway-LS-Path": f"/home/dev/{path_marker}/app.py"}
            prompt = f"# {prompt_marker}\naws_key = '{secret_in_prompt}'\n{PREFIX}"
            for gateway in (first, second):
                for _ in range(5):
                    complete(gateway, prompt=prompt, headers=headers)
            primary.behaviour = OUTAGE
            complete(first, prompt=prompt, headers=headers)
            assert wait_until(
                lambda: "primary" in str(recorder.messages) or len(recorder.messages) > 5, 5
            )
            time.sleep(1.2)  # a heartbeat from each
    finally:
        recorder.close()
    # The key, the prompt and the path did leave for the endpoint; only not for Redis.
    assert primary.requests[0].headers["authorization"] == f"Bearer {api_key}"
    assert prompt_marker in primary.received_text()
    held = _everything_stored(redis_server.url)
    stored = [*held, *(value for values in held.values() for value in values)]
    assert stored and recorder.messages
    everything = b"\n".join(stored + recorder.messages)
    for marker in (prompt_marker, path_marker, secret_in_prompt, api_key, client_token, "def add"):
        assert marker.encode() not in everything, marker
    names = {"primary", "backup", "spare"}
    for message in recorder.messages:
        assert _strings_in(json.loads(message)) <= names | {
            "v",
            "from",
            "samples",
            "opened",
            "closed",
            "inline",
            "hedged",
        }
    # The usage ledger: the client's name (its token variable), endpoints and numbers.
    ledger = held.pop(b"gateway-ls:v1:usage")
    fields = {b"at", b"client", b"endpoint", b"class", b"in", b"out", b"micros", b"ms"}
    assert set(ledger[0::2]) == fields
    assert set(ledger[1::2]) - {b"TEAM_TOKEN", b"inline", *(n.encode() for n in names), b""} <= {
        v for v in ledger[1::2] if v.isdigit()
    }
    # The gateways alive, by a random id each.
    alive = held.pop(b"gateway-ls:v1:limits:gateways")
    assert all(re.fullmatch(rb"[0-9a-f]{16}", g) for g in alive) and len(alive) == 2
    # The limits' epoch: a random id, written once.
    (epoch,) = held.pop(b"gateway-ls:v1:limits:epoch")
    assert re.fullmatch(rb"[0-9a-f]{16}", epoch)
    # Each gateway's last settle call: its number, under the gateway's id.
    settled = {k: held.pop(k) for k in list(held) if k.startswith(b"gateway-ls:v1:limits:settled:")}
    assert {k.rsplit(b":", 1)[1] for k in settled} <= set(alive) and settled
    assert all(number.isdigit() for (number,) in settled.values())
    keys = [k.decode() for k in held]
    assert any(":snapshot:" in k for k in keys) and any(":breaker:" in k for k in keys)
    assert all(k.rsplit(":", 1)[-1] in names or k.rsplit(":", 1)[-1].isdigit() for k in keys)
    values = [v for values in held.values() for v in values]
    for value in values:  # breaker keys hold a number, snapshots numbers under name digests
        strings = _strings_in(json.loads(value)) - {"version", "endpoints"}
        assert all(re.fullmatch(r"[0-9a-f]{32}", s) for s in strings), value
