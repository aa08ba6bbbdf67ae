"""Context beyond the file, written in the form each family of model reads.

- Path-comment blocks before the prefix, for FIM APIs that take only a prompt and a suffix
  (OpenAI-compatible, Mercury, Codestral, DeepSeek) and for a model without FIM tokens: each
  chunk is a comment naming its file, in the current language's comment syntax, then its lines;
  a last comment names the current file, whose prefix follows.
- The repository-level format of Qwen2.5-Coder and StarCoder2 (`repo_level_parts`): a repository
  name, then each file after a file separator, the current file last; the FIM prompt follows.
- A section of the user message for chat endpoints (`chat_context_section`).

Chunks come in prompt order (`context_within`): the most stable first, so the part of the prompt
that is the same from one keystroke to the next is as long as it can be.
"""

from __future__ import annotations

from collections.abc import Sequence

from lsp_server.backends.base import ContextChunk

# Line comments by LSP language id; languages without one get a block comment.
_LINE_COMMENT = {
    **dict.fromkeys(
        (
            "python",
            "ruby",
            "shellscript",
            "perl",
            "r",
            "yaml",
            "toml",
            "makefile",
            "dockerfile",
            "elixir",
            "julia",
            "nim",
            "powershell",
        ),
        "#",
    ),
    **dict.fromkeys(("lua", "sql", "haskell", "elm", "ada"), "--"),
    **dict.fromkeys(("clojure", "lisp", "scheme", "racket"), ";;"),
    **dict.fromkeys(("erlang", "latex", "tex", "matlab"), "%"),
    **dict.fromkeys(("vim",), '"'),
}
_BLOCK_COMMENT = {
    **dict.fromkeys(("html", "xml", "markdown", "vue", "svelte"), ("<!--", " -->")),
    "css": ("/*", " */"),
}
# Most languages an editor names (C, Java, JavaScript, Rust, Go, Kotlin, Swift, …) take `//`.
_DEFAULT_LINE_COMMENT = "//"

REPO_NAME = "workspace"


def path_comment(language: str, path: str) -> str:
    """One line naming a file, as a comment in `language`."""
    if language in _BLOCK_COMMENT:
        opening, closing = _BLOCK_COMMENT[language]
        return f"{opening} path: {path}{closing}\n"
    return f"{_LINE_COMMENT.get(language, _DEFAULT_LINE_COMMENT)} path: {path}\n"


def path_comment_blocks(chunks: Sequence[ContextChunk], language: str, current_path: str) -> str:
    """The text that goes before the prefix: each chunk under a comment naming its file, then
    a comment naming the current file. Empty without chunks."""
    if not chunks:
        return ""
    blocks = [path_comment(language, chunk.path) + _ended(chunk.text) + "\n" for chunk in chunks]
    return "".join(blocks) + path_comment(language, current_path or "current file")


def repo_level_parts(chunks: Sequence[ContextChunk], current_path: str) -> list[tuple[str, str]]:
    """The repository-level prompt before the FIM prefix, as (marker, text) pairs: a marker is
    "repo_name" or "file_sep" (written as the model's own special token), the text is plain and
    follows it. Empty without chunks."""
    if not chunks:
        return []
    parts = [("repo_name", REPO_NAME + "\n")]
    parts += [("file_sep", f"{chunk.path}\n{_ended(chunk.text)}") for chunk in chunks]
    parts.append(("file_sep", f"{current_path or 'current file'}\n"))
    return parts


def chat_context_section(chunks: Sequence[ContextChunk]) -> str:
    """The user message's section of other code, ending in a blank line; empty without chunks."""
    if not chunks:
        return ""
    files = "".join(f"{chunk.path}:\n```\n{_ended(chunk.text)}```\n\n" for chunk in chunks)
    return "Other code of the repository, for reference (do not repeat it):\n\n" + files


def _ended(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"
