"""Secret detection in prompt text: a compact set of compiled rules.

We use our own rules rather than `detect-secrets`: that library scans line by line through
plugins and took about 170 ms on 16 KB of ordinary Python, while this scan runs on every
keystroke and must stay well under a millisecond. Every pattern starts with a literal, so the
regex engine skips ahead instead of trying each position; key names are searched in a
lower-cased copy of the text for the same reason.

Trade-offs, chosen to keep false positives on ordinary code low:
- Vendor token formats (AWS, GitHub, OpenAI, Anthropic, Google, Slack, Stripe, ...) and private
  keys are flagged wherever they appear, documented example values included.
- Values kept under secret-like names (`password`, `api_key`, `DB_PASS`, ...), in the syntaxes
  of code, configuration files and command lines, unless they are placeholders, references or
  prose: `named_secrets`, judged by `secret_values`.
- Other quoted strings of 20+ characters count as secrets when they mix upper case, lower case
  and digits and their Shannon entropy is that of a random string of their length. Hex (hashes,
  git SHAs, UUIDs, colours) never mixes case, so a hex-only secret is found only under a
  secret-like name, or quoted, 32+ digits, on a line about authentication (`hex-token`).
  Strings made of words (`BrowserStateV1`) and lock-file integrity hashes (`sha512-...`) are
  skipped too; base64 of plain text and random test fixtures can be flagged, and about 1 % of
  random 20-32 character secrets is missed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from lsp_server.privacy.block_secrets import BLOCK_NAMED_RULES, BlockNamedRule
from lsp_server.privacy.colon_credentials import ColonFileRule
from lsp_server.privacy.escaped_text import unescaped
from lsp_server.privacy.named_secrets import NAMED_SECRET_RULES, NamedSecretRule
from lsp_server.privacy.pattern_rule import PatternRule, SecretFinding
from lsp_server.privacy.secret_values import (
    basic_credentials,
    bearer_token,
    has_letter_and_digit,
    looks_random,
    mixed_case,
    mixed_case_with_digit,
    non_trivial,
    url_credentials,
)

__all__ = ["SecretFinding", "contains_secret", "find_private_key", "find_secrets", "first_secret"]

_PRIVATE_KEY_HEADER = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_PRIVATE_KEY_FOOTER = r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
# Line breaks inside a key may be real or escaped (`\n` in JSON and string literals).
_BREAK = r"(?:\s|\\[nr])*"

_TOKEN_RULES: tuple[PatternRule, ...] = (
    PatternRule(
        "gcp-service-account",
        re.compile(r'"private_key"\s*:\s*"(?P<secret>' + _PRIVATE_KEY_HEADER + r'[^"]*)'),
    ),
    PatternRule(
        "gcp-service-account",
        re.compile(r'"private_key_id"\s*:\s*"(?P<secret>[0-9a-f]{40})"'),
    ),
    PatternRule(
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
    PatternRule("aws-access-key", re.compile(r"A(?:KIA|SIA|BIA|CCA)[A-Z2-7]{16}\b")),
    PatternRule(
        "github-token",
        re.compile(r"g(?:h[pousr]_[A-Za-z0-9]{36,251}|ithub_pat_[A-Za-z0-9_]{22,255})\b"),
    ),
    PatternRule("anthropic-key", re.compile(r"sk-ant-[A-Za-z0-9_-]{20,}")),
    PatternRule(
        "openai-key",
        re.compile(r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
        mixed_case_with_digit,
    ),
    PatternRule("google-api-key", re.compile(r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])")),
    PatternRule("slack-token", re.compile(r"x(?:ox[abposr]|app)-[0-9A-Za-z-]{10,}")),
    PatternRule(
        "slack-webhook",
        re.compile(r"https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]{20,}"),
    ),
    PatternRule("stripe-key", re.compile(r"sk_(?:live|test)_[0-9A-Za-z]{20,}")),
    PatternRule("stripe-key", re.compile(r"rk_(?:live|test)_[0-9A-Za-z]{20,}")),
    PatternRule("stripe-key", re.compile(r"whsec_[0-9A-Za-z+/=]{24,}")),
    PatternRule("gitlab-token", re.compile(r"gl(?:pat|ptt|dt|rt|soat|ft)-[A-Za-z0-9_-]{20,}")),
    PatternRule("digitalocean-token", re.compile(r"do[opr]_v1_[a-f0-9]{64}\b")),
    PatternRule("shopify-token", re.compile(r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b")),
    PatternRule("databricks-token", re.compile(r"dapi[a-f0-9]{32}(?:-\d+)?\b")),
    PatternRule("grafana-token", re.compile(r"gl(?:sa|c)_[A-Za-z0-9+/_=]{32,}")),
    PatternRule("vault-token", re.compile(r"hv[sbr]\.[A-Za-z0-9_-]{24,}")),
    PatternRule("google-oauth-token", re.compile(r"ya29\.[0-9A-Za-z_-]{20,}")),
    PatternRule("google-oauth-secret", re.compile(r"GOCSPX-[A-Za-z0-9_-]{28}")),
    PatternRule("llm-api-key", re.compile(r"sk-(?:or-v1-[a-f0-9]{64}|[a-f0-9]{32})\b")),
    PatternRule("llm-api-key", re.compile(r"gsk_[A-Za-z0-9]{48,}\b")),
    PatternRule("llm-api-key", re.compile(r"xai-[A-Za-z0-9]{60,}\b")),
    PatternRule("llm-api-key", re.compile(r"pplx-[A-Za-z0-9]{40,}\b")),
    PatternRule("replicate-token", re.compile(r"r8_[A-Za-z0-9]{37}\b"), mixed_case_with_digit),
    PatternRule("linear-key", re.compile(r"lin_(?:api|oauth)_[A-Za-z0-9]{40}\b")),
    PatternRule("postman-key", re.compile(r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}\b")),
    PatternRule("pulumi-token", re.compile(r"pul-[a-f0-9]{40}\b")),
    PatternRule("newrelic-key", re.compile(r"NRA[AIK]-[A-Z0-9]{27}\b")),
    PatternRule("sentry-token", re.compile(r"sntry[su]_[A-Za-z0-9_=+/]{40,}")),
    PatternRule("doppler-token", re.compile(r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}")),
    PatternRule("supabase-token", re.compile(r"sbp_[a-f0-9]{40}\b")),
    PatternRule("planetscale-token", re.compile(r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,}")),
    PatternRule("square-token", re.compile(r"sq0(?:atp|csp)-[0-9A-Za-z_-]{22,}")),
    PatternRule("twilio-key", re.compile(r"SK[0-9a-f]{32}\b")),
    PatternRule("mailgun-key", re.compile(r"key-[0-9a-f]{32}\b")),
    PatternRule("mapbox-token", re.compile(r"sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}")),
    PatternRule("atlassian-token", re.compile(r"ATATT3[A-Za-z0-9_=-]{100,}")),
    PatternRule("heroku-key", re.compile(r"HRKU-[A-Za-z0-9_-]{60,}")),
    PatternRule("age-secret-key", re.compile(r"AGE-SECRET-KEY-1[0-9A-Z]{58}")),
    PatternRule("npm-token", re.compile(r"npm_[A-Za-z0-9]{36}\b"), mixed_case_with_digit),
    PatternRule("pypi-token", re.compile(r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}")),
    PatternRule("huggingface-token", re.compile(r"hf_[A-Za-z]{34,}\b"), mixed_case),
    PatternRule("sendgrid-key", re.compile(r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b")),
    PatternRule("jwt", re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")),
    PatternRule(
        "aws-secret-key",
        re.compile(
            r"secret[_.-]?(?:access[_.-]?)?key[\"'\]]?[ \t]*(?::=|=>|=|:)[ \t]*[\"'`]?"
            r"(?P<secret>[a-z0-9/+]{40})(?![a-z0-9/+=])"
        ),
        has_letter_and_digit,
        lowercase=True,
        word_start=False,
    ),
    PatternRule(
        "url-credentials",
        re.compile(r"://(?P<secret>[^\s:/@\"'`]{0,64}:[^\s:/@\"'`]{3,128})@"),
        url_credentials,
        word_start=False,
    ),
    PatternRule(
        "bearer-token",
        re.compile(r"bearer[ \t]+(?P<secret>[a-z0-9._~+/-]{20,}=*)"),
        bearer_token,
        lowercase=True,
    ),
    PatternRule(
        "basic-auth",
        re.compile(r"basic[ \t]+(?P<secret>[a-z0-9+/]{8,}={0,2})(?![a-z0-9+/=])"),
        basic_credentials,
        lowercase=True,
    ),
    PatternRule(  # Docker's config.json
        "basic-auth",
        re.compile(r"\"auth\"[ \t]*:[ \t]*\"(?P<secret>[A-Za-z0-9+/]{8,}={0,2})\""),
        basic_credentials,
        word_start=False,
    ),
    *(
        PatternRule(  # Azure storage and service bus connection strings
            "connection-string",
            re.compile(name + r"key[ \t]*=[ \t]*(?P<secret>[a-z0-9+/]{20,}={0,2})"),
            lowercase=True,
        )
        for name in ("account", "sharedaccess")
    ),
    *(
        PatternRule(  # ADO.NET, ODBC, JDBC: `...;Password=...;`, `?password=...&`, `"Pwd=...;`
            "connection-string",
            re.compile(
                name + rf"(?<=[;?&\"']{name})[ \t]*=[ \t]*(?P<secret>[^;&\s\"'`]{{4,}})"
                r"(?=[;&\s\"'`]|$)",
                re.MULTILINE,
            ),
            non_trivial,
            lowercase=True,
            word_start=False,
        )
        for name in ("password", "pwd")
    ),
    PatternRule(  # Oracle's JDBC thin driver: jdbc:oracle:thin:user/password@host
        "connection-string",
        re.compile(r":thin:[\w$#]{1,64}/(?P<secret>[^@\s\"'`]{3,128})@"),
        non_trivial,
        word_start=False,
    ),
    PatternRule(  # .npmrc: `//registry.example.com/:_authToken=...`
        "npm-token",
        re.compile(r":_(?:auth(?:token)?|password)[ \t]*=[ \t]*[\"']?(?P<secret>[^\s\"'`]{8,})"),
        non_trivial,
        lowercase=True,
        word_start=False,
    ),
    PatternRule(  # .npmrc: `_auth=...` on a line of its own
        "npm-token",
        re.compile(r"_(?:auth(?:token)?|password)[ \t]*=[ \t]*[\"']?(?P<secret>[^\s\"'`]{8,})"),
        non_trivial,
        lowercase=True,
        word_start=False,
        own_line=True,
    ),
    PatternRule(  # .netrc: `machine host login me password pw`, on one line or several
        "netrc-password",
        re.compile(
            r"machine\b[^\n]{0,200}?(?:\n[ \t]*(?:login|account|port)\b[^\n]{0,200})*?"
            r"\s+password[ \t]+(?P<secret>[^\s]{3,})"
        ),
        non_trivial,
        lowercase=True,
    ),
    PatternRule(  # kubeconfig
        "kubeconfig-credentials",
        re.compile(r"client-key-data[ \t]*:[ \t]*[\"']?(?P<secret>[a-z0-9+/]{20,}={0,2})"),
        lowercase=True,
    ),
    PatternRule(  # kubeadm bootstrap tokens in a kubeconfig's `token:`
        "kubeconfig-credentials",
        re.compile(r"token[\"']?[ \t]*:[ \t]*[\"']?(?P<secret>[a-z0-9]{6}\.[a-z0-9]{16})\b"),
        lowercase=True,
        word_start=False,
    ),
)

# Hex tokens (Twilio, Algolia, Mailchimp, ...) look like hashes; near a word of authentication
# and no word of hashing, a quoted one is a token.
_HEX = re.compile(r"[0-9a-fA-F]+")
_AUTH_CONTEXT = re.compile(r"auth|token|secret|passw|credential|api[_-]?key|\bsid\b|client|login")
_HASH_CONTEXT = re.compile(
    r"hash|sha\d|shasum|md5|digest|checksum|commit|\brev|etag|uuid|fingerprint|integrity|nonce"
    r"|hexlify|salt|hmac|kdf|scrypt"
)


_CONTEXT_REACH = 256


def _in_auth_context(text: str, lowered: str, start: int, end: int) -> bool:
    """The line of `text[start:end]`, with the line before it, speaks of authentication and not
    of hashing (looking at most `_CONTEXT_REACH` characters either way)."""
    floor = max(0, start - _CONTEXT_REACH)
    line_start = text.rfind("\n", floor, start)
    previous_start = text.rfind("\n", floor, line_start) + 1 if line_start > floor else floor
    ceiling = min(len(text), end + _CONTEXT_REACH)
    line_end = text.find("\n", end, ceiling)
    context = lowered[previous_start : line_end if line_end != -1 else ceiling]
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
            if looks_random(value):
                yield SecretFinding("high-entropy", start, end)
            elif (
                len(value) >= 32
                and _HEX.fullmatch(value) is not None
                and not mixed_case(value)
                and has_letter_and_digit(value)
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
            if url_credentials(f"{match['user']}:{text[start:end]}"):
                yield SecretFinding(self.kind, start, end)


_Rule = PatternRule | NamedSecretRule | BlockNamedRule | _DsnRule | ColonFileRule | _QuotedTokenRule
_RULES: tuple[_Rule, ...] = (
    *_TOKEN_RULES,
    *NAMED_SECRET_RULES,
    *BLOCK_NAMED_RULES,
    _DsnRule(),
    ColonFileRule(),
    _QuotedTokenRule(),
)

_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}


def _lower_keeping_offsets(text: str) -> str:
    lowered = text.lower()
    # A few non-ASCII letters lower-case to two characters; then lower ASCII only.
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


def _screen(rule: _Rule) -> tuple[re.Pattern[str], bool]:
    """The pattern every finding of `rule` is a match of, and whether it reads the lower-cased
    text: the rule's own first search. Most text matches none of them, and one search per rule
    costs a tenth of starting the rule's findings."""
    if isinstance(rule, PatternRule):
        return rule.pattern, rule.lowercase
    if isinstance(rule, NamedSecretRule | BlockNamedRule):
        return rule.pattern, True
    if isinstance(rule, _DsnRule):
        return rule.at, False
    return rule.pattern, False


_SCREENED_RULES = tuple((*_screen(rule), rule) for rule in _RULES)


def _all_findings(text: str) -> Iterator[SecretFinding]:
    """The findings in `text`, then those in its escaped strings with their quotes back."""
    yield from _findings(text)
    view = unescaped(text)
    if view is not None:
        for finding in _findings(view.text):
            yield SecretFinding(finding.kind, *view.original_span(finding.start, finding.end))


def _findings(text: str) -> Iterator[SecretFinding]:
    lowered = _lower_keeping_offsets(text)
    for pattern, reads_lowered, rule in _SCREENED_RULES:
        if pattern.search(lowered if reads_lowered else text) is not None:
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


def first_secret(text: str, start: int = 0) -> SecretFinding | None:
    """The first secret any rule finds beginning at `start` or later, stopping there; None
    when there is none. The text before `start` is still read, as context."""
    return next((finding for finding in _all_findings(text) if finding.start >= start), None)


def first_secret_ending_after(text: str, position: int) -> SecretFinding | None:
    """The first secret any rule finds that ends after `position`: one that begins before it
    and runs on past it counts. The text before is still read, as context."""
    return next((finding for finding in _all_findings(text) if finding.end > position), None)


def contains_secret(text: str) -> bool:
    return first_secret(text) is not None
