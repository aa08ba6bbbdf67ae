"""llama.cpp's own HTTP server, `llama-server`: a real `kind = "llamacpp"` upstream for tests and
benches, loopback only, on a free port.

`make test` builds it (`make llama-server`, `scripts/build-llama-server.sh`) from the llama.cpp
that the installed llama-cpp-python vendors, into `.tools/llama-server-VERSION/`, so it is the
same llama.cpp as the in-process local model's. As that model does, it keeps the weights out of
repacked and AMX buffers (`--no-repack`: llama.cpp's AMX kernel crashes the process on some
CPUs, see `lsp_server.backends.local.loading`). One slot, so consecutive requests share its KV
cache as one editor's keystrokes do, and no host-memory prompt cache beside it. `/slots` shows
the prompt the model last read (`LLAMA_SERVER_SLOTS_DEBUG`), as llama.cpp wrote it from the
request: the tests read it to see what reached the model.

`/infill` puts `input_extra` only into what the slot's context holds beyond one batch
(`--batch-size`, 2048 tokens by default): at `--ctx-size 2048` it would drop all of it.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.harness.processes import free_port
from bench.harness.processes import stop as stop_process

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120.0
LOG_TAIL_CHARS = 4000


def llama_server_binary() -> Path | None:
    """The `llama-server` built for the installed llama-cpp-python, if it has been built."""
    try:
        version = importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError:
        return None
    binary = REPO_ROOT / ".tools" / f"llama-server-{version}" / "llama-server"
    return binary if binary.is_file() else None


@contextlib.contextmanager
def running_llama_server(
    model: Path, log_path: Path, *, n_ctx: int = 4096, threads: int = 1
) -> Iterator[str]:
    """`llama-server` serving `model` until the block ends; its root URL. Its output goes to
    `log_path`, and is shown when it exits or does not become ready."""
    binary = llama_server_binary()
    if binary is None:
        raise RuntimeError("llama-server is not built: `make llama-server` builds it")
    port = free_port()
    command = [
        str(binary), "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
        "--ctx-size", str(n_ctx), "--threads", str(threads), "--parallel", "1",
        "--no-repack", "--cache-ram", "0", "--no-webui",
    ]  # fmt: skip
    env = {**os.environ, "LLAMA_SERVER_SLOTS_DEBUG": "1"}
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    root = f"http://127.0.0.1:{port}"
    try:
        _wait_until_ready(process, root, log_path)
        yield root
    finally:
        stop_process(process)


def _wait_until_ready(process: subprocess.Popen[bytes], root: str, log_path: Path) -> None:
    """`/health` answers 200 once the model is loaded (503 while it loads)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"llama-server exited:\n{_log_tail(log_path)}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{root}/health", timeout=2).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"llama-server did not become ready:\n{_log_tail(log_path)}")
        time.sleep(0.2)


def _log_tail(log_path: Path) -> str:
    return log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]


def last_prompt(root: str) -> str:
    """The prompt the server's one slot last read, with the model's special tokens written out."""
    return _last_slot_text(root, "prompt")


def last_generated(root: str) -> str:
    """What the model wrote for that prompt."""
    return _last_slot_text(root, "generated")


def _last_slot_text(root: str, key: str) -> str:
    slots = httpx.get(f"{root}/slots", timeout=10).raise_for_status().json()
    text = slots[0].get(key, "")
    return text if isinstance(text, str) else ""
