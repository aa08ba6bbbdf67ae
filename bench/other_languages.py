"""Real files in languages other than Python, written by nobody here, for the false-alarm check.

Taken from what is installed: the VS Code client's npm packages (`clients/vscode/node_modules`,
after `npm ci`), the data files of the Python packages installed beside gateway-ls, Debian's
files under `/usr/share` (its shell completions among them), and for Go a sample of a public
repository shipped with its licence (`data/go-example`). At most `MAX_FILES` files a language,
spread evenly over the sorted paths, each at most `MAX_BYTES` (bigger ones are generated or
minified bundles, not code a person edits).
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
NODE_MODULES = REPOSITORY / "clients" / "vscode" / "node_modules"
GO_SAMPLE = Path(__file__).resolve().parent / "data" / "go-example"
DEBIAN_SHARE = Path("/usr/share")
SHELL_COMPLETIONS = DEBIAN_SHARE / "bash-completion" / "completions"
MAX_FILES = 400
MAX_BYTES = 256 * 1024

# Language -> the file name suffixes it is kept in.
LANGUAGES: dict[str, tuple[str, ...]] = {
    "JavaScript": (".js", ".mjs", ".cjs"),
    "TypeScript": (".ts", ".mts", ".cts"),
    "JSON": (".json",),
    "YAML": (".yaml", ".yml"),
    "Markdown": (".md",),
    "shell": (".sh", ".bash"),
    "Go": (".go",),
}


def _roots() -> list[Path]:
    site_packages = Path(sysconfig.get_paths()["purelib"])
    return [
        root for root in (NODE_MODULES, site_packages, DEBIAN_SHARE, GO_SAMPLE) if root.is_dir()
    ]


def _small_file(path: Path) -> bool:
    try:
        return path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_BYTES
    except OSError:
        return False


def _spread(paths: list[Path], count: int) -> list[Path]:
    if len(paths) <= count:
        return paths
    return [paths[index * len(paths) // count] for index in range(count)]


def other_language_files() -> dict[str, list[Path]]:
    """The files of each language, at most `MAX_FILES` of each."""
    found: dict[str, list[Path]] = {language: [] for language in LANGUAGES}
    by_suffix = {
        suffix: language for language, suffixes in LANGUAGES.items() for suffix in suffixes
    }
    for root in _roots():
        for path in root.rglob("*"):
            language = by_suffix.get(path.suffix)
            if language is not None and not path.name.endswith(".d.json") and _small_file(path):
                found[language].append(path)
    if SHELL_COMPLETIONS.is_dir():  # shell scripts without a suffix
        found["shell"] += [path for path in SHELL_COMPLETIONS.iterdir() if _small_file(path)]
    return {language: _spread(sorted(set(paths)), MAX_FILES) for language, paths in found.items()}
