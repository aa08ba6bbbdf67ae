"""Privacy rules: which requests must stay on the machine (routing rule 1).

A request is local-only when its document matches one of `routing.sensitive_globs`, or when
`routing.redact_secrets` is on and its prompt contains a secret (see `secret_rules`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from wcmatch import glob

from lsp_server.secret_rules import SecretFinding, contains_secret, find_secrets, first_secret

__all__ = [
    "PrivacyVerdict",
    "SecretFinding",
    "SensitivityPolicy",
    "classify",
    "contains_secret",
    "find_secrets",
    "normalize_path",
]

# Paths are normalised to forward slashes first, so patterns are matched the POSIX way on every
# platform; `**` spans directories and `*` matches dot files, as users of .gitignore expect.
_GLOB_FLAGS = glob.GLOBSTAR | glob.DOTGLOB | glob.BRACE | glob.EXTGLOB | glob.FORCEUNIX

# A URI scheme has two or more characters; `C:` is a drive letter.
_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")
_DRIVE_AFTER_SLASH = re.compile(r"/[A-Za-z]:(?:/|$)")


def normalize_path(path_or_uri: str) -> str | None:
    """The file path a document URI or path names, with forward slashes.

    None for `untitled:` documents, which have no path. For other schemes that carry a path
    (`vscode-remote:`, `git:`), the path part is used: the file behind them is the same file.
    """
    if _URI_SCHEME.match(path_or_uri) is None:
        return path_or_uri.replace("\\", "/")
    uri = urlsplit(path_or_uri)
    if uri.scheme.lower() == "untitled":
        return None
    path = unquote(uri.path)
    if uri.scheme.lower() == "file" and uri.netloc and uri.netloc != "localhost":
        path = f"//{uri.netloc}{path}"  # a UNC share: file://server/share/x
    if _DRIVE_AFTER_SLASH.match(path):
        path = path[1:]  # file:///C:/x names C:/x
    return path.replace("\\", "/")


class SensitivityPolicy:
    """Which documents are sensitive by their path, per `routing.sensitive_globs`.

    Patterns are compiled once; matching one path against the default five takes microseconds.
    An invalid pattern raises ValueError here, so configuration loading can report it.
    """

    def __init__(self, globs: Sequence[str]) -> None:
        self._matchers = tuple(
            (pattern, glob.compile(pattern, flags=_GLOB_FLAGS)) for pattern in globs
        )

    def matching_glob(self, path_or_uri: str) -> str | None:
        """The first pattern that matches the document, or None."""
        path = normalize_path(path_or_uri)
        if not path:
            return None
        for pattern, matcher in self._matchers:
            if matcher.match(path):
                return pattern
        return None

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
    policy: SensitivityPolicy, path_or_uri: str, prompt_text: str, *, redact_secrets: bool
) -> PrivacyVerdict:
    """The privacy verdict for a request about `path_or_uri` whose prompt is `prompt_text`."""
    matched_glob = policy.matching_glob(path_or_uri)
    if matched_glob is not None:
        return PrivacyVerdict(local_only=True, reason="sensitive-path", detail=matched_glob)
    if redact_secrets:
        secret = first_secret(prompt_text)
        if secret is not None:
            return PrivacyVerdict(local_only=True, reason="secret-in-prompt", detail=secret.kind)
    return _SHAREABLE
