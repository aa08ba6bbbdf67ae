"""The in-process llama.cpp model (llama-cpp-python), for offline and sensitive work.

`LocalBackend` is made of the model's worker thread and its jobs (`worker`), and a runner for
each kind of work on it: completions and their read-ahead (`completion_runner`), chats
(`chat_runner`) and next edits (`next_edit_runner`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsp_server.backends.local.completion_runner import CompletionRunner
from lsp_server.backends.local.next_edit_runner import NextEditRunner
from lsp_server.backends.local.tools import template_is_chatml
from lsp_server.backends.local_model import LocalState
from lsp_server.backends.model_presets import local_context_tokens, preset_named


class LocalBackend(NextEditRunner, CompletionRunner):
    """A llama.cpp model inside the server process, loaded lazily on a background thread."""

    @property
    def state(self) -> LocalState:
        return self._state

    @property
    def load_error(self) -> str | None:
        return self._load_error

    @property
    def model_path(self) -> Path | None:
        """The GGUF file in use, known once loading has resolved it."""
        return self._model_path

    @property
    def pending(self) -> int:
        """Generations submitted and not yet finished, the running one included."""
        return len(self._jobs)

    @property
    def fim_supported(self) -> bool | None:
        """Whether the model has fill-in-the-middle tokens; None until it is loaded."""
        if self._state != LocalState.READY or self._prompts is None:
            return None
        return self._prompts.fim_supported

    @property
    def tools_supported(self) -> bool | None:
        """Whether gateway chat with tools can be served here (`tools`); None while
        that depends on a model not yet loaded."""
        mode = self._config.tool_calls
        if mode != "auto":
            return mode == "chatml"
        return None if self._state != LocalState.READY else template_is_chatml(self._chat_template)

    @property
    def next_edit_supported(self) -> bool | None:
        """A preset's own `next_edit`; a model file of the user's own is asked (their
        choice); None under `model = "auto"` until a preset is loaded."""
        if self._config.model_path:
            return True
        if self._auto is None:
            return preset_named(self._config.model).next_edit
        return (
            None
            if self._state != LocalState.READY or self._preset is None
            else self._preset.next_edit
        )

    @property
    def context_tokens(self) -> int:
        """The configured budget, else the preset's in use (before loading: the one named, or
        for `auto` the bundled default's)."""
        if self._preset is not None or self._config.model_path:
            return local_context_tokens(self._config, self._preset)
        return local_context_tokens(self._config, preset_named(self._config.model))

    def details(self) -> dict[str, Any]:
        details: dict[str, Any] = {
            "preset": self._preset.name if self._preset else "",
            "prompt_tokens": self.last_prompt_tokens,
            "reused_tokens": self.last_reused_tokens,
            "prefills": self.prefills,
            "read_ahead_tokens": self.tokens_read_ahead,
            "reading_ahead": bool(self._prefills),
            "first_keystrokes": self.first_keystrokes.status(),
        }
        if self._auto is not None:
            details["auto"] = self._auto.status()
        return details
