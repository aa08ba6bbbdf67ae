"""Recall cases this project did not write: secrets that gitleaks' default rules catch.

gitleaks' rule set (v8.30.1, MIT; its rules with a pattern are in
`bench/data/gitleaks/rules.json`, with its licence) is turned into labelled cases the way
gitleaks tests its own rules: for each rule, a secret is drawn (seeded, with `rstr`) from the
rule's secret group until it reaches the rule's entropy floor, and written into the sample lines
of gitleaks' `GenerateSampleSecrets` (INI, JSON, XML, YAML, C#, Go, Java, Kotlin, PHP, Python,
CSV, logstash, Makefile), the rule's first keyword as the identifier. A case is kept only when
the rule itself, translated from Go's pattern syntax, matches it and captures that secret:
every case is one gitleaks catches. Each secret is also tried alone, in quotes, with no name
before it: what a scanner knows of the format itself.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rstr

RULES_FILE = Path(__file__).parent / "data" / "gitleaks" / "rules.json"

# gitleaks' `GenerateSampleSecrets` (cmd/generate/config/utils/generate.go, MIT), the shapes
# its rule tests write a secret in; `{i}` is the identifier, `{s}` the secret.
SAMPLE_SHAPES: dict[str, str] = {
    "ini - quoted1": '{i}Token="{s}"',
    "ini - quoted2": '{i}Token = "{s}"',
    "ini - unquoted1": "{i}Token={s}",
    "ini - unquoted2": "{i}Token = {s}",
    "json - string": '{\n    "{i}_token": "{s}"\n}',
    "json - escaped string": '\\{\n    \\"{i}_token\\": \\"{s}\\"\n\\}',
    "xml - element": "<{i}Token>{s}</{i}Token>",
    "xml - element multiline": "<{i}Token>\n    {s}\n</{i}Token>",
    "yaml - singleline - unquoted": "{i}_token: {s}",
    "yaml - singleline - single quote": "{i}_token: '{s}'",
    "yaml - singleline - double quote": '{i}_token: "{s}"',
    "yaml - multiline - literal": "{i}_token: |\n  {s}",
    "yaml - multiline - folding": "{i}_token: >\n  {s}",
    "C#": 'string {i}Token = "{s}";',
    "go - normal": 'var {i}Token string = "{s}"',
    "go - short": '{i}Token := "{s}"',
    "go - backticks": "{i}Token := `{s}`",
    "java": 'String {i}Token = "{s}";',
    "kotlin - notype": 'var {i}Token = "{s}"',
    "php - string concat": '${i}Token .= "{s}"',
    "python - single quote": "{i}Token = '{s}'",
    "python - double quote": '{i}Token = "{s}"',
    "csv - unquoted": "{i}Token,{s},",
    "logstash": '  "{i}Token" => "{s}"',
    "make - recursive assignment": '{i}_TOKEN = "{s}"',
    "make - simple assignment": '{i}_TOKEN := "{s}"',
    "make - shell assignment": '{i}_TOKEN ::= "{s}"',
    "make - evaluated shell assignment": '{i}_TOKEN :::= "{s}"',
    "make - conditional assignment": '{i}_TOKEN ?= "{s}"',
    "make - append": '{i}_TOKEN += "{s}"',
}

_POSIX_CLASSES = {
    "[:alnum:]": "a-zA-Z0-9",
    "[:alpha:]": "a-zA-Z",
    "[:digit:]": "0-9",
    "[:xdigit:]": "0-9a-fA-F",
    "[:upper:]": "A-Z",
    "[:lower:]": "a-z",
    "[:space:]": r" \t\r\n\v\f",
    "[:word:]": r"\w",
}


@dataclass(frozen=True, slots=True)
class Case:
    rule: str
    shape: str  # a SAMPLE_SHAPES name, or "alone"
    text: str
    secret: str


def python_pattern(go_pattern: str) -> str:
    """Go's RE2 syntax as Python's `re` reads it (the few constructs the rules use)."""
    pattern = go_pattern.replace(r"\z", r"\Z")
    for posix, plain in _POSIX_CLASSES.items():
        pattern = pattern.replace(posix, plain)
    return pattern


def secret_group_span(pattern: str, group: int) -> tuple[int, int] | None:
    """Where capture group `group` (1-based) is written in `pattern`, parentheses included."""
    depth_of_group: list[int] = []
    opened: list[tuple[int, bool]] = []  # (position, is the wanted group)
    in_class = escaped = False
    for index, ch in enumerate(pattern):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if pattern[index + 1 : index + 2] == "]":
                continue
        elif ch == "(":
            capturing = not pattern.startswith("(?", index) or pattern.startswith("(?P<", index)
            if capturing:
                depth_of_group.append(index)
            opened.append((index, capturing and len(depth_of_group) == group))
        elif ch == ")" and opened:
            start, wanted = opened.pop()
            if wanted:
                return start, index + 1
    return None


def shannon_entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _draw_secret(secret_pattern: str, entropy: float, flags: int) -> str | None:
    compiled = re.compile(secret_pattern, flags)
    for _ in range(50):
        secret = rstr.xeger(secret_pattern)
        if (
            secret
            and "\n" not in secret
            and compiled.fullmatch(secret)
            and shannon_entropy(secret) >= entropy
        ):
            return secret
    return None


def load_cases(seed: int = 20251203) -> tuple[list[Case], int]:
    """The cases, and how many of the rules with a pattern gave none (a pattern Python's `re`
    cannot read, or a secret the generator could not draw)."""
    random.seed(seed)  # rstr draws from the `random` module's generator
    rules = json.loads(RULES_FILE.read_text(encoding="utf-8"))["rules"]
    cases: list[Case] = []
    without_cases = 0
    for rule in rules:
        rule_cases = _rule_cases(rule)
        without_cases += not rule_cases
        cases.extend(rule_cases)
    return cases, without_cases


def _rule_cases(rule: dict[str, Any]) -> list[Case]:
    """`rule`: one of gitleaks' rules as its JSON reads."""
    try:
        pattern = python_pattern(str(rule["regex"]))
        compiled = re.compile(pattern)
    except re.error:
        return []
    group = int(rule.get("secretGroup", 1) or 1) if compiled.groups else 0
    flags = re.IGNORECASE if pattern.startswith("(?i)") else 0
    if group:
        span = secret_group_span(pattern, group)
        if span is None:
            return []
        secret_pattern = pattern[span[0] : span[1]]
    else:
        secret_pattern = pattern.removeprefix("(?i)")
    try:
        secret = _draw_secret(secret_pattern, float(rule.get("entropy", 0)), flags)
    except (re.error, ValueError, KeyError, IndexError):
        return []
    if secret is None:
        return []
    keywords = rule.get("keywords") or [str(rule["id"]).split("-")[0]]
    identifier = re.sub(r"\W", "_", str(keywords[0]))
    texts = {
        name: shape.replace("{i}", identifier).replace("{s}", secret)
        for name, shape in SAMPLE_SHAPES.items()
    }
    texts["alone"] = f'"{secret}"'
    cases = []
    for shape, text in texts.items():
        match = compiled.search(text)
        if match is not None and match.group(group) == secret:
            cases.append(Case(str(rule["id"]), shape, text, secret))
    return cases
