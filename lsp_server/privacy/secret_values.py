"""Whether a value found where a secret could be is one: placeholders, prose and code are not;
randomness, letters mixed with digits and the right length are what secrets look like."""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from itertools import pairwise
from urllib.parse import unquote

_ENV_VAR_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_TEMPLATE = re.compile(
    r"\$\{|\$\(|\{\{|%\(|%[sd]\b|\{[\w.!:>\[\]]*\}|^\$[A-Za-z_]|^%\w+%$|<%|^@\w|^env\("
)
_PLACEHOLDER_WORDS = (
    "changeme",
    "change_me",
    "change-me",
    "example",
    "placeholder",
    "dummy",
    "redacted",
    "xxxx",
    "***",
    "...",
    "your",
)
_PLACEHOLDER_VALUES = frozenset(
    {
        "password",
        "passwd",
        "pass",
        "secret",
        "token",
        "none",
        "null",
        "nil",
        "undefined",
        "true",
        "false",
    }
)
_FILE_OR_URL_PREFIXES = ("/", "./", "../", "~/", "http://", "https://", "file:")
_FILE_SUFFIXES = (".json", ".pem", ".key", ".txt", ".yml", ".yaml", ".toml", ".env", ".ini")
# Unquoted right-hand sides that are code, not a value: calls, attribute chains, snake_case names.
_CODE_SHAPED = re.compile(r"[\w.]*[(\[{,;].*|[A-Za-z_]\w*(?:\.\w+)+|(?=\w*_)[A-Za-z_]\w*")
# A part of 16+ letters and digits, both: `npm_bbu6s7c1dg79lpnq...` is a token, not a name.
_TOKEN_PART = re.compile(r"(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{16,}")


def code_shaped(value: str) -> bool:
    return _CODE_SHAPED.fullmatch(value) is not None and _TOKEN_PART.search(value) is None


def is_placeholder(value: str, *, phrase: bool = False) -> bool:
    """True for values that stand in for a secret rather than being one.

    A value with spaces is prose (`"Password: "`, `"the API token"`) unless `phrase` allows a
    passphrase, under a name that says it holds one.
    """
    lowered = value.lower()
    return (
        lowered in _PLACEHOLDER_VALUES
        or any(word in lowered for word in _PLACEHOLDER_WORDS)
        or len(set(value)) <= 2
        or value[0] + value[-1] in ("<>", "[]", "()")
        or (any(ch.isspace() for ch in value) and not (phrase and _is_passphrase(value)))
        or _SECRET_NAME_VALUE.fullmatch(lowered) is not None
        or lowered.startswith(_FILE_OR_URL_PREFIXES)
        or lowered.endswith(_FILE_SUFFIXES)
        or _ENV_VAR_NAME.fullmatch(value) is not None
        or _TEMPLATE.search(value) is not None
    )


# Words of sentences, prompts and descriptions; a passphrase made of random words has none.
_PROSE_WORD = re.compile(
    r"\b(?:an?|the|of|for|to|in|on|at|by|with|from|and|or|not|no|is|are|be|was|were|this|that"
    r"|its?|your|my|our|their|enter|type|new|old|current|users?|account|here|there|please|must"
    r"|should|will|can|may|use|used|using|value|default|optional|required|see|set|get"
    r"|pass(?:word|wd|phrase)|secret|token|key|api|auth|credentials?)\b"
)
# `access_token`, `db_password`: a value that names a secret is a key of a mapping, not one.
_SECRET_NAME_VALUE = re.compile(
    r"_?[a-z][a-z0-9]*(?:[_.-][a-z0-9]+)*[_.-](?:pass\w*|pwd|secret|token|key)"
)


def _is_passphrase(value: str) -> bool:
    """`correct horse battery staple`: two or more words, none of them prose, no sentence
    punctuation at the end."""
    words = value.split()
    return (
        len(words) >= 2
        and value.rstrip()[-1] not in ".:?!…"
        and _PROSE_WORD.search(value.lower()) is None
    )


def has_letter_and_digit(value: str) -> bool:
    return any(ch.isdigit() for ch in value) and any(ch.isalpha() for ch in value)


def mixed_case(value: str) -> bool:
    return value.lower() != value and value.upper() != value


def mixed_case_with_digit(value: str) -> bool:
    return mixed_case(value) and any(ch.isdigit() for ch in value)


def _shannon_entropy(value: str) -> float:
    length = len(value)
    return -sum(n / length * math.log2(n / length) for n in Counter(value).values())


# Entropy that a random base62 string of the given length exceeds about 99.9 % of the time;
# identifiers and paths of those lengths mostly stay below it.
_ENTROPY_FLOOR_BY_LENGTH = ((20, 3.5), (32, 4.0), (40, 4.25), (64, 4.7), (100, 5.05), (160, 5.3))


def _entropy_floor(length: int) -> float:
    points = _ENTROPY_FLOOR_BY_LENGTH
    if length <= points[0][0]:
        return points[0][1]
    for (n0, e0), (n1, e1) in pairwise(points):
        if length <= n1:
            return e0 + (e1 - e0) * (length - n0) / (n1 - n0)
    return points[-1][1]


_WORD_RUN = re.compile(r"[A-Z]?[a-z]{3,}|[A-Z]{3,}")


def _word_like_share(value: str) -> float:
    """The share of characters in words (`Browser`, `STATE`, `launcher`): high for
    `BrowserStateV1` and `Rocket_Launcher_0001`."""
    return sum(len(run) for run in _WORD_RUN.findall(value)) / len(value)


_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def _has_alphabet_run(value: str, length: int = 5) -> bool:
    """True for `0123456789ABCDEF`-like tables: random strings almost never hold five
    consecutive characters of the alphabet in order."""
    lowered = value.lower()
    return any(lowered[i : i + length] in _ALPHABET for i in range(len(lowered) - length + 1))


def _decoded_base64(value: str, skip: int = 0) -> bytes | None:
    """The bytes a base64 (or base64url) value holds from character `skip` on, whole
    4-character groups only (a wrapped line may start mid-group)."""
    usable = value[skip:].rstrip("=")
    usable = usable[: len(usable) // 4 * 4]
    if len(usable) < 8:
        return None
    try:
        return base64.b64decode(usable.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None


def _printable(data: bytes) -> bool:
    return all(32 <= byte < 127 or byte in (9, 10, 13) for byte in data)


def _encodes_text(value: str) -> bool:
    """True when a base64-looking value decodes to printable text: encoded words, not a key.
    Fifteen random bytes are all printable about once in three million."""
    for skip in range(4):
        decoded = _decoded_base64(value, skip)
        if decoded is not None and _printable(decoded):
            return True
    return False


_INTEGRITY_PREFIXES = ("sha1-", "sha256-", "sha384-", "sha512-")  # lock files: hashes, not keys


def looks_random(value: str) -> bool:
    return (
        mixed_case_with_digit(value)
        and not value.startswith(_INTEGRITY_PREFIXES)
        and _shannon_entropy(value) >= _entropy_floor(len(value))
        # Random base62 strings of 20+ characters stay below this about 97-99 % of the time.
        and _word_like_share(value) <= 0.65
        and not _has_alphabet_run(value)
        and not _encodes_text(value)
        and not _snake_case_identifier(value)
    )


def _snake_case_identifier(value: str) -> bool:
    """`N10pem_ctx_st4DOLLAR_17E`: two or more underscores and no other symbol make a name.
    About 3 % of random base64url strings of that length look like this too."""
    return value.count("_") >= 2 and value.replace("_", "").isalnum()


def basic_credentials(value: str) -> bool:
    """`user:password` in base64, as in `Authorization: Basic ...` and Docker's `auth`."""
    decoded = _decoded_base64(value + "=" * (-len(value) % 4))
    if decoded is None:
        return False
    try:
        text = decoded.decode("utf-8")
    except UnicodeDecodeError:
        return False
    user, colon, password = text.partition(":")
    return bool(colon and user and password) and text.isprintable() and not is_placeholder(password)


def non_trivial(value: str) -> bool:
    return len(value) >= 4 and not is_placeholder(value)


def random_enough(value: str) -> bool:
    """A bare value under a generic key name: long, letters and digits, not a word or code."""
    return (
        len(value) >= 12
        and has_letter_and_digit(value)
        and not is_placeholder(value)
        and not code_shaped(value)
        and _word_like_share(value) <= 0.65
    )


def url_credentials(user_and_password: str) -> bool:
    user, _, password = user_and_password.partition(":")
    return password != user and not is_placeholder(unquote(password))


def bearer_token(value: str) -> bool:
    return has_letter_and_digit(value) and not is_placeholder(value)
