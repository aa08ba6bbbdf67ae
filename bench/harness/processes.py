"""Servers a benchmark runs in processes of their own: started from the repository root, ready
once a URL answers, on the cores asked for, and ended with the block that started them."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TypeVar

import httpx

ROOT = Path(__file__).resolve().parents[2]

Started = TypeVar("Started")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def process(
    args: list[str],
    ready_url: str,
    log: Path | None = None,
    timeout_s: float = 60,
    *,
    env: Mapping[str, str] | None = None,
    cores: set[int] | None = None,
    cwd: Path = ROOT,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `args` in `cwd` (the repository's root) until the block ends, its output to `log`
    (None: discarded), pinned to `cores` if given; ready once `ready_url` answers with a status
    below 500."""
    with log.open("wb") if log is not None else contextlib.nullcontext() as output:
        child = subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output if output is not None else subprocess.DEVNULL,
            stderr=subprocess.STDOUT if output is not None else subprocess.DEVNULL,
        )
    try:
        if cores:
            os.sched_setaffinity(child.pid, cores)
        deadline = time.monotonic() + timeout_s
        while True:
            if child.poll() is not None:
                said = log.read_text(errors="replace") if log is not None else ""
                raise RuntimeError(f"{args[:4]} exited:\n{said}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(ready_url, timeout=1, trust_env=False).status_code < 500:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{args[:4]} did not start within {timeout_s} s")
            time.sleep(0.05)
        yield child
    finally:
        stop(child)


def stop(child: subprocess.Popen[bytes], timeout_s: float = 10) -> None:
    """Terminate `child`, and kill it when it has not exited within `timeout_s`."""
    child.terminate()
    try:
        child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


@contextlib.contextmanager
def started_on(
    cores: set[int] | None, servers: contextlib.AbstractContextManager[Started]
) -> Iterator[Started]:
    """`servers` entered with the processes they start pinned to `cores` (inherited at start),
    this process back on its own cores once they are; None: no pinning."""
    with contextlib.ExitStack() as stack:
        own = os.sched_getaffinity(0)
        if cores:
            os.sched_setaffinity(0, cores)
        try:
            started = stack.enter_context(servers)
        finally:
            if cores:
                os.sched_setaffinity(0, own)
        yield started
