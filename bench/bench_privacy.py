"""Secret scanning: what privacy costs per request, what it catches and how often it cries wolf.

Three tables, each with detect-secrets as the peer on the same input when it can be installed
(into a throwaway virtualenv this bench creates; "not installed" otherwise):

- speed: 16 KB of ordinary Python scanned whole, and as a keystroke sees it through `SecretMemo`;
- false alarms: the share of files with any finding among Python's own standard library
  sources (`sysconfig.get_paths()["stdlib"]`, on every machine, written by nobody here);
- recall: the share of the labelled credential corpus (`tests/privacy/credential_corpus.py`,
  every shape the rules know, in the files they are kept in) that is caught: the samples with a
  secret in their text, and all samples (some are credential files known by name only), which
  gateway-ls judges by its whole verdict (content, or the file's name).

Usage: python bench/bench_privacy.py [--stride N]   (every Nth stdlib file; default 1, all)
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

from lsp_server.cli.table import render_table
from lsp_server.config.model import DEFAULT_SENSITIVE_GLOBS
from lsp_server.privacy.policy import SecretMemo, SensitivityPolicy, find_secrets, first_secret
from tests.privacy.credential_corpus import load_corpus

SIZE = 16 * 1024
RUNS = 200
PEER = "detect-secrets>=1.5"

# Runs inside the throwaway virtualenv: reads {"files", "corpus", "window"} on stdin, prints
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
        corpus = []
        for index, (name, text) in enumerate(job["corpus"]):
            corpus.append(flagged(written(os.path.join(scratch, str(index)), name, text)))
        window = written(scratch, "window.py", job["window"])
        timings = []
        for _ in range(5):
            started = time.perf_counter()
            flagged(window)
            timings.append((time.perf_counter() - started) * 1e6)
    print(json.dumps({"files": files, "corpus": corpus, "window_us": statistics.median(timings)}))
    """
)


def ordinary_python(size: int = SIZE) -> str:
    source = "".join(inspect.getsource(module) for module in (textwrap, json.decoder))
    return (source * (size // len(source) + 1))[:size]


def stdlib_sources(stride: int) -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)
    return files[::stride]


def median_us(scan: Callable[[int], object], runs: int = RUNS) -> float:
    timings = []
    for index in range(runs):
        started = time.perf_counter()
        scan(index)
        timings.append((time.perf_counter() - started) * 1e6)
    return statistics.median(timings)


def run_peer(
    files: list[Path], corpus: list[tuple[str, str]], window: str
) -> dict[str, Any] | None:
    """detect-secrets' answers, from a virtualenv made for this run; None if it cannot be had."""
    with tempfile.TemporaryDirectory(prefix="bench-privacy-") as scratch:
        env_dir = Path(scratch) / "venv"
        try:
            venv.EnvBuilder(with_pip=True).create(env_dir)
            python = env_dir / ("Scripts" if sys.platform == "win32" else "bin") / "python"
            subprocess.run(
                [str(python), "-m", "pip", "install", "--quiet", PEER],
                check=True,
                capture_output=True,
                timeout=300,
            )
            job = json.dumps({"files": [str(f) for f in files], "corpus": corpus, "window": window})
            done = subprocess.run(
                [str(python), "-c", PEER_SCRIPT],
                input=job,
                check=True,
                capture_output=True,
                text=True,
                timeout=3600,
            )
        except (OSError, subprocess.SubprocessError) as error:
            print(f"detect-secrets: not installed ({type(error).__name__})", file=sys.stderr)
            return None
    return json.loads(done.stdout)


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f} % ({part}/{whole})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stride", type=int, default=1, help="every Nth stdlib file")
    args = parser.parse_args()

    window = ordinary_python()
    cursor = len(window) // 2
    memo = SecretMemo()

    def keystroke(index: int) -> None:
        typed = "x" * (index % 8)  # the cursor's line changes; the rest does not
        memo.first_secret_kind(window[:cursor] + typed, window[cursor:])

    files = stdlib_sources(args.stride)
    texts = [f.read_text(encoding="utf-8", errors="replace") for f in files]
    started = time.perf_counter()
    ours_files = [bool(find_secrets(text)) for text in texts]
    ours_s = time.perf_counter() - started
    samples = load_corpus()
    policy = SensitivityPolicy(DEFAULT_SENSITIVE_GLOBS)
    ours_content = [bool(find_secrets(sample.text)) for sample in samples]
    ours_verdict = [
        found or policy.is_sensitive_path(f"/home/dev/project/{sample.file_name}")
        for sample, found in zip(samples, ours_content, strict=True)
    ]
    peer = run_peer(files, [(sample.file_name, sample.text) for sample in samples], window)
    missing = "not installed"

    speed: list[tuple[str, object]] = [
        ("whole window, gateway-ls rules", f"{median_us(lambda _: first_secret(window)):.0f}"),
        ("keystroke, gateway-ls rules with SecretMemo", f"{median_us(keystroke):.0f}"),
        ("whole window, detect-secrets", f"{peer['window_us']:.0f}" if peer else missing),
    ]
    print(f"\nsecret scan of {SIZE // 1024} KB of ordinary Python, median of runs (µs)\n")
    print(render_table(["scan", "µs"], speed))

    alarms: list[tuple[str, object]] = [
        ("gateway-ls rules", f"{percent(sum(ours_files), len(files))}, {ours_s:.1f} s"),
        ("detect-secrets", percent(sum(peer["files"]), len(files)) if peer else missing),
    ]
    print(f"\nfalse alarms: stdlib files with any finding ({sys.version.split()[0]})\n")
    print(render_table(["scanner", "files flagged"], alarms))

    in_content = [i for i, sample in enumerate(samples) if sample.kind]
    everything = list(range(len(samples)))

    def caught(found: list[bool], among: list[int]) -> str:
        return percent(sum(found[i] for i in among), len(among))

    recall: list[tuple[str, object, object]] = [
        ("gateway-ls, content rules", caught(ours_content, in_content), "-"),
        ("gateway-ls, verdict (content or name)", "-", caught(ours_verdict, everything)),
        (
            "detect-secrets",
            caught(peer["corpus"], in_content) if peer else missing,
            caught(peer["corpus"], everything) if peer else missing,
        ),
    ]
    print("\nrecall: labelled credential corpus caught\n")
    print(render_table(["scanner", "secrets in content", "all samples"], recall))


if __name__ == "__main__":
    main()
