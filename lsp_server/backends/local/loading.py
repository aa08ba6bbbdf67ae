"""Opening a GGUF file with llama-cpp-python, with the server's settings and its log kept off
the terminal."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from lsp_server.backends.bundled_model import INSTALL_HINT, ModelUnavailable
from lsp_server.config.model import LocalConfig

if TYPE_CHECKING:
    from llama_cpp import Llama


def open_model(path: Path, config: LocalConfig, *, chat_format: str | None = None) -> Llama:
    """A `llama_cpp.Llama` for `path` with the server's settings; blocks while it loads."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise ModelUnavailable(f"llama-cpp-python is not installed: {INSTALL_HINT}") from exc
    _send_native_logs_to_logging(llama_cpp)
    threads = config.n_threads or os.cpu_count() or 1
    with plain_weight_buffers(llama_cpp):
        return llama_cpp.Llama(
            model_path=str(path),
            n_ctx=config.n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            # Sliding-window layers keep the whole context, so a shared prompt prefix stays valid.
            swa_full=True,
            chat_format=chat_format,
            verbose=False,
        )


def load_failure_message(path: Path | None, exc: Exception) -> str:
    if isinstance(exc, ModelUnavailable):
        return str(exc)
    where = str(path) if path is not None else "the local model"
    return (
        f"cannot load {where}: {exc}; check that it is a llama.cpp GGUF model "
        "([local] model_path), or leave model_path empty for the bundled model"
    )


_native_log = logging.getLogger("lsp_server.llama_cpp")
_log_bridge: Any = None  # the ctypes callback must outlive every call into llama.cpp


def _send_native_logs_to_logging(llama_cpp: ModuleType) -> None:
    """llama.cpp's own messages (cache layout notes and the like) go to debug logging instead
    of the terminal: stderr is the editor's server log, and they are not for the person."""
    global _log_bridge
    if _log_bridge is not None:
        return

    def forward(_level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
        _native_log.debug("%s", text.decode("utf-8", "replace").rstrip())

    _log_bridge = llama_cpp.llama_log_callback(forward)
    llama_cpp.llama_log_set(_log_bridge, ctypes.c_void_p(0))


_DEFAULT_PARAMS_LOCK = threading.Lock()


@contextlib.contextmanager
def plain_weight_buffers(llama_cpp: ModuleType) -> Iterator[None]:
    """Load weights without repacking them into AMX buffers where llama.cpp was built with AMX.

    The AMX matrix kernel crashes the process on some CPUs (llama.cpp issue 20824, seen with
    Q4_K_M models); llama-cpp-python does not expose `use_extra_bufts`, so the default model
    parameters are adjusted while the model loads.
    """
    if b"AMX_INT8 = 1" not in llama_cpp.llama_print_system_info():
        yield
        return
    low_level = llama_cpp.llama_cpp
    original = low_level.llama_model_default_params

    def without_extra_buffers() -> Any:
        params = original()
        params.use_extra_bufts = False
        return params

    with _DEFAULT_PARAMS_LOCK:
        low_level.llama_model_default_params = without_extra_buffers
        try:
            yield
        finally:
            low_level.llama_model_default_params = original
