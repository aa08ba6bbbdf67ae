"""Language ids (as LSP clients name them): by file suffix for callers that have only a path,
and guessed from the text for callers that have not even that."""

import re

LANGUAGE_BY_SUFFIX = {
    ".py": "python",
    ".js": "javascript",
    ".ts": "typescript",
    ".tsx": "typescriptreact",
    ".rs": "rust",
    ".go": "go",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".java": "java",
    ".rb": "ruby",
    ".sh": "shellscript",
    ".md": "markdown",
}

# Telltale lines of a language, for callers that have only the text (a gateway client that sent
# no path). Each pattern is anchored at a line start; the language with most hits wins.
_TELLTALES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "python",
        re.compile(
            r"^\s*(?:def \w+\(.*\).*:|class \w+.*:|from [\w.]+ import |import \w+$|"
            r"(?:el)?if .*:$|for .* in .*:$|return\b.*[^;{]$|@\w+)",
            re.MULTILINE,
        ),
    ),
    (
        "rust",
        re.compile(
            r"^\s*(?:(?:pub(?:\(\w+\))? )?(?:fn|struct|enum|impl|trait|mod) "
            r"|use \w+::|let (?:mut )?\w+)",
            re.MULTILINE,
        ),
    ),
    ("go", re.compile(r"^\s*(?:func |package \w+|import \(|\w+ := )", re.MULTILINE)),
    (
        "typescript",
        re.compile(
            r"^\s*(?:export |import .* from |interface \w+|type \w+ =|const \w+: "
            r"|function \w+\(.*\): )",
            re.MULTILINE,
        ),
    ),
    (
        "javascript",
        re.compile(r"^\s*(?:function \w+\(|const \w+ = |let \w+ = |module\.exports)", re.MULTILINE),
    ),
    ("c", re.compile(r"^\s*(?:#include [<\"]|#define |int main\()", re.MULTILINE)),
    (
        "java",
        re.compile(
            r"^\s*(?:public |private |protected )(?:static )?(?:class |\w+ \w+\()", re.MULTILINE
        ),
    ),
    ("ruby", re.compile(r"^\s*(?:def \w+[^:]*$|end$|require ['\"])", re.MULTILINE)),
)


def infer_language(prefix: str, suffix: str = "") -> str:
    """The language the text around a cursor is most likely written in; "" when unsure.

    Used where no file name says it, so block-end and bracket rules still apply.
    """
    text = prefix[-4000:] + suffix[:4000]
    best, best_hits = "", 0
    for language, telltale in _TELLTALES:
        hits = len(telltale.findall(text))
        if hits > best_hits:
            best, best_hits = language, hits
    return best
