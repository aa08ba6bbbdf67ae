"""Privacy rules: which requests must stay on the machine (routing rule 1).

A request is local-only when its document matches one of `routing.sensitive_globs`, or when
`routing.redact_secrets` is on and its prompt contains a secret (see `secret_rules`).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from wcmatch import glob

from lsp_server.privacy.secret_memo import MULTI_LINE_MARKER, SecretMemo
from lsp_server.privacy.secret_rules import (
    SecretFinding,
    contains_secret,
    find_secrets,
    first_secret,
)

__all__ = [
    "MULTI_LINE_MARKER",
    "PrivacyVerdict",
    "SecretFinding",
    "SecretMemo",
    "SensitivityPolicy",
    "classify",
    "contains_secret",
    "file_system_paths",
    "find_secrets",
    "normalize_path",
]

# Paths are normalised to forward slashes first, so patterns are matched the POSIX way on every
# platform; `**` spans directories and `*` matches dot files, as users of .gitignore expect.
# Case is ignored: macOS and Windows file systems do, so `.ENV` is the `.env` file there, and on
# a case-sensitive system matching more only keeps more on the machine.
_GLOB_FLAGS = (
    glob.GLOBSTAR | glob.DOTGLOB | glob.BRACE | glob.EXTGLOB | glob.FORCEUNIX | glob.IGNORECASE
)

# A URI scheme has two or more characters; `C:` is a drive letter.
_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")
_DRIVE_AFTER_SLASH = re.compile(r"/[A-Za-z]:(?:/|$)")
_LEADING_PARENTS = re.compile(r"^(?:\.\./)+")
# Documents whose match is remembered; more, and the memory starts again.
_REMEMBERED_PATHS = 1024


def normalize_path(path_or_uri: str) -> str | None:
    """The file path a document URI or path names, with forward slashes and without dot
    segments (`sub/../.env` is `.env`).

    None for `untitled:` documents, which have no path. For other schemes that carry a path
    (`vscode-remote:`, `git:`), the path part is used: the file behind them is the same file.
    """
    if _URI_SCHEME.match(path_or_uri) is None:
        return _without_dot_segments(path_or_uri.replace("\\", "/"))
    uri = urlsplit(path_or_uri)
    if uri.scheme.lower() == "untitled":
        return None
    path = unquote(uri.path)
    if uri.scheme.lower() == "file" and uri.netloc and uri.netloc != "localhost":
        path = f"//{uri.netloc}{path}"  # a UNC share: file://server/share/x
    if _DRIVE_AFTER_SLASH.match(path):
        path = path[1:]  # file:///C:/x names C:/x
    return _without_dot_segments(path.replace("\\", "/"))


def _without_dot_segments(path: str) -> str:
    if not path or ("/." not in path and not path.startswith(".") and "//" not in path[1:]):
        return path
    return posixpath.normpath(path)


def _local_file(path_or_uri: str, path: str) -> bool:
    """True for a path on this machine's own file system, where links can be followed."""
    scheme = _URI_SCHEME.match(path_or_uri)
    if scheme is not None and scheme.group(0).lower() != "file:":
        return False
    return not path.startswith("//") and os.path.isabs(path)


def _windows_aliases(path: str) -> str | None:
    """Windows ignores trailing dots and spaces in names and reads `name::$DATA` as `name`."""
    drive, rest = (path[:2], path[2:]) if re.match(r"[A-Za-z]:", path) else ("", path)
    if not any(ch in rest for ch in ".: "):
        return None
    segments = [segment.split(":", 1)[0].rstrip(". ") or segment for segment in rest.split("/")]
    alias = drive + "/".join(segments)
    return alias if alias != path else None


def file_system_paths(path_or_uri: str) -> tuple[str, ...]:
    """Every path by which the file system knows a document: its own (canonical), the file a
    symbolic link leads to, and the name Windows would read it as."""
    path = normalize_path(path_or_uri)
    if not path:
        return ()
    paths = [path]
    if path.startswith("../"):
        paths.append(_LEADING_PARENTS.sub("", path))  # the name is what the globs judge
    alias = _windows_aliases(path)
    if alias is not None:
        paths.append(alias)
    if _local_file(path_or_uri, path):
        try:
            target = os.path.realpath(path).replace("\\", "/")
        except (OSError, ValueError):
            target = path
        if target not in paths:
            paths.append(target)
    return tuple(paths)


class SensitivityPolicy:
    """Which documents are sensitive by their path, per `routing.sensitive_globs`.

    Patterns are compiled once. Matching a document's paths against the default patterns takes
    tens of microseconds, and every keystroke asks about the same document again, so the answer
    for each set of paths is remembered (its paths are looked up again every time: a link may
    change where it leads). An invalid pattern raises ValueError here, so configuration loading
    can report it.
    """

    def __init__(self, globs: Sequence[str]) -> None:
        self._matchers = tuple(
            (pattern, glob.compile(pattern, flags=_GLOB_FLAGS)) for pattern in globs
        )
        self._matches: dict[tuple[str, ...], str | None] = {}

    def matching_glob(self, path_or_uri: str) -> str | None:
        """The first pattern that matches the document by any of its file-system paths."""
        paths = file_system_paths(path_or_uri)
        try:  # the context store's worker asks too: one lookup, never a test then a read
            return self._matches[paths]
        except KeyError:
            pass
        matched = next(
            (
                pattern
                for pattern, matcher in self._matchers
                if any(matcher.match(path) for path in paths)
            ),
            None,
        )
        if len(self._matches) >= _REMEMBERED_PATHS:
            self._matches.clear()
        self._matches[paths] = matched
        return matched

    def is_sensitive_path(self, path_or_uri: str) -> bool:
        return self.matching_glob(path_or_uri) is not None


PrivacyReason = Literal["sensitive-path", "secret-in-prompt"]


@dataclass(frozen=True, slots=True)
class PrivacyVerdict:
    """Whether a request must stay local, and why.

    `detail` names the matching glob or the kind of secret; it never contains the secret.
    """

    local_only: bool
    reason: PrivacyReason | None = None
    detail: str | None = None


_SHAREABLE = PrivacyVerdict(local_only=False)


def classify(
    policy: SensitivityPolicy,
    path_or_uri: str,
    prefix: str,
    suffix: str = "",
    *,
    redact_secrets: bool,
    memo: SecretMemo | None = None,
) -> PrivacyVerdict:
    """The privacy verdict for a request about `path_or_uri` whose prompt is `prefix` and
    `suffix` around the cursor (or the whole prompt as `prefix`)."""
    matched_glob = policy.matching_glob(path_or_uri)
    if matched_glob is not None:
        return PrivacyVerdict(local_only=True, reason="sensitive-path", detail=matched_glob)
    if redact_secrets:
        if memo is not None:
            kind = memo.first_secret_kind(prefix, suffix)
        else:
            text = prefix + suffix  # often empty: a conversation's stop strings
            finding = first_secret(text) if text else None
            kind = finding.kind if finding is not None else None
        if kind is not None:
            return PrivacyVerdict(local_only=True, reason="secret-in-prompt", detail=kind)
    return _SHAREABLE
