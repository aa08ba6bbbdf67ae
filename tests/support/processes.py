"""Ending a server process a test started."""

from __future__ import annotations

import subprocess


def stop_process(process: subprocess.Popen[bytes], timeout_s: float = 10) -> None:
    """Terminate `process`, and kill it when it has not exited within `timeout_s`."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
