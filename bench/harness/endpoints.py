"""The servers more than one benchmark puts behind or in front of gateway-ls, each in a process
of its own: the fake model endpoint, the floor proxy and the apps served by granian, and the
client that calls them."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.harness.processes import free_port, process


def fake_endpoint(
    port: int,
    text: str,
    *,
    log: Path | None = None,
    cores: set[int] | None = None,
    extra: tuple[str, ...] = (),
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """A `FakeLLMServer` answering `text` at once on 127.0.0.1:`port` (`extra`: more of its
    command-line options), pinned to `cores` if given."""
    args = [sys.executable, "-m", "bench.harness.fake_llm_server", "--port", str(port)]
    args += ["--text", text, *extra]
    return process(args, f"http://127.0.0.1:{port}/v1/models", log, cores=cores)


def floor_proxy(
    port: int, endpoint_url: str, log: Path | None = None, *, team: bool = False
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """`bench/floor_proxy.py` on 127.0.0.1:`port` in front of `endpoint_url`."""
    args = [sys.executable, "-m", "bench.floor_proxy", str(port), endpoint_url]
    return process([*args, "--team"] if team else args, f"http://127.0.0.1:{port}/healthz", log)


def granian_server(
    app: str, port: int, target: str, log: Path | None = None
) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    """`bench/granian_server.py` serving `app` on 127.0.0.1:`port`: "gateway" (`target`: its
    configuration file) or "floor" (`target`: the endpoint's URL)."""
    args = [sys.executable, "-m", "bench.granian_server", app, str(port), target]
    return process(args, f"http://127.0.0.1:{port}/healthz", log)


def keep_alive_client(api_key: str) -> httpx.Client:
    """Nagle off, as editors' HTTP stacks have it: a request written in two parts (head, body)
    must not wait for the server's delayed ACK."""
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    return httpx.Client(
        transport=httpx.HTTPTransport(socket_options=nodelay),
        headers={"Authorization": f"Bearer {api_key}"},
        timeout=30,
    )


@contextlib.contextmanager
def zero_latency_endpoint(text: str, cores: set[int] | None = None) -> Iterator[str]:
    """A `FakeLLMServer` answering `text` at once in a process of its own, on `cores` if
    given; yields its OpenAI base URL."""
    port = free_port()
    with fake_endpoint(port, text, cores=cores):
        yield f"http://127.0.0.1:{port}/v1"
