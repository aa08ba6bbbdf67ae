"""What the router may ask of the model inside the server, beyond what every backend does.

The local model loads in the background, may fail to load, and can read a document ahead of a
keystroke (prefill). These abilities are declared here so that routing asks for them by name;
the defaults describe a model that is always ready and has nothing to prefill.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

from lsp_server.backends.base import Backend, CompletionRequest, EditCall


class LocalState(StrEnum):
    UNLOADED = "unloaded"  # enabled, not asked to load yet
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"  # `load_error` says why
    DISABLED = "disabled"  # `[local] enabled = false`


class LocalModel(Backend):
    """A backend that runs on this machine: the answer for offline and sensitive work."""

    name = "local"
    is_local = True

    @property
    def state(self) -> LocalState:
        return LocalState.READY

    @property
    def load_error(self) -> str | None:
        return None

    @property
    def model_path(self) -> Path | None:
        """The model file in use, once loading has resolved it."""
        return None

    @property
    def fim_supported(self) -> bool | None:
        """Whether the model has fill-in-the-middle tokens; None until it is loaded."""
        return None

    @property
    def tools_supported(self) -> bool | None:
        """Whether gateway chat offering tools can be served here; None while that depends on
        a model not yet loaded."""
        return False

    @property
    def next_edit_supported(self) -> bool | None:
        """Whether next edits are asked of this model; None while that depends on a model not
        yet loaded."""
        return True

    @property
    def context_tokens(self) -> int:
        """Tokens of context beyond the file its prompts take (the model in use decides)."""
        return 0

    def start_loading(self) -> None:
        """Begin loading in the background; does nothing if loading already began."""

    async def ensure_loaded(self) -> None:
        """Wait until the model is ready; raise `BackendError(UNAVAILABLE)` if it cannot be."""

    def prefill(self, request: CompletionRequest) -> bool:
        """Evaluate `request`'s prompt ahead of time if idle; True if that started."""
        return False

    def prefill_edit(self, call: EditCall) -> bool:
        """Evaluate a next edit's prompt ahead of time if idle; True if that started."""
        return False

    def details(self) -> dict[str, Any]:
        """What the model reports of itself for the status: the preset in use, how much of
        the last prompt it had read ahead, how `model = "auto"` chose."""
        return {}
