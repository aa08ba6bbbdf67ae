"""Secrets found by the name they are kept under: a secret-like key name (password, passwd, pwd,
pass, secret, token, api key, auth, credential, private key) and its value, in the syntaxes of
code, configuration files and command lines.

- `=`, `:`, `=>`, `:=`, `.=`, `+=`, `?=`, `<-`, PHP's `define('DB_PASSWORD', '...')`, XML
  elements, YAML block scalars, escaped JSON, typed declarations (`var apiToken string = ...`);
- compose `environment:` list items (`- MYSQL_PASS=...`, `- "POSTGRES_PASSWORD=..."`), `.env`
  and Makefile lines, environment prefixes of a command (`PGPASSWORD=... pg_dump`);
- name/value pairs on one line or two (`- name: DB_PASSWORD` then `value: ...`);
- command-line flags (`--password ...`, `--api-key=...`, `mysql -p...`, `docker login -p ...`,
  `sshpass -p`, `curl -u user:...`) and a user/password pair passed as arguments
  (`auth=('admin', '...')`, `HTTPBasicAuth(...)`, `SetBasicAuth(...)`).

A value is a secret unless it is a placeholder, a reference or prose (see `secret_values`).
Quoted values count from 6 characters; passphrases may have spaces. Unquoted values count at
the end of their line (or before a command, after `NAME=`) when they mix letters and digits or
follow an environment variable's name (`DB_PASSWORD=rootpass`), so `token: str` and
`password = input(...)` stay quiet. Every pattern starts with a literal, a key name or a tool's,
searched in the lower-cased text so the regex engine skips ahead.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from lsp_server.privacy.pattern_rule import PatternRule, SecretFinding
from lsp_server.privacy.secret_values import (
    code_shaped,
    has_letter_and_digit,
    is_placeholder,
    mixed_case,
    non_trivial,
    random_enough,
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
# operator (none after a command-line flag), then a string literal (`secret`; still `open` at
# the end of its line while it is being typed) or a bare value, with the rest of its line
# looked at but not consumed.
_ASSIGNMENT_TAIL = (
    r"(?:_base)?(?![a-z0-9_])(?P<close>\\?[\"']\]?|\])?"
    r"(?:[ \t]*:[ \t]*[\w.\[\]|, ]{1,40}?(?=[ \t]*=)|[ \t]+[\w.\[\]*]{1,40}(?=[ \t]*=[^=]))?"
    r"(?P<pre>[ \t]*)(?:(?P<op>:{1,3}=|[.+?]=|=>|<-|=(?!=)|:|,|>)(?P<post>[ \t]*))?"
    r"(?P<block>[|>][-+]?[ \t]*\r?\n[ \t]+|\r?\n[ \t]*)?"
    r"(?:[rbuf]{0,2}\\?(?P<quote>[\"'`])(?P<secret>[^\"'`\n]{6,200}?)"
    r"(?:\\?(?P=quote)|(?P<open>[ \t]*$))"
    r"|(?P<bare>[^\s\"'`<]+)(?=(?P<rest>[^\n]{0,256})))"
)
# Operators after which an unquoted value runs to the end of its line (Makefiles' among them).
_LINE_VALUE_OPERATORS = frozenset({"=", ":", ":=", "::=", ":::=", "?="})
# What may come before a key on its line: indentation, a YAML list dash, an opening quote
# (`- "DB_PASSWORD=..."`), a shell or Dockerfile keyword, other `NAME=value ` prefixes.
_LINE_KEY_PREFIX = re.compile(
    r"[ \t]*(?:-[ \t]+)?[\"']?(?:(?:export|env|set|sudo|ENV|ARG|RUN)[ \t]+)*"
    r"(?:[A-Za-z_]\w*=[^\s\"'`]*[ \t]+)*[\w.-]*"
)
_MAX_KEY_OFFSET = 256
_UNQUOTED_PHRASE = re.compile(r"[A-Za-z0-9]+(?:[ \t]+[A-Za-z0-9]+){2,}")
_NOT_A_FLAG_VALUE = ("-", "$", "%", "<", "{")


def _starts_its_line(text: str, position: int) -> bool:
    """True when only a key's usual prefixes come before `position` on its line, within
    `_MAX_KEY_OFFSET` characters (so a long line costs each key a bounded look back)."""
    floor = max(0, position - _MAX_KEY_OFFSET - 1)
    newline = text.rfind("\n", floor, position)
    if newline == -1 and floor > 0:
        return False
    return _LINE_KEY_PREFIX.fullmatch(text, newline + 1, position) is not None


def _opens_a_string(text: str, quote_at: int) -> bool:
    """True when the quote at `quote_at`, the last of its kind on its line, opens a string (a
    password being typed, its closing quote not there yet) rather than closing one: an even
    number of the same quote comes before it on the line."""
    line_start = text.rfind("\n", max(0, quote_at - _MAX_KEY_OFFSET - 1), quote_at) + 1
    return text.count(text[quote_at], line_start, quote_at) % 2 == 0


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
        and has_letter_and_digit(value)
        and not is_placeholder(value)
        and not code_shaped(value)
    )


@dataclass(frozen=True, slots=True)
class NamedSecretRule:
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
            if match["open"] is not None and not _opens_a_string(text, match.start("quote")):
                return None
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
                and (has_letter_and_digit(value) or mixed_case(value))
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
            return random_enough(value)
        if self.weak:
            return _credential_like(value)
        return not is_placeholder(value, phrase=self.phrase)

    def _accepts_bare(self, match: re.Match[str], text: str, value: str) -> bool:
        """An unquoted value: code unless it mixes letters and digits, or the name is an
        environment variable's (capitals, `=` without spaces) as in `.env` and compose lists."""
        if self.generic_name is not None or self.weak:
            return random_enough(value)
        if code_shaped(value) or is_placeholder(value):
            return False
        if len(value) >= 8 and has_letter_and_digit(value):
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
_NAME_PAIRS = tuple(
    re.compile(
        label + r"[\"']?[ \t]*[:=][ \t]*[\"']?" + _PAIR_SECRET_NAME + r"[\"']?[ \t]*,?[ \t]*"
        r"(?:\r?\n[ \t]*(?:-[ \t]+)?)?[\"']?value[\"']?[ \t]*[:=][ \t]*"
        r"(?P<quote>[\"']?)(?P<secret>[^\s\"'`,}\]]{4,200})(?P=quote)(?![^\s,}\]])"
    )
    for label in ("name", "key")
)


def _pair_value(value: str) -> bool:
    return non_trivial(value) and not code_shaped(value)


# A password on a command line, after the flag its tool reads it from.
_COMMAND_END = r"[^\n|;&#]{0,200}?"  # the flags of one command, a bounded look ahead
_FLAG_VALUE = r"(?P<quote>[\"']?)(?P<secret>[^\s\"'`]+)(?P=quote)"
# Each pattern starts with a literal (the regex engine skips ahead to it), the tool's name.
_REGISTRY_CLIENTS = ("docker", "podman", "buildah", "skopeo", "nerdctl", "oras", "registry")
_COMMAND_LINE_RULES: tuple[PatternRule, ...] = (
    *(
        PatternRule(  # mysql -pPASS: the password joined to the flag
            "cli-credential",
            re.compile(
                tool
                + r"(?:dump|admin|import|check|sh|-dump|-admin)?\b"
                + _COMMAND_END
                + r"[ \t]-p"
                + _FLAG_VALUE
            ),
            non_trivial,
        )
        for tool in ("mysql", "mariadb")
    ),
    PatternRule(  # docker login -p PASS, and the registry clients that copy it
        "cli-credential",
        re.compile(
            r"login\b(?:"
            + "|".join(f"(?<={tool} login)" for tool in _REGISTRY_CLIENTS)
            + ")"
            + _COMMAND_END
            + r"[ \t]-p[ \t]+"
            + _FLAG_VALUE
        ),
        non_trivial,
        word_start=False,
    ),
    PatternRule("cli-credential", re.compile(r"sshpass[ \t]+-p[ \t]*" + _FLAG_VALUE), non_trivial),
    PatternRule(  # curl -u user:password
        "cli-credential",
        re.compile(
            r"curl\b"
            + _COMMAND_END
            + r"[ \t](?:-u|--user)[ \t=]*(?P<quote>[\"']?)[^\s:\"'`]+:"
            + r"(?P<secret>[^\s\"'`]+)(?P=quote)"
        ),
        non_trivial,
    ),
)

# An API key in a request header: `curl -H 'X-API-Key: ...'`, `--header "api-key: ..."`, and
# a header set in code, `setHeader("X-API-Key", "...")`. The header's name says it holds a
# credential; a value that is a word before another (`Authorization: Bearer ...`) is another
# rule's.
_HEADER_NAME = (
    r"[\w-]*(?:(?:api|access|subscription|secret|auth|private|client|app|account|master)[_-]?key"
    r"|token|secret|passw(?:or)?d|authorization)"
)
HEADER_RULES: tuple[PatternRule, ...] = (
    PatternRule(
        "cli-credential",
        re.compile(
            r"-(?:h|-header)(?:[ \t]+|=)(?P<q>[\"'])?" + _HEADER_NAME + r"[ \t]*:[ \t]*"
            r"(?P<secret>[^\s\"'`]{6,200})(?(q)(?P=q)|(?=\s|$))"
        ),
        non_trivial,
        lowercase=True,
        word_start=False,
    ),
    PatternRule(
        "header-credential",
        re.compile(
            r"-(?:key|token|secret)[\"'][ \t]*,[ \t]*[\"'](?P<secret>[^\s\"'`]{8,200})[\"']"
        ),
        _pair_value,
        lowercase=True,
        word_start=False,
    ),
)

# A user and a password passed as a pair: `auth=('admin', '...')`, `HTTPBasicAuth('u', '...')`,
# Go's `SetBasicAuth("u", "...")`.
_AUTH_ARGUMENT = PatternRule(
    "auth-argument",
    re.compile(
        r"auth(?:[ \t]*[=:][ \t]*[(\[]|\()[ \t]*[rbu]?([\"'])[^\"'\n]{1,64}\1[ \t]*,[ \t]*"
        r"[rbu]?([\"'])(?P<secret>[^\"'\n]{3,200})\2"
    ),
    non_trivial,
    lowercase=True,
    word_start=False,
)


NAMED_SECRET_RULES: tuple[PatternRule | NamedSecretRule, ...] = (
    *(
        NamedSecretRule(re.compile(name + _ASSIGNMENT_TAIL, re.MULTILINE), phrase=True)
        for name in (*_PASSWORD_NAMES, *_SECRET_KEY_NAMES)
    ),
    *(
        NamedSecretRule(re.compile(name + _ASSIGNMENT_TAIL, re.MULTILINE), weak=True)
        for name in _WEAK_KEY_NAMES
    ),
    NamedSecretRule(re.compile("_key" + _ASSIGNMENT_TAIL, re.MULTILINE), generic_name="_key"),
    *(PatternRule("name-value-pair", pair, _pair_value, lowercase=True) for pair in _NAME_PAIRS),
    *_COMMAND_LINE_RULES,
    *HEADER_RULES,
    _AUTH_ARGUMENT,
)
