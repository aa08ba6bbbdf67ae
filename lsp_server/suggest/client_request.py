"""A completion a client wrote itself (the gateway's `/v1/completions`), shaped as a keystroke is.

The client sends the text before and after the cursor; the service decides the rest as it does
for an editor's keystroke: the language (the file's suffix when the client names a file, else a
guess from the text), whether the context is mid-line (then one line is asked for), the stop
strings when the client sent none, and the token cap (the client's, up to a bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath

from lsp_server.backends.base import CompletionRequest
from lsp_server.suggest.languages import LANGUAGE_BY_SUFFIX, infer_language
from lsp_server.suggest.prompt import is_mid_line, stop_sequences

DEFAULT_INLINE_MAX_TOKENS = 64
MAX_INLINE_TOKENS = 512


def client_completion(
    *,
    prefix: str,
    suffix: str,
    has_suffix: bool,
    max_tokens: int | None,
    stop: Sequence[str] | None,
    temperature: float | None,
    path: str | None,
) -> CompletionRequest:
    """The request for a client's completion; `path` names its file when the client said."""
    single_line = is_mid_line(suffix)
    crlf = "\r\n" in prefix or "\r\n" in suffix
    language = infer_language(prefix, suffix)
    if path is not None:
        language = LANGUAGE_BY_SUFFIX.get(PurePosixPath(path).suffix, "") or language
    return CompletionRequest(
        prefix=prefix,
        suffix=suffix,
        language=language,
        path=path or "",
        max_tokens=min(max_tokens or DEFAULT_INLINE_MAX_TOKENS, MAX_INLINE_TOKENS),
        stop=tuple(stop) if stop else stop_sequences(single_line=single_line, crlf=crlf),
        single_line=single_line,
        temperature=temperature or 0.0,
        has_suffix=has_suffix,
        client_max_tokens=max_tokens is not None,
    )
