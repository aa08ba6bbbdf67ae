"""`gateway-ls gateway` as a subprocess on 127.0.0.1, for the tests that call it over HTTP."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest

from bench.harness.processes import free_port
from bench.harness.processes import stop as stop_process
from tests.support.lsp_session import server_env


@dataclass
class Gateway:
    process: subprocess.Popen[bytes]
    root_url: str
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def client(self, api_key: str = "unused") -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base_url, api_key=api_key, max_retries=0, timeout=30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def gateway_command(config_path: Path, *, host: str, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "lsp_server",
        "gateway",
        "--config",
        str(config_path),
        "--host",
        host,
        "--port",
        str(port),
    ]


@contextlib.contextmanager
def running_gateway(
    directory: Path, config_text: str, *, env: Mapping[str, str] | None = None
) -> Iterator[Gateway]:
    directory.mkdir(parents=True, exist_ok=True)
    config_path = directory / "config.toml"
    config_path.write_text(config_text, encoding="utf-8")
    log_path = directory / "gateway.log"
    port = free_port()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            gateway_command(config_path, host="127.0.0.1", port=port),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=server_env(directory, env),
        )
    gateway = Gateway(process, f"http://127.0.0.1:{port}", log_path)
    try:
        wait_until_healthy(gateway)
        yield gateway
    finally:
        stop_process(process)


def wait_until_healthy(gateway: Gateway, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if gateway.process.poll() is not None:
            pytest.fail(f"the gateway exited with {gateway.process.returncode}:\n{gateway.log()}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{gateway.root_url}/healthz", timeout=1).status_code == 200:
                return
        time.sleep(0.05)
    pytest.fail(f"the gateway did not answer within {timeout_s} s:\n{gateway.log()}")
