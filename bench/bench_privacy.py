"""Secret scanning: what privacy costs per request, what it catches and how often it cries wolf.

Six tables, with detect-secrets as the peer on the same input when it can be installed (into a
throwaway virtualenv this bench creates; "not installed" otherwise):

- speed: 16 KB of ordinary Python scanned whole, and as a keystroke sees it through `SecretMemo`;
  16 KB of a notebook's JSON (escaped quotes, read again unescaped); what the third round's rules
  (block names, colon-separated files, API-key headers) cost alone on each;
- false alarms: the share of files with any finding, on two corpora written by nobody here:
  Python's own standard library sources (`sysconfig.get_paths()["stdlib"]`) and a large
  third-party package pinned by version (`FALSE_ALARM_PACKAGE`, installed into the same
  throwaway virtualenv);
- false alarms in other languages: JavaScript, TypeScript, JSON, YAML, Markdown, shell and Go
  files from installed packages (`bench/other_languages.py`; the VS Code client's npm
  packages need `cd clients/vscode && npm ci` first);
- outside recall: cases from gitleaks' rule set (`bench/outside_recall.py`), in the sample
  lines gitleaks tests its rules with and alone;
- recall: the share of the labelled credential corpus (`bench/credential_corpus.py`,
  every shape the rules know, in the files they are kept in) that is caught: the samples with a
  secret in their text, and all samples (some are credential files known by name only), which
  gateway-ls judges by its whole verdict (content, or the file's name);
- recall on the third round's classes, class by class.

Usage: python -m bench.bench_privacy [--stride N]   (every Nth file of each false-alarm corpus)
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import time
import venv
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.credential_corpus import load_corpus, round_three
from bench.other_languages import other_language_files
from bench.outside_recall import Case, load_cases
from lsp_server.cli.table import render_table
from lsp_server.config.model import DEFAULT_SENSITIVE_GLOBS
from lsp_server.privacy.block_secrets import BLOCK_NAMED_RULES, BlockNamedRule
from lsp_server.privacy.colon_credentials import ColonFileRule
from lsp_server.privacy.named_secrets import HEADER_RULES
from lsp_server.privacy.pattern_rule import PatternRule
from lsp_server.privacy.policy import SecretMemo, SensitivityPolicy, find_secrets
from lsp_server.privacy.secret_rules import first_secret

SIZE = 16 * 1024
RUNS = 200
PEER = "detect-secrets>=1.5"
FALSE_ALARM_PACKAGE = ("Django", "5.2.19", "django")  # distribution, version, import name
MISSING = "not installed"

# Runs inside the throwaway virtualenv: reads {"files", "samples", "window"} on stdin, prints
# which files and samples have a finding and the median time to scan the window. Each input is
# scanned as a file, as `detect-secrets scan` does, so its file-aware filters apply.
PEER_SCRIPT = textwrap.dedent(
    """
    import json, os, statistics, sys, tempfile, time
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    job = json.load(sys.stdin)

    def flagged(path):
        secrets = SecretsCollection()
        secrets.scan_file(path)
        return bool(list(secrets))

    def written(directory, name, text):
        path = os.path.join(directory, "sample", name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        return path

    with default_settings(), tempfile.TemporaryDirectory() as scratch:
        files = [flagged(path) for path in job["files"]]
        samples = []
        for index, (name, text) in enumerate(job["samples"]):
            samples.append(flagged(written(os.path.join(scratch, str(index)), name, text)))
        window = written(scratch, "window.py", job["window"])
        timings = []
        for _ in range(5):
            started = time.perf_counter()
            flagged(window)
            timings.append((time.perf_counter() - started) * 1e6)
    print(json.dumps({"files": files, "samples": samples, "window_us": statistics.median(timings)}))
    """
)

# The file a gitleaks sample shape is written in, so detect-secrets applies its file-type rules.
_SHAPE_FILES = {
    "ini": "config.ini",
    "json": "config.json",
    "xml": "config.xml",
    "yaml": "config.yaml",
    "C#": "Config.cs",
    "go": "config.go",
    "java": "Config.java",
    "kotlin": "Config.kt",
    "php": "config.php",
    "python": "config.py",
    "csv": "config.csv",
    "logstash": "logstash.conf",
    "make": "Makefile",
    "alone": "notes.txt",
}


def ordinary_python(size: int = SIZE) -> str:
    source = "".join(inspect.getsource(module) for module in (textwrap, json.decoder))
    return (source * (size // len(source) + 1))[:size]


def notebook_json(size: int = SIZE) -> str:
    """A notebook's JSON whose cells hold ordinary Python: every quote in the code escaped."""
    lines = ordinary_python(size).splitlines(keepends=True)
    cells = [{"cell_type": "code", "source": lines[i : i + 20]} for i in range(0, len(lines), 20)]
    return json.dumps({"cells": cells}, indent=1)[:size]


ROUND_THREE_RULES: tuple[BlockNamedRule | ColonFileRule | PatternRule, ...] = (
    *BLOCK_NAMED_RULES,
    ColonFileRule(),
    *HEADER_RULES,
)


def round_three_rules(text: str) -> None:
    lowered = text.lower()
    for rule in ROUND_THREE_RULES:
        for _ in rule.findings(text, lowered):
            pass


def python_sources(root: Path, stride: int) -> list[Path]:
    files = root.rglob("*.py")
    kept = sorted(p for p in files if "site-packages" not in p.relative_to(root).parts)
    return kept[::stride]


def median_us(scan: Callable[[int], object], runs: int = RUNS) -> float:
    timings = []
    for index in range(runs):
        started = time.perf_counter()
        scan(index)
        timings.append((time.perf_counter() - started) * 1e6)
    return statistics.median(timings)


class ThrowawayEnv:
    """A virtualenv for the peer and the third-party corpus, made for this run."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory / "venv"
        self.python = self._dir / ("Scripts" if sys.platform == "win32" else "bin") / "python"
        self._made = False

    def install(self, requirement: str) -> bool:
        try:
            if not self._made:
                venv.EnvBuilder(with_pip=True).create(self._dir)
                self._made = True
            subprocess.run(
                [str(self.python), "-m", "pip", "install", "--quiet", requirement],
                check=True,
                capture_output=True,
                timeout=600,
            )
        except (OSError, subprocess.SubprocessError) as error:
            print(f"{requirement}: {MISSING} ({type(error).__name__})", file=sys.stderr)
            return False
        return True

    def package_dir(self, import_name: str) -> Path:
        done = subprocess.run(
            [str(self.python), "-c", f"import {import_name}; print({import_name}.__path__[0])"],
            check=True,
            capture_output=True,
            text=True,
        )
        return Path(done.stdout.strip())

    def run_peer(
        self, files: list[Path], samples: list[tuple[str, str]], window: str
    ) -> dict[str, Any] | None:
        job = json.dumps({"files": [str(f) for f in files], "samples": samples, "window": window})
        try:
            done = subprocess.run(
                [str(self.python), "-c", PEER_SCRIPT],
                input=job,
                check=True,
                capture_output=True,
                text=True,
                timeout=3600,
            )
        except (OSError, subprocess.SubprocessError) as error:
            print(f"detect-secrets: failed ({type(error).__name__})", file=sys.stderr)
            return None
        found: dict[str, Any] = json.loads(done.stdout)
        return found


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f} % ({part}/{whole})" if whole else "-"


def flagged_files(files: list[Path]) -> list[bool]:
    return [bool(find_secrets(f.read_text(encoding="utf-8", errors="replace"))) for f in files]


def case_file(case: Case) -> str:
    return _SHAPE_FILES[case.shape.split(" ")[0]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stride", type=int, default=1, help="every Nth file of each corpus")
    args = parser.parse_args()

    window = ordinary_python()
    cursor = len(window) // 2
    memo = SecretMemo()

    def keystroke(index: int) -> None:
        typed = "x" * (index % 8)  # the cursor's line changes; the rest does not
        memo.first_secret_kind(window[:cursor] + typed, window[cursor:])

    notebook = notebook_json()
    samples = load_corpus()
    classes = round_three(samples)
    cases, rules_without_cases = load_cases()
    other = {name: paths[:: args.stride] for name, paths in other_language_files().items()}
    with tempfile.TemporaryDirectory(prefix="bench-privacy-") as scratch:
        env = ThrowawayEnv(Path(scratch))
        distribution, version, import_name = FALSE_ALARM_PACKAGE
        corpora = {f"stdlib ({sys.version.split()[0]})": Path(sysconfig.get_paths()["stdlib"])}
        if env.install(f"{distribution}=={version}"):
            corpora[f"{distribution} {version}"] = env.package_dir(import_name)
        files = {name: python_sources(root, args.stride) for name, root in corpora.items()}
        started = time.perf_counter()
        ours_files = {name: flagged_files(paths) for name, paths in files.items()}
        ours_s = time.perf_counter() - started
        ours_other = {name: flagged_files(paths) for name, paths in other.items()}
        peer = None
        if env.install(PEER):
            every_file = [path for paths in (*files.values(), *other.values()) for path in paths]
            peer_inputs = [(s.file_name, s.text) for s in samples]
            peer_inputs += [(case_file(case), case.text) for case in cases]
            peer = env.run_peer(every_file, peer_inputs, window)

    peer_files: dict[str, list[bool]] = {}
    peer_other: dict[str, list[bool]] = {}
    peer_corpus: list[bool] = []
    peer_cases: list[bool] = []
    if peer is not None:
        offset = 0
        for name, paths in files.items():
            peer_files[name] = peer["files"][offset : offset + len(paths)]
            offset += len(paths)
        for name, paths in other.items():
            peer_other[name] = peer["files"][offset : offset + len(paths)]
            offset += len(paths)
        peer_corpus, peer_cases = peer["samples"][: len(samples)], peer["samples"][len(samples) :]

    speed: list[tuple[str, object]] = [
        ("whole window, gateway-ls rules", f"{median_us(lambda _: first_secret(window)):.0f}"),
        ("keystroke, gateway-ls rules with SecretMemo", f"{median_us(keystroke):.0f}"),
        ("whole window, detect-secrets", f"{peer['window_us']:.0f}" if peer else MISSING),
        (
            "whole window, third-round rules alone",
            f"{median_us(lambda _: round_three_rules(window)):.0f}",
        ),
        ("notebook JSON, gateway-ls rules", f"{median_us(lambda _: first_secret(notebook)):.0f}"),
        (
            "notebook JSON, third-round rules alone",
            f"{median_us(lambda _: round_three_rules(notebook)):.0f}",
        ),
    ]
    print(f"\nsecret scan of {SIZE // 1024} KB of ordinary Python, median of runs (µs)\n")
    print(render_table(["scan", "µs"], speed))

    in_context = [i for i, case in enumerate(cases) if case.shape != "alone"]
    alone = [i for i, case in enumerate(cases) if case.shape == "alone"]
    ours_cases = [bool(find_secrets(case.text)) for case in cases]

    def caught(found: list[bool], among: list[int]) -> str:
        return percent(sum(found[i] for i in among), len(among))

    corpus_names = list(files)
    headers = ["scanner", *(f"false alarms: {name}" for name in corpus_names)]
    headers += ["recall: gitleaks cases in sample lines", "recall: gitleaks secrets alone"]
    ours_row = [percent(sum(ours_files[name]), len(files[name])) for name in corpus_names]
    ours_row[0] += f", {ours_s:.1f} s all corpora"
    rows: list[list[object]] = [
        ["gateway-ls rules", *ours_row, caught(ours_cases, in_context), caught(ours_cases, alone)]
    ]
    if peer is not None:
        peer_row = [percent(sum(peer_files[name]), len(files[name])) for name in corpus_names]
        rows.append(
            ["detect-secrets", *peer_row, caught(peer_cases, in_context), caught(peer_cases, alone)]
        )
    else:
        rows.append(["detect-secrets", *([MISSING] * (len(headers) - 1))])
    gitleaks_rules = len({case.rule for case in cases})
    print(
        "\nfalse alarms (files with any finding) and outside recall (gitleaks v8.30.1: "
        f"{gitleaks_rules} rules gave cases, {rules_without_cases} none)\n"
    )
    print(render_table(headers, rows))

    policy = SensitivityPolicy(DEFAULT_SENSITIVE_GLOBS)
    ours_content = [bool(find_secrets(sample.text)) for sample in samples]
    ours_verdict = [
        found or policy.is_sensitive_path(f"/home/dev/project/{sample.file_name}")
        for sample, found in zip(samples, ours_content, strict=True)
    ]
    with_secret = [i for i, sample in enumerate(samples) if sample.kind]
    everything = list(range(len(samples)))
    recall: list[tuple[str, object, object]] = [
        ("gateway-ls, content rules", caught(ours_content, with_secret), "-"),
        ("gateway-ls, verdict (content or name)", "-", caught(ours_verdict, everything)),
        (
            "detect-secrets",
            caught(peer_corpus, with_secret) if peer else MISSING,
            caught(peer_corpus, everything) if peer else MISSING,
        ),
    ]
    print("\nrecall: labelled credential corpus caught\n")
    print(render_table(["scanner", "secrets in content", "all samples"], recall))

    other_rows: list[list[object]] = []
    for name, paths in other.items():
        reached = [not flagged for flagged in ours_other[name]]
        peer_reached = [not flagged for flagged in peer_other.get(name, [])]
        other_rows.append(
            [
                name,
                percent(sum(reached), len(paths)),
                percent(sum(peer_reached), len(paths)) if peer else MISSING,
            ]
        )
    print("\nother languages: files with no finding (they reach the remote)\n")
    print(render_table(["language", "gateway-ls", "detect-secrets"], other_rows))

    class_rows: list[list[object]] = []
    for name, members in classes.items():
        indexes = [samples.index(member) for member in members]
        class_rows.append(
            [
                name,
                caught(ours_content, indexes),
                caught(peer_corpus, indexes) if peer else MISSING,
            ]
        )
    print("\nrecall: the third round's classes\n")
    print(render_table(["class", "gateway-ls", "detect-secrets"], class_rows))


if __name__ == "__main__":
    main()
