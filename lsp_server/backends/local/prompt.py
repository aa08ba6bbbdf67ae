"""The token prompt of a completion from the local model.

Fill-in-the-middle when the model has FIM tokens, else the prefix alone; the code before the
cursor is a window anchored to document lines (`prompt_window`), so that what was read ahead
stays in the KV cache when the cursor moves. Context beyond the file leads the prompt (it
changes least from one keystroke to the next): in the repository-level format
(`<|repo_name|>`, `<|file_sep|>path`) for a model that has those tokens and FIM (Qwen2.5-Coder,
StarCoder2), else as path-comment blocks, which is what a model without FIM tokens (the bundled
Gemma 3 270M) can read as plain code. Text typed since the last FIM prompt follows it as the
start of the middle (`MiddleAnchor`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from lsp_server.backends.base import CompletionRequest, ContextChunk, context_within
from lsp_server.backends.context_prompt import path_comment_blocks, repo_level_parts
from lsp_server.backends.local.completion_text import MiddleAnchor, indent_to_heal
from lsp_server.backends.local.prompt_fit import FimTokens, fit_prompt
from lsp_server.backends.local.prompt_window import anchored_prefix
from lsp_server.config.model import LocalConfig

if TYPE_CHECKING:
    from llama_cpp import Llama

log = logging.getLogger(__name__)

# Room kept free in the context for the special tokens of a fill-in-the-middle prompt.
_SPECIAL_TOKENS_ROOM = 4

# The repository-level markers of Qwen2.5-Coder and of StarCoder2, by what they mark.
_REPO_MARKERS = {
    "repo_name": ("<|repo_name|>", "<repo_name>"),
    "file_sep": ("<|file_sep|>", "<file_sep>"),
}


class CompletionPrompts:
    """Writes completion prompts in one loaded model's tokens; used on the worker thread only
    (it remembers the last FIM prompt, which the KV cache holds)."""

    def __init__(self, llm: Llama, config: LocalConfig, context_tokens: int) -> None:
        import llama_cpp

        self._llm = llm
        self._config = config
        self._context_tokens = context_tokens
        self._bos: list[int] = llm.tokenize(b"", add_bos=True)
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        fim = (
            llama_cpp.llama_vocab_fim_pre(vocab),
            llama_cpp.llama_vocab_fim_suf(vocab),
            llama_cpp.llama_vocab_fim_mid(vocab),
        )
        self._fim_tokens = fim if min(fim) >= 0 else None
        # Per token id: (its text starts a line break, its text ends with one).
        self._line_breaks: dict[int, tuple[bool, bool]] = {}
        # The repository-level markers ("repo_name", "file_sep") as the model's own tokens.
        self._repo_tokens = _repo_level_tokens(llm)
        self._anchor: MiddleAnchor | None = None

    @property
    def fim_supported(self) -> bool:
        return self._fim_tokens is not None

    def build(self, request: CompletionRequest, max_tokens: int) -> list[int]:
        """Prompt tokens for `request`, leaving room for `max_tokens` in the context."""
        llm = self._llm
        anchor = self._anchor
        typed = anchor.typed_since(request) if anchor is not None else None
        if anchor is not None and typed is not None:
            tokens = [*anchor.tokens, *plain_tokens(llm, typed)]
            if len(tokens) + max_tokens <= llm.n_ctx():
                return tokens
        budget = llm.n_ctx() - max_tokens - _SPECIAL_TOKENS_ROOM - len(self._bos)
        chunks = context_within(request.context, self._context_tokens)
        if chunks and log.isEnabledFor(logging.DEBUG):
            log.debug("local context: %s", ", ".join(f"{c.path} ({c.tokens})" for c in chunks))
        repo_level = self._fim_tokens is not None and len(self._repo_tokens) == 2
        if repo_level:
            context = self._repo_level_context(chunks, request.workspace_path)
        else:
            blocks = path_comment_blocks(chunks, request.language, request.workspace_path)
            context = plain_tokens(llm, blocks)
        if len(context) > budget // 2:
            context = []  # a context this large would crowd out the file itself
        budget -= len(context)
        if self._config.window_tokens:
            budget = min(budget, self._config.window_tokens)
        healed_prefix = request.prefix[: len(request.prefix) - len(indent_to_heal(request))]
        # The code after the cursor has a quarter of the room at most; the code before it has
        # the rest whatever the suffix's length, so that its window stays put near the end.
        suffix_room = budget // 4 if self._fim_tokens is not None else 0
        prefix = anchored_prefix(
            healed_prefix,
            request.prefix_line,
            budget - suffix_room,
            lambda text: plain_tokens(llm, text),
        )
        if self._fim_tokens is None:
            return self._bos + context + prefix
        fim_pre, fim_suf, fim_mid = self._fim_tokens
        suffix = plain_tokens(llm, request.suffix)[:suffix_room]
        if repo_level:
            tokens = [*self._bos, *context, fim_pre, *prefix, fim_suf, *suffix, fim_mid]
        else:
            tokens = [*self._bos, fim_pre, *context, *prefix, fim_suf, *suffix, fim_mid]
        self._anchor = MiddleAnchor(healed_prefix, request.suffix, request.context, tuple(tokens))
        return tokens

    def fit(self, prompt: list[int], cached: int, affordable: int) -> list[int]:
        """`prompt` cut to about `affordable` tokens past the `cached` ones (`prompt_fit`); a
        fill-in-the-middle prompt that is cut becomes the anchor the next keystrokes extend."""
        fim = FimTokens(*self._fim_tokens) if self._fim_tokens is not None else None

        def line_break_before(index: int) -> bool:
            return self._line_break(prompt[index - 1])[1] or self._line_break(prompt[index])[0]

        fitted = fit_prompt(
            prompt,
            cached,
            affordable,
            bos=self._bos,
            fim=fim,
            line_break_before=line_break_before,
        )
        anchor = self._anchor
        if fim is not None and anchor is not None and fitted != prompt:
            base = len(anchor.tokens)
            if tuple(prompt[:base]) == anchor.tokens:  # typed since the anchor: it ends both
                typed = len(prompt) - base
                self._anchor = replace(anchor, tokens=tuple(fitted[: len(fitted) - typed]))
        return fitted

    def _line_break(self, token: int) -> tuple[bool, bool]:
        known = self._line_breaks.get(token)
        if known is None:
            text = self._llm.detokenize([token])
            known = self._line_breaks[token] = (text.startswith(b"\n"), text.endswith(b"\n"))
        return known

    def _repo_level_context(self, chunks: Sequence[ContextChunk], current_path: str) -> list[int]:
        tokens: list[int] = []
        for marker, text in repo_level_parts(chunks, current_path):
            tokens.append(self._repo_tokens[marker])
            tokens += plain_tokens(self._llm, text)
        return tokens


def _repo_level_tokens(llm: Llama) -> dict[str, int]:
    """The model's own token for each repository-level marker it has."""
    found: dict[str, int] = {}
    for marker, spellings in _REPO_MARKERS.items():
        for spelling in spellings:
            tokens = llm.tokenize(spelling.encode(), add_bos=False, special=True)
            if len(tokens) == 1:
                found[marker] = tokens[0]
                break
    return found


def plain_tokens(llm: Llama, text: str) -> list[int]:
    """`text` as tokens, a special token's spelling in it read as plain text: a file cannot
    write the model's control tokens."""
    if not text:
        return []
    tokens: list[int] = llm.tokenize(text.encode(), add_bos=False, special=False)
    return tokens
