"""LiteLLM's proxy as the peer of a gateway bench: installed for the benches only, never a
project dependency.

`litellm[proxy]` goes into a virtual environment in the user cache dir the first time a bench
asks for it (`$LITELLM` names a `litellm` command to use instead). When it cannot be had (no
package index, an install that fails), the bench's row for it says why.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import platformdirs

from bench.harness.processes import process

REQUIREMENTS = ("litellm[proxy]", "redis")
MASTER_KEY = f"sk-bench-{secrets.token_hex(16)}"  # the proxy refuses to start without one
_INSTALL_TIMEOUT_S = 1800


class Unavailable(Exception):
    """LiteLLM's proxy could not be installed or started; the message says why."""


def litellm_command() -> Path:
    """The `litellm` command, installed into the bench's own environment when missing."""
    named = os.environ.get("LITELLM")
    if named:
        return Path(named)
    venv = platformdirs.user_cache_path("gateway-ls-bench") / "litellm-proxy-venv"
    command = venv / "bin" / "litellm"
    python = venv / "bin" / "python"
    check = [str(python), "-c", "import litellm.proxy.proxy_server"]
    if command.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return command
    print(f"installing LiteLLM's proxy for this benchmark only, into {venv} ...", file=sys.stderr)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
        install = [str(python), "-m", "pip", "install", "--quiet", *REQUIREMENTS]
        subprocess.run(install, check=True, capture_output=True, timeout=_INSTALL_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as failed:
        raise Unavailable(f"not installed ({type(failed).__name__})") from None
    if subprocess.run(check, capture_output=True).returncode != 0:
        raise Unavailable("not installed (its proxy does not import)")
    return command


@contextlib.contextmanager
def litellm_proxy(
    workdir: Path, port: int, model_list: str, *, settings: str = "", workers: int = 1
) -> Iterator[subprocess.Popen[bytes]]:
    """LiteLLM's proxy on 127.0.0.1:`port` with `model_list` (YAML list items) and
    `settings` (YAML under `litellm_settings` / `router_settings`, at top level)."""
    command = litellm_command()
    config = workdir / f"litellm-{port}.yaml"
    config.write_text(
        f"general_settings:\n  master_key: {MASTER_KEY}\n{settings}model_list:\n{model_list}",
        encoding="utf-8",
    )
    args = [str(command), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    if workers > 1:
        args += ["--num_workers", str(workers)]
    # Quiet, and the model cost map from the package rather than fetched at start.
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    ready = f"http://127.0.0.1:{port}/health/liveliness"
    with contextlib.ExitStack() as stack:
        try:
            child = stack.enter_context(process(args, ready, workdir / f"litellm-{port}.log", 300))
        except RuntimeError as failed:
            raise Unavailable(f"did not start: {str(failed).splitlines()[0][:120]}") from None
        yield child
