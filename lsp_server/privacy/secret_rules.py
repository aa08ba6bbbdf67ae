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
_TEMPLATE = re.compile(r"\$\{|\$\(|\{\{|%\(|%[sd]\b|\{[^}]*\}|^\$[A-Za-z_]")
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


def _is_placeholder(value: str) -> bool:
    """True for values that stand in for a secret rather than being one."""
    lowered = value.lower()
    return (
        lowered in _PLACEHOLDER_VALUES
        or any(word in lowered for word in _PLACEHOLDER_WORDS)
        or len(set(value)) <= 2
        or value[0] + value[-1] in ("<>", "[]", "()")
        or any(ch.isspace() for ch in value)
        or lowered.startswith(_FILE_OR_URL_PREFIXES)
        or lowered.endswith(_FILE_SUFFIXES)
        or _ENV_VAR_NAME.fullmatch(value) is not None
        or _TEMPLATE.search(value) is not None
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
        and _CODE_SHAPED.fullmatch(value) is None
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

# Key names that end in one of these words hold secrets: DB_PASSWORD, apiKey, client_secret.
# One pattern per word, each starting with a literal; `key` only after a qualifier (`api_key`).
_KEY_QUALIFIERS = ("api", "access", "private", "secret", "auth", "signing", "encryption", "client")
_SECRET_KEY_NAMES = (
    r"pass(?:word|wd|phrase)",
    r"pass(?<![a-z0-9]pass)",  # DB_PASS, SMTP_PASS; not bypass
    r"pwd",
    r"secret",
    r"token",
    r"key(?:" + "|".join(f"(?<={q}key)|(?<={q}[_.-]key)" for q in _KEY_QUALIFIERS) + r")",
)
# The key, its closing quote or bracket, an optional annotation (`api_key: str = ...`), the
# operator, then a string literal (`secret`) or a bare value running to the end of the line.
_ASSIGNMENT_TAIL = (
    r"(?![a-z0-9_])[\"'\]]?(?:[ \t]*:[ \t]*[\w.\[\]|, ]{1,40}?(?=[ \t]*=))?"
    r"[ \t]*(?P<op>:=|=>|<-|=(?!=)|:)[ \t]*"
    r"(?:[rbuf]{0,2}(?P<quote>[\"'`])(?P<secret>[^\"'`\n]{6,200})(?P=quote)"
    r"|(?P<bare>[^\s\"'`]+)[ \t\r]*$)"
)
_LINE_KEY_PREFIX = re.compile(r"[ \t]*(?:export[ \t]+)?[\w.-]*")


def _starts_its_line(text: str, position: int) -> bool:
    line_start = text.rfind("\n", 0, position) + 1
    return _LINE_KEY_PREFIX.fullmatch(text, line_start, position) is not None


@dataclass(frozen=True, slots=True)
class _AssignmentRule:
    """A value assigned to a secret-named key, in the syntax of most languages and configs."""

    pattern: re.Pattern[str]
    kind: str = "password-assignment"
    # For a generic name (`SERVICE_KEY`): the name must be written in capitals, as environment
    # variables are, and the value must look random, not like a word or a dictionary key.
    generic_name: str | None = None

    def findings(self, text: str, lowered: str) -> Iterator[SecretFinding]:
        for match in self.pattern.finditer(lowered):
            if self.generic_name is not None:
                name_end = match.start() + len(self.generic_name)
                if text[match.start() : name_end] != self.generic_name.upper():
                    continue
                start, end = match.span("secret" if match["secret"] is not None else "bare")
                if _random_enough(text[start:end]) and (
                    match["secret"] is not None or _starts_its_line(text, match.start())
                ):
                    yield SecretFinding(self.kind, start, end)
                continue
            if match["secret"] is not None:
                start, end = match.span("secret")
                if not _is_placeholder(text[start:end]):
                    yield SecretFinding(self.kind, start, end)
                continue
            start, end = match.span("bare")
            value = text[start:end]
            if (
                match["op"] in ("=", ":")
                and len(value) >= 8
                and _has_letter_and_digit(value)
                and _CODE_SHAPED.fullmatch(value) is None
                and not _is_placeholder(value)
                and _starts_its_line(text, match.start())
            ):
                yield SecretFinding(self.kind, start, end)


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


_RULES: tuple[_Rule | _AssignmentRule | _DsnRule, ...] = (
    *_TOKEN_RULES,
    *(
        _AssignmentRule(re.compile(name + _ASSIGNMENT_TAIL, re.MULTILINE))
        for name in _SECRET_KEY_NAMES
    ),
    _AssignmentRule(re.compile("_key" + _ASSIGNMENT_TAIL, re.MULTILINE), generic_name="_key"),
    _DsnRule(),
    _Rule(
        "high-entropy",
        re.compile(r"([\"'`])(?P<secret>[A-Za-z0-9+/=_-]{20,})\1"),
        _looks_random,
        word_start=False,
    ),
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
