"""Secret detection in prompt text: a compact set of compiled rules.

We use our own rules rather than `detect-secrets`: that library scans line by line through
plugins and took about 170 ms on 16 KB of ordinary Python, while this scan runs on every
keystroke and must stay well under a millisecond. Every pattern starts with a literal, so the
regex engine skips ahead instead of trying each position; key names are searched in a
lower-cased copy of the text for the same reason.

Trade-offs, chosen to keep false positives on ordinary code low:
- Vendor token formats (AWS, GitHub, OpenAI, Anthropic, Google, Slack, Stripe, ...) and private
  keys are flagged wherever they appear, documented example values included.
- Assignments to secret-named keys (`password`, `api_key`, `client_secret`, `GITHUB_TOKEN`, ...)
  are flagged when the value is a string literal of 6+ characters that is not a placeholder
  (`changeme`, `xxx`, `${VAR}`, `<your-key>`, a path or URL, a phrase with spaces, an
  ENV_VAR_NAME). Comparisons (`token == "integer"`) are not assignments. Unquoted values (`.env`,
  YAML, INI) count only on a line of their own, 8+ characters mixing letters and digits and not
  shaped like code (`ctypes.c_int32`, `next_token2`), so `token: str` and
  `password = input(...)` stay quiet at the price of missing an all-letters password there.
- Other quoted strings of 20+ characters count as secrets when they mix upper case, lower case
  and digits and their Shannon entropy is that of a random string of their length. Hex (hashes,
  git SHAs, UUIDs, colours) never mixes case, so a hex-only secret is found only in an
  assignment to a secret-named key. Strings made of words (`BrowserStateV1`) and lock-file
  integrity hashes (`sha512-...`) are skipped too; base64 of plain text and random test fixtures
  can be flagged, and about 1 % of random 20-32 character secrets is missed.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from urllib.parse import unquote


@dataclass(frozen=True, slots=True)
class SecretFinding:
    """A secret in scanned text: its kind and where it is (`text[start:end]`)."""

    kind: str
    start: int
    end: int


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


@dataclass(frozen=True, slots=True)
class _Rule:
    """A secret format: a pattern whose group `secret` (or whole match) is the secret."""

    kind: str
    pattern: re.Pattern[str]
    # Judges the matched secret text; None accepts every match.
    accept: Callable[[str], bool] | None = None
    # The pattern is written in lower case and runs on the lower-cased text.
    lowercase: bool = False
    # The match must not continue a word: `xAKIA...` is not an AWS key id.
    word_start: bool = True
    # Only white space may come before the match on its line.
    own_line: bool = False

    def findings(self, text: str, lowered: str) -> Iterator[SecretFinding]:
        group = "secret" if "secret" in self.pattern.groupindex else 0
        for match in self.pattern.finditer(lowered if self.lowercase else text):
            if self.word_start and match.start() > 0 and _is_word_char(text[match.start() - 1]):
                continue
            if self.own_line and not _only_blanks_before(text, match.start()):
                continue
            start, end = match.span(group)
            if self.accept is None or self.accept(text[start:end]):
                yield SecretFinding(self.kind, start, end)


def _only_blanks_before(text: str, position: int) -> bool:
    line_start = text.rfind("\n", 0, position) + 1
    return not text[line_start:position].strip()


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


def _code_shaped(value: str) -> bool:
    return _CODE_SHAPED.fullmatch(value) is not None and _TOKEN_PART.search(value) is None


def _is_placeholder(value: str, *, phrase: bool = False) -> bool:
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


def _has_letter_and_digit(value: str) -> bool:
    return any(ch.isdigit() for ch in value) and any(ch.isalpha() for ch in value)


def _mixed_case(value: str) -> bool:
    return value.lower() != value and value.upper() != value


def _mixed_case_with_digit(value: str) -> bool:
    return _mixed_case(value) and any(ch.isdigit() for ch in value)


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


def _looks_random(value: str) -> bool:
    return (
        _mixed_case_with_digit(value)
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


def _basic_credentials(value: str) -> bool:
    """`user:password` in base64, as in `Authorization: Basic ...` and Docker's `auth`."""
    decoded = _decoded_base64(value + "=" * (-len(value) % 4))
    if decoded is None:
        return False
    try:
        text = decoded.decode("utf-8")
    except UnicodeDecodeError:
        return False
    user, colon, password = text.partition(":")
    return (
        bool(colon and user and password) and text.isprintable() and not _is_placeholder(password)
    )


def _non_trivial(value: str) -> bool:
    return len(value) >= 4 and not _is_placeholder(value)


def _random_enough(value: str) -> bool:
    """A bare value under a generic key name: long, letters and digits, not a word or code."""
    return (
        len(value) >= 12
        and _has_letter_and_digit(value)
        and not _is_placeholder(value)
        and not _code_shaped(value)
        and _word_like_share(value) <= 0.65
    )


def _url_credentials(user_and_password: str) -> bool:
    user, _, password = user_and_password.partition(":")
    return password != user and not _is_placeholder(unquote(password))


def _bearer_token(value: str) -> bool:
    return _has_letter_and_digit(value) and not _is_placeholder(value)


_PRIVATE_KEY_HEADER = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_PRIVATE_KEY_FOOTER = r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
# Line breaks inside a key may be real or escaped (`\n` in JSON and string literals).
_BREAK = r"(?:\s|\\[nr])*"

_TOKEN_RULES: tuple[_Rule, ...] = (
    _Rule(
        "gcp-service-account",
        re.compile(r'"private_key"\s*:\s*"(?P<secret>' + _PRIVATE_KEY_HEADER + r'[^"]*)'),
    ),
    _Rule(
        "gcp-service-account",
        re.compile(r'"private_key_id"\s*:\s*"(?P<secret>[0-9a-f]{40})"'),
    ),
    _Rule(
        "private-key",
        re.compile(
            _PRIVATE_KEY_HEADER
            + _BREAK
            # PGP armour headers (`Version: ...`) may precede the body.
            + r"(?:[A-Za-z][\w-]*: [^\n\\]*"
            + _BREAK
            + r")*"
            + r"[A-Za-z0-9+/=]{40}[\s\S]*?(?:"
            + _PRIVATE_KEY_FOOTER
            + r"|\Z)"
        ),
        word_start=False,
    ),
    _Rule("aws-access-key", re.compile(r"A(?:KIA|SIA|BIA|CCA)[A-Z2-7]{16}\b")),
    _Rule(
        "github-token",
        re.compile(r"g(?:h[pousr]_[A-Za-z0-9]{36,251}|ithub_pat_[A-Za-z0-9_]{22,255})\b"),
    ),
    _Rule("anthropic-key", re.compile(r"sk-ant-[A-Za-z0-9_-]{20,}")),
    _Rule(
        "openai-key",
        re.compile(r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
        _mixed_case_with_digit,
    ),
    _Rule("google-api-key", re.compile(r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])")),
    _Rule("slack-token", re.compile(r"x(?:ox[abposr]|app)-[0-9A-Za-z-]{10,}")),
    _Rule(
        "slack-webhook",
        re.compile(r"https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]{20,}"),
    ),
    _Rule("stripe-key", re.compile(r"sk_(?:live|test)_[0-9A-Za-z]{20,}")),
    _Rule("stripe-key", re.compile(r"rk_(?:live|test)_[0-9A-Za-z]{20,}")),
    _Rule("stripe-key", re.compile(r"whsec_[0-9A-Za-z+/=]{24,}")),
    _Rule("gitlab-token", re.compile(r"gl(?:pat|ptt|dt|rt|soat|ft)-[A-Za-z0-9_-]{20,}")),
    _Rule("digitalocean-token", re.compile(r"do[opr]_v1_[a-f0-9]{64}\b")),
    _Rule("shopify-token", re.compile(r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b")),
    _Rule("databricks-token", re.compile(r"dapi[a-f0-9]{32}(?:-\d+)?\b")),
    _Rule("grafana-token", re.compile(r"gl(?:sa|c)_[A-Za-z0-9+/_=]{32,}")),
    _Rule("vault-token", re.compile(r"hv[sbr]\.[A-Za-z0-9_-]{24,}")),
    _Rule("google-oauth-token", re.compile(r"ya29\.[0-9A-Za-z_-]{20,}")),
    _Rule("google-oauth-secret", re.compile(r"GOCSPX-[A-Za-z0-9_-]{28}")),
    _Rule("llm-api-key", re.compile(r"sk-(?:or-v1-[a-f0-9]{64}|[a-f0-9]{32})\b")),
    _Rule("llm-api-key", re.compile(r"gsk_[A-Za-z0-9]{48,}\b")),
    _Rule("llm-api-key", re.compile(r"xai-[A-Za-z0-9]{60,}\b")),
    _Rule("llm-api-key", re.compile(r"pplx-[A-Za-z0-9]{40,}\b")),
    _Rule("replicate-token", re.compile(r"r8_[A-Za-z0-9]{37}\b"), _mixed_case_with_digit),
    _Rule("linear-key", re.compile(r"lin_(?:api|oauth)_[A-Za-z0-9]{40}\b")),
    _Rule("postman-key", re.compile(r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}\b")),
    _Rule("pulumi-token", re.compile(r"pul-[a-f0-9]{40}\b")),
    _Rule("newrelic-key", re.compile(r"NRA[AIK]-[A-Z0-9]{27}\b")),
    _Rule("sentry-token", re.compile(r"sntry[su]_[A-Za-z0-9_=+/]{40,}")),
    _Rule("doppler-token", re.compile(r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}")),
    _Rule("supabase-token", re.compile(r"sbp_[a-f0-9]{40}\b")),
    _Rule("planetscale-token", re.compile(r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,}")),
    _Rule("square-token", re.compile(r"sq0(?:atp|csp)-[0-9A-Za-z_-]{22,}")),
    _Rule("twilio-key", re.compile(r"SK[0-9a-f]{32}\b")),
    _Rule("mailgun-key", re.compile(r"key-[0-9a-f]{32}\b")),
    _Rule("mapbox-token", re.compile(r"sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}")),
    _Rule("atlassian-token", re.compile(r"ATATT3[A-Za-z0-9_=-]{100,}")),
    _Rule("heroku-key", re.compile(r"HRKU-[A-Za-z0-9_-]{60,}")),
    _Rule("age-secret-key", re.compile(r"AGE-SECRET-KEY-1[0-9A-Z]{58}")),
    _Rule("npm-token", re.compile(r"npm_[A-Za-z0-9]{36}\b"), _mixed_case_with_digit),
    _Rule("pypi-token", re.compile(r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}")),
    _Rule("huggingface-token", re.compile(r"hf_[A-Za-z]{34,}\b"), _mixed_case),
    _Rule("sendgrid-key", re.compile(r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b")),
    _Rule("jwt", re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")),
    _Rule(
        "aws-secret-key",
        re.compile(
            r"secret[_.-]?(?:access[_.-]?)?key[\"'\]]?[ \t]*(?::=|=>|=|:)[ \t]*[\"'`]?"
            r"(?P<secret>[a-z0-9/+]{40})(?![a-z0-9/+=])"
        ),
        _has_letter_and_digit,
        lowercase=True,
        word_start=False,
    ),
    _Rule(
        "url-credentials",
        re.compile(r"://(?P<secret>[^\s:/@\"'`]{1,64}:[^\s:/@\"'`]{3,128})@"),
        _url_credentials,
        word_start=False,
    ),
    _Rule(
        "bearer-token",
        re.compile(r"bearer[ \t]+(?P<secret>[a-z0-9._~+/-]{20,}=*)"),
        _bearer_token,
        lowercase=True,
    ),
    _Rule(
        "basic-auth",
        re.compile(r"basic[ \t]+(?P<secret>[a-z0-9+/]{8,}={0,2})(?![a-z0-9+/=])"),
        _basic_credentials,
        lowercase=True,
    ),
    _Rule(  # Docker's config.json
        "basic-auth",
        re.compile(r"\"auth\"[ \t]*:[ \t]*\"(?P<secret>[A-Za-z0-9+/]{8,}={0,2})\""),
        _basic_credentials,
        word_start=False,
    ),
    *(
        _Rule(  # Azure storage and service bus connection strings
            "connection-string",
            re.compile(name + r"key[ \t]*=[ \t]*(?P<secret>[a-z0-9+/]{20,}={0,2})"),
            lowercase=True,
        )
        for name in ("account", "sharedaccess")
    ),
    *(
        _Rule(  # ADO.NET, ODBC, JDBC: `...;Password=...;`, `?password=...&`, `"Pwd=...;`
            "connection-string",
            re.compile(
                name + rf"(?<=[;?&\"']{name})[ \t]*=[ \t]*(?P<secret>[^;&\s\"'`]{{4,}})"
                r"(?=[;&\s\"'`]|$)",
                re.MULTILINE,
            ),
            _non_trivial,
            lowercase=True,
            word_start=False,
        )
        for name in ("password", "pwd")
    ),
    _Rule(  # Oracle's JDBC thin driver: jdbc:oracle:thin:user/password@host
        "connection-string",
        re.compile(r":thin:[\w$#]{1,64}/(?P<secret>[^@\s\"'`]{3,128})@"),
        _non_trivial,
        word_start=False,
    ),
    _Rule(  # .npmrc: `//registry.example.com/:_authToken=...`
        "npm-token",
        re.compile(r":_(?:auth(?:token)?|password)[ \t]*=[ \t]*[\"']?(?P<secret>[^\s\"'`]{8,})"),
        _non_trivial,
        lowercase=True,
        word_start=False,
    ),
    _Rule(  # .npmrc: `_auth=...` on a line of its own
        "npm-token",
        re.compile(r"_(?:auth(?:token)?|password)[ \t]*=[ \t]*[\"']?(?P<secret>[^\s\"'`]{8,})"),
        _non_trivial,
        lowercase=True,
        word_start=False,
        own_line=True,
    ),
    _Rule(  # .netrc: `machine host login me password pw`, on one line or several
        "netrc-password",
        re.compile(
            r"machine\b[^\n]{0,200}?(?:\n[ \t]*(?:login|account|port)\b[^\n]{0,200})*?"
            r"\s+password[ \t]+(?P<secret>[^\s]{3,})"
        ),
        _non_trivial,
        lowercase=True,
    ),
    _Rule(  # kubeconfig
        "kubeconfig-credentials",
        re.compile(r"client-key-data[ \t]*:[ \t]*[\"']?(?P<secret>[a-z0-9+/]{20,}={0,2})"),
        lowercase=True,
    ),
    _Rule(  # kubeadm bootstrap tokens in a kubeconfig's `token:`
        "kubeconfig-credentials",
        re.compile(r"token[\"']?[ \t]*:[ \t]*[\"']?(?P<secret>[a-z0-9]{6}\.[a-z0-9]{16})\b"),
        lowercase=True,
        word_start=False,
    ),
)

# Key names that end in one of these words hold secrets: DB_PASSWORD, apiKey, client_secret,
# Rails' secret_key_base. One pattern per word, each starting with a literal; `key` only after
# a qualifier (`api_key`).
_KEY_QUALIFIERS = ("api", "access", "private", "secret", "auth", "signing", "encryption", "client")
_PASSWORD_NAMES = (
    r"pass(?:word|wd|phrase)",
    r"pass(?<![a-z0-9]pass)",  # DB_PASS, SMTP_PASS; not bypass
    r"pwd",
)
_SECRET_KEY_NAMES = (
    r"secret",
    r"token",
    r"key(?:" + "|".join(f"(?<={q}key)|(?<={q}[_.-]key)" for q in _KEY_QUALIFIERS) + r")",
)
# Names that hold a credential as often as a mode or a module path (`auth = "basic"`).
_WEAK_KEY_NAMES = (r"auth", r"credentials?")
# The key, its closing quote or bracket, an optional annotation (`api_key: str = ...`), the
# operator (none after a command-line flag), then a string literal (`secret`) or a bare value,
# with the rest of its line looked at but not consumed.
_ASSIGNMENT_TAIL = (
    r"(?:_base)?(?![a-z0-9_])(?P<close>\\?[\"'\]])?"
    r"(?:[ \t]*:[ \t]*[\w.\[\]|, ]{1,40}?(?=[ \t]*=)|[ \t]+[\w.\[\]*]{1,40}(?=[ \t]*=[^=]))?"
    r"(?P<pre>[ \t]*)(?:(?P<op>:{1,3}=|[.+?]=|=>|<-|=(?!=)|:|,|>)(?P<post>[ \t]*))?"
    r"(?P<block>[|>][-+]?[ \t]*\r?\n[ \t]+|\r?\n[ \t]*)?"
    r"(?:[rbuf]{0,2}\\?(?P<quote>[\"'`])(?P<secret>[^\"'`\n]{6,200}?)\\?(?P=quote)"
    r"|(?P<bare>[^\s\"'`<]+)(?=(?P<rest>[^\n]*)))"
)
# Operators after which an unquoted value runs to the end of its line (Makefiles' among them).
_LINE_VALUE_OPERATORS = frozenset({"=", ":", ":=", "::=", ":::=", "?="})
# What may come before a key on its line: indentation, a YAML list dash, an opening quote
# (`- "DB_PASSWORD=..."`), a shell or Dockerfile keyword, other `NAME=value ` prefixes.
_LINE_KEY_PREFIX = re.compile(
    r"[ \t]*(?:-[ \t]+)?[\"']?(?:(?:export|env|set|sudo|ENV|ARG|RUN)[ \t]+)*"
    r"(?:[A-Za-z_]\w*=[^\s\"'`]*[ \t]+)*[\w.-]*"
)
_UNQUOTED_PHRASE = re.compile(r"[A-Za-z0-9]+(?:[ \t]+[A-Za-z0-9]+){2,}")
_NOT_A_FLAG_VALUE = ("-", "$", "%", "<", "{")


def _starts_its_line(text: str, position: int) -> bool:
    line_start = text.rfind("\n", 0, position) + 1
    return _LINE_KEY_PREFIX.fullmatch(text, line_start, position) is not None


def _opens_tag(text: str, position: int) -> bool:
    """True when the name before `position` is an XML element's: `<dbPassword>`."""
    start = position
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_.:-"):
        start -= 1
    return start > 0 and text[start - 1] == "<"


def _ends_a_flag(lowered: str, position: int) -> bool:
    """True when the name before `position` is the end of a long option: `--db-password`."""
    start = position
    while start > 0 and (lowered[start - 1].isalnum() or lowered[start - 1] in "-_"):
        start -= 1
    return (
        lowered.startswith("--", start)
        and start + 2 < position + 1
        and lowered[start + 2 : start + 3].isalnum()
        and (start == 0 or lowered[start - 1] in " \t\"'[(,=")
    )


_DEFINE_CALL = re.compile(r"define[ \t]*\([ \t]*[\"'][\w.-]*")


def _defined_constant(text: str, match: re.Match[str]) -> bool:
    """PHP's `define('DB_PASSWORD', ...)`: the name is the call's first argument, quoted."""
    if match["close"] not in ('"', "'"):
        return False
    line_start = text.rfind("\n", 0, match.start()) + 1
    call = text.rfind("define", line_start, match.start())
    return call != -1 and _DEFINE_CALL.fullmatch(text, call, match.start()) is not None


def _credential_like(value: str) -> bool:
    """A value under a name that often holds other things: letters and digits, not code."""
    return (
        len(value) >= 8
        and _has_letter_and_digit(value)
        and not _is_placeholder(value)
        and not _code_shaped(value)
    )


@dataclass(frozen=True, slots=True)
class _AssignmentRule:
    """A value given to a secret-named key, in the syntax of most languages, configs and
    command lines: `=`, `:`, `=>`, `:=`, `<-`, `define('NAME', 'value')`, `NAME=value cmd`,
    `- NAME=value` in a YAML list, `--name value` and `--name=value`."""

    pattern: re.Pattern[str]
    kind: str = "password-assignment"
    # For a generic name (`SERVICE_KEY`): the name must be written in capitals, as environment
    # variables are, and the value must look random, not like a word or a dictionary key.
    generic_name: str | None = None
    # Passwords and passphrases may be words with spaces between them.
    phrase: bool = False
    # The name holds other things as often (`auth`): the value must look like a credential.
    weak: bool = False

    def findings(self, text: str, lowered: str) -> Iterator[SecretFinding]:
        for match in self.pattern.finditer(lowered):
            if self.generic_name is not None:
                name_end = match.start() + len(self.generic_name)
                if text[match.start() : name_end] != self.generic_name.upper():
                    continue
            flag = _ends_a_flag(lowered, match.start())
            span = self._secret_span(match, text, flag)
            if span is not None:
                yield SecretFinding("cli-credential" if flag else self.kind, *span)

    def _secret_span(self, match: re.Match[str], text: str, flag: bool) -> tuple[int, int] | None:
        op = match["op"]
        if op is None and not (flag and match["pre"]):
            return None  # a value after a bare name only follows a `--flag`
        if op == "," and not (flag or _defined_constant(text, match)):
            return None  # `, value` only after a flag or in define('DB_PASSWORD', '...')
        if op == ">" and not _opens_tag(text, match.start()):
            return None  # `<password>...</password>`, not `token > 0`
        block = match["block"]
        if block is not None and op != ":" and not (op == ">" and block[0] in "\r\n"):
            return None  # on the next line only in YAML (`key: |`) and XML elements
        if match["secret"] is not None:
            start, end = match.span("secret")
            return (start, end) if self._accepts(text[start:end], quoted=True) else None
        start, end = match.span("bare")
        value, rest = text[start:end], match["rest"]
        if op == ">":
            ends = rest.startswith("</") or not rest.strip()
            return (start, end) if ends and self._accepts(value, quoted=True) else None
        if flag:  # a word after a flag may be prose: `--password suffers from ...`
            accepted = (
                op in (None, "=")
                and not value.startswith(_NOT_A_FLAG_VALUE)
                and (_has_letter_and_digit(value) or _mixed_case(value))
                and self._accepts(value, quoted=True)
            )
            return (start, end) if accepted else None
        if op not in _LINE_VALUE_OPERATORS or not _starts_its_line(text, match.start()):
            return None
        if rest.strip() in ("", '"', "'"):  # the value ends its line
            return (start, end) if self._accepts_bare(match, text, value) else None
        tight = not match["pre"] and not match["post"]
        if op == "=" and tight and rest[0] in " \t":  # PGPASSWORD=... pg_dump
            return (start, end) if self._accepts_bare(match, text, value) else None
        phrase = (value + rest).rstrip()
        if self.phrase and _UNQUOTED_PHRASE.fullmatch(phrase) and self._accepts(phrase, True):
            return start, start + len(phrase)
        return None

    def _accepts(self, value: str, quoted: bool) -> bool:
        if self.generic_name is not None or (self.weak and not quoted):
            return _random_enough(value)
        if self.weak:
            return _credential_like(value)
        return not _is_placeholder(value, phrase=self.phrase)

    def _accepts_bare(self, match: re.Match[str], text: str, value: str) -> bool:
        """An unquoted value: code unless it mixes letters and digits, or the name is an
        environment variable's (capitals, `=` without spaces) as in `.env` and compose lists."""
        if self.generic_name is not None or self.weak:
            return _random_enough(value)
        if _code_shaped(value) or _is_placeholder(value):
            return False
        if len(value) >= 8 and _has_letter_and_digit(value):
            return True
        name_start = match.start()
        while name_start > 0 and (text[name_start - 1].isalnum() or text[name_start - 1] == "_"):
            name_start -= 1
        name = text[name_start : match.start("pre")]
        environment_style = (
            match["op"] == "=" and not match["pre"] and not match["post"] and name.isupper()
        )
        return environment_style and len(value) >= 6


# A name/value pair: Kubernetes' `- name: DB_PASSWORD` with `value: ...` on the next line,
# ECS task definitions' `{"name": "...", "value": "..."}`.
_PAIR_SECRET_NAME = (
    r"[\w.-]*(?:pass(?:word|wd|phrase)?|pwd|secret|token|credentials?"
    r"|(?:" + "|".join(_KEY_QUALIFIERS) + r")[_.-]?key)(?:_base)?"
)
_NAME_VALUE_PAIRS = tuple(
    re.compile(
        label + r"[\"']?[ \t]*[:=][ \t]*[\"']?" + _PAIR_SECRET_NAME + r"[\"']?[ \t]*,?[ \t]*"
        r"(?:\r?\n[ \t]*(?:-[ \t]+)?)?[\"']?value[\"']?[ \t]*[:=][ \t]*"
        r"(?P<quote>[\"']?)(?P<secret>[^\s\"'`,}\]]{4,200})(?P=quote)(?![^\s,}\]])"
    )
    for label in ("name", "key")
)


def _pair_value(value: str) -> bool:
    return _non_trivial(value) and not _code_shaped(value)


# A password on a command line, after the flag its tool reads it from.
_COMMAND_END = r"[^\n|;&#]*?"
_FLAG_VALUE = r"(?P<quote>[\"']?)(?P<secret>[^\s\"'`]+)(?P=quote)"
# Each pattern starts with a literal (the regex engine skips ahead to it), the tool's name.
_REGISTRY_CLIENTS = ("docker", "podman", "buildah", "skopeo", "nerdctl", "oras", "registry")
_COMMAND_LINE_RULES: tuple[_Rule, ...] = (
    *(
        _Rule(  # mysql -pPASS: the password joined to the flag
            "cli-credential",
            re.compile(
                tool
                + r"(?:dump|admin|import|check|sh|-dump|-admin)?\b"
                + _COMMAND_END
                + r"[ \t]-p"
                + _FLAG_VALUE
            ),
            _non_trivial,
        )
        for tool in ("mysql", "mariadb")
    ),
    _Rule(  # docker login -p PASS, and the registry clients that copy it
        "cli-credential",
        re.compile(
            r"login\b(?:"
            + "|".join(f"(?<={tool} login)" for tool in _REGISTRY_CLIENTS)
            + ")"
            + _COMMAND_END
            + r"[ \t]-p[ \t]+"
            + _FLAG_VALUE
        ),
        _non_trivial,
        word_start=False,
    ),
    _Rule("cli-credential", re.compile(r"sshpass[ \t]+-p[ \t]*" + _FLAG_VALUE), _non_trivial),
    _Rule(  # curl -u user:password
        "cli-credential",
        re.compile(
            r"curl\b"
            + _COMMAND_END
            + r"[ \t](?:-u|--user)[ \t=]*(?P<quote>[\"']?)[^\s:\"'`]+:"
            + r"(?P<secret>[^\s\"'`]+)(?P=quote)"
        ),
        _non_trivial,
    ),
)

# A user and a password passed as a pair: `auth=('admin', '...')`, `HTTPBasicAuth('u', '...')`,
# Go's `SetBasicAuth("u", "...")`.
_AUTH_ARGUMENT = _Rule(
    "auth-argument",
    re.compile(
        r"auth(?:[ \t]*[=:][ \t]*[(\[]|\()[ \t]*[rbu]?([\"'])[^\"'\n]{1,64}\1[ \t]*,[ \t]*"
        r"[rbu]?([\"'])(?P<secret>[^\"'\n]{3,200})\2"
    ),
    _non_trivial,
    lowercase=True,
    word_start=False,
)

# Hex tokens (Twilio, Algolia, Mailchimp, ...) look like hashes; near a word of authentication
# and no word of hashing, a quoted one is a token.
_HEX = re.compile(r"[0-9a-fA-F]+")
_AUTH_CONTEXT = re.compile(r"auth|token|secret|passw|credential|api[_-]?key|\bsid\b|client|login")
_HASH_CONTEXT = re.compile(
    r"hash|sha\d|shasum|md5|digest|checksum|commit|\brev|etag|uuid|fingerprint|integrity|nonce"
    r"|hexlify|salt|hmac|kdf|scrypt"
)


def _in_auth_context(text: str, lowered: str, start: int, end: int) -> bool:
    """The line of `text[start:end]`, with the line before it, speaks of authentication and not
    of hashing."""
    line_start = text.rfind("\n", 0, start)
    previous_start = text.rfind("\n", 0, line_start) + 1 if line_start > 0 else 0
    line_end = text.find("\n", end)
    context = lowered[previous_start : line_end if line_end != -1 else len(text)]
    return _AUTH_CONTEXT.search(context) is not None and _HASH_CONTEXT.search(context) is None


@dataclass(frozen=True, slots=True)
class _QuotedTokenRule:
    """Quoted strings that are tokens by their look: random (`high-entropy`), or 32+ hex digits
    in an authentication context (`hex-token`). One pass over the quoted strings for both."""

    pattern: re.Pattern[str] = re.compile(r"([\"'`])(?P<secret>[A-Za-z0-9+/=_-]{20,})\1")

    def findings(self, text: str, lowered: str) -> Iterator[SecretFinding]:
        for match in self.pattern.finditer(text):
            value = match["secret"]
            start, end = match.span("secret")
            if _looks_random(value):
                yield SecretFinding("high-entropy", start, end)
            elif (
                len(value) >= 32
                and _HEX.fullmatch(value) is not None
                and not _mixed_case(value)
                and _has_letter_and_digit(value)
                and _in_auth_context(text, lowered, start, end)
            ):
                yield SecretFinding("hex-token", start, end)


_SCHEMES_BEFORE_AT = frozenset({"mailto", "sip", "sips", "xmpp", "tel", "news", "git", "ssh"})


@dataclass(frozen=True, slots=True)
class _DsnRule:
    """`user:password@host` without a scheme: Go's `user:pw@tcp(host:3306)/db`, DSNs in quotes.

    Searches for the `@` (rare in code, a literal the engine skips to), then looks back for the
    credentials; `://user:pw@` is the `url-credentials` rule's.
    """

    kind: str = "dsn-credentials"
    at: re.Pattern[str] = re.compile(r"@(?=(?:tcp|unix|udp)\(|[A-Za-z0-9][\w.-]*(?:[:/]\w|\())")
    before: re.Pattern[str] = re.compile(
        r"(?:^|[\s\"'`=,(\[])(?P<user>[\w.%+-]{1,64}):(?P<secret>[^\s:/@\"'`]{3,128})$"
    )

    def findings(self, text: str, lowered: str) -> Iterator[SecretFinding]:
        for at in self.at.finditer(text):
            window_start = max(0, at.start() - 200)
            match = self.before.search(text, window_start, at.start())
            if match is None or match["user"].lower() in _SCHEMES_BEFORE_AT:
                continue
            start, end = match.span("secret")
            if _url_credentials(f"{match['user']}:{text[start:end]}"):
                yield SecretFinding(self.kind, start, end)


_RULES: tuple[_Rule | _AssignmentRule | _DsnRule | _QuotedTokenRule, ...] = (
    *_TOKEN_RULES,
    *(
        _AssignmentRule(re.compile(name + _ASSIGNMENT_TAIL, re.MULTILINE), phrase=True)
        for name in _PASSWORD_NAMES
    ),
    *(
        _AssignmentRule(re.compile(name + _ASSIGNMENT_TAIL, re.MULTILINE), phrase=True)
        for name in _SECRET_KEY_NAMES
    ),
    *(
        _AssignmentRule(re.compile(name + _ASSIGNMENT_TAIL, re.MULTILINE), weak=True)
        for name in _WEAK_KEY_NAMES
    ),
    _AssignmentRule(re.compile("_key" + _ASSIGNMENT_TAIL, re.MULTILINE), generic_name="_key"),
    *(_Rule("name-value-pair", pair, _pair_value, lowercase=True) for pair in _NAME_VALUE_PAIRS),
    *_COMMAND_LINE_RULES,
    _AUTH_ARGUMENT,
    _DsnRule(),
    _QuotedTokenRule(),
)

_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def _lower_keeping_offsets(text: str) -> str:
    lowered = text.lower()
    # A few non-ASCII letters lower-case to two characters; then lower ASCII only.
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


def _all_findings(text: str) -> Iterator[SecretFinding]:
    lowered = _lower_keeping_offsets(text)
    for rule in _RULES:
        yield from rule.findings(text, lowered)


_PRIVATE_KEY_RULE = next(rule for rule in _TOKEN_RULES if rule.kind == "private-key")


def find_private_key(text: str) -> bool:
    """True when `text` holds a private key block (its BEGIN line and some of its body)."""
    return next(_PRIVATE_KEY_RULE.findings(text, text), None) is not None


def find_secrets(text: str) -> list[SecretFinding]:
    """Every secret in `text`, ordered by position, never overlapping.

    Where two rules claim overlapping text, the more specific rule (earlier in `_RULES`) wins.
    """
    kept: list[SecretFinding] = []
    for finding in _all_findings(text):
        if all(finding.end <= other.start or other.end <= finding.start for other in kept):
            kept.append(finding)
    return sorted(kept, key=lambda finding: finding.start)


def first_secret(text: str) -> SecretFinding | None:
    """The first secret any rule finds, stopping there; None when the text is clean."""
    return next(_all_findings(text), None)


def contains_secret(text: str) -> bool:
    return first_secret(text) is not None
