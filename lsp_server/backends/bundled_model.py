"""The local model file of a preset, shipped as PyPI chunk packages or pulled from the hub.

The default, Gemma 3 270M (Q4_K_M), comes in four PyPI packages; the first start joins the parts
into the user cache directory (other presets alike, when their packages are installed). A file
that `gateway-ls model pull` fetched is found in the hub cache instead. Joining is atomic (temp
file, then rename) and guarded by a lock file so that two servers starting at once do not clash.
The SHA-256 is checked once after joining (or pulling) and remembered in a sidecar file keyed by
size and mtime, so later starts do not re-read the file; a file whose size or mtime changed is
hashed again and rebuilt if it is damaged.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.resources
import importlib.util
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import platformdirs

from lsp_server.backends import model_hub
from lsp_server.backends.file_digest import sha256_of
from lsp_server.backends.model_presets import (
    DEFAULT_PRESET,
    PRESETS,
    ModelPreset,
    preset_named,
)
from lsp_server.config.model import LocalConfig

Progress = Callable[[str, float | None], None]

CACHE_DIR_ENV = "GATEWAY_LS_CACHE_DIR"
BUNDLED_MODEL_FILE = PRESETS[DEFAULT_PRESET].file_name
INSTALL_HINT = PRESETS[DEFAULT_PRESET].install_hint
GGUF_MAGIC = b"GGUF"

_COPY_BLOCK = 4 * 1024 * 1024
# A lock older than this belongs to a process that died while joining the parts.
_STALE_LOCK_S = 600.0
_LOCK_POLL_S = 0.2


class ModelUnavailable(Exception):
    """The local model file cannot be provided; the message says what to do."""


def cache_dir() -> Path:
    """Where gateway-ls keeps generated files: `$GATEWAY_LS_CACHE_DIR` or the user cache dir."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    return platformdirs.user_cache_path("gateway-ls")


def default_model_path() -> Path:
    return preset_model_path(PRESETS[DEFAULT_PRESET])


def preset_model_path(preset: ModelPreset) -> Path:
    """Where the preset's parts are joined."""
    return cache_dir() / "models" / preset.file_name


def resolve_model_path(config: LocalConfig, progress: Progress | None = None) -> Path:
    """The GGUF file to load: `[local] model_path` if set (checked), else the preset's file."""
    if not config.model_path:
        return ensure_preset_model(preset_named(config.model), progress)
    path = Path(os.path.expandvars(config.model_path)).expanduser()
    if not path.is_file():
        raise ModelUnavailable(
            f"model file not found: {path} (set by [local] model_path); "
            "point it at a .gguf file or leave it empty for the bundled model"
        )
    check_gguf(path)
    return path


def check_gguf(path: Path) -> None:
    try:
        with path.open("rb") as file:
            magic = file.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise ModelUnavailable(f"cannot read model file {path}: {exc.strerror}") from exc
    if magic != GGUF_MAGIC:
        raise ModelUnavailable(
            f"{path} is not a GGUF model file (it does not start with 'GGUF'); "
            "llama.cpp needs a .gguf model"
        )


def ensure_bundled_model(progress: Progress | None = None) -> Path:
    """Return the path of the verified bundled default model, joining its parts if needed."""
    return ensure_preset_model(PRESETS[DEFAULT_PRESET], progress)


def ensure_preset_model(preset: ModelPreset, progress: Progress | None = None) -> Path:
    """The verified file of `preset`: joined before, pulled from the hub, or joined now from
    its installed PyPI parts."""
    target = preset_model_path(preset)
    if _trusted(target, preset.sha256, progress):
        return target
    pulled = model_hub.cached_file(preset, cache_dir())
    if pulled is not None and _trusted(pulled, preset.sha256, progress, _hub_sidecar(preset)):
        return pulled
    parts = _installed_parts(preset)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(target.with_name(target.name + ".lock")):
        # Another process may have finished the file while we waited for the lock.
        if not _trusted(target, preset.sha256, progress):
            _assemble(preset, parts, target, progress)
    return target


def preset_installed(preset: ModelPreset) -> bool:
    """Whether the preset's file can be had without a download: joined before, pulled, or its
    PyPI parts installed (not verified here: loading verifies)."""
    if preset_model_path(preset).is_file():
        return True
    try:
        if preset.parts and all(importlib.util.find_spec(m) for m, _ in preset.parts):
            return True
    except (ImportError, ValueError):
        pass
    # huggingface_hub is imported only where a pull left the repository's folder.
    pulled = (
        preset.hub is not None
        and (
            model_hub.hub_cache_dir(cache_dir()) / f"models--{preset.hub.repo.replace('/', '--')}"
        ).is_dir()
    )
    with contextlib.suppress(ImportError, ValueError):
        return pulled and model_hub.cached_file(preset, cache_dir()) is not None
    return False


def _installed_parts(preset: ModelPreset) -> list[Path]:
    """The chunk files of `preset`, in order; ModelUnavailable names what to install."""
    pull = f" or run: gateway-ls model pull {preset.name}" if preset.hub else ""
    if not preset.parts:
        raise ModelUnavailable(
            f"the local model {preset.name} is not downloaded; run: {preset.install_hint} "
            "(or set [local] model_path to a .gguf file)"
        )
    paths: list[Path] = []
    for module_name, file_name in preset.parts:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ModelUnavailable(
                f"the local model {preset.name} is not installed: {preset.install_hint}{pull} "
                "(or set [local] model_path to a .gguf file)"
            ) from exc
        path = Path(str(importlib.resources.files(module).joinpath("data", file_name)))
        if not path.is_file():
            raise ModelUnavailable(
                f"the local model {preset.name} is incomplete (missing {path}); reinstall it: "
                f"{preset.install_hint.replace('pip install', 'pip install --force-reinstall')}"
            )
        paths.append(path)
    return paths


def _hub_sidecar(preset: ModelPreset) -> Path:
    return preset_model_path(preset).with_name(preset.file_name + ".pulled.verified")


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _trusted(
    target: Path, expected_sha256: str, progress: Progress | None, sidecar: Path | None = None
) -> bool:
    """True if `target` holds the expected bytes; hashes only when the sidecar does not vouch."""
    sidecar = sidecar or _sidecar(target)
    try:
        stat = target.stat()
    except FileNotFoundError:
        return False
    stamp = {"sha256": expected_sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    try:
        if json.loads(sidecar.read_text()) == stamp:
            return True
    except (OSError, ValueError):
        pass
    if progress:
        progress(f"verifying local model {target.name}", None)
    if sha256_of(target) != expected_sha256:
        return False
    _write_sidecar(target, expected_sha256, sidecar)
    return True


def _write_sidecar(target: Path, sha256: str, sidecar: Path | None = None) -> None:
    stat = target.stat()
    stamp = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    sidecar = sidecar or _sidecar(target)
    sidecar.parent.mkdir(parents=True, exist_ok=True)
    temp = sidecar.with_name(f"{sidecar.name}.{os.getpid()}.tmp")
    temp.write_text(json.dumps(stamp))
    os.replace(temp, sidecar)


def _assemble(
    preset: ModelPreset, parts: list[Path], target: Path, progress: Progress | None
) -> None:
    """Join the parts into a temp file, hashing as we go; rename into place only if it matches."""
    _sidecar(target).unlink(missing_ok=True)
    total = sum(p.stat().st_size for p in parts)
    done = 0
    digest = hashlib.sha256()
    fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".part")
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as source:
                    while block := source.read(_COPY_BLOCK):
                        out.write(block)
                        digest.update(block)
                        done += len(block)
                        if progress:
                            progress(f"preparing local model {preset.name}", done / total)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != preset.sha256:
            raise ModelUnavailable(
                f"the local model {preset.name}'s packages are damaged (SHA-256 mismatch); "
                f"reinstall them: "
                f"{preset.install_hint.replace('pip install', 'pip install --force-reinstall')}"
            )
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)
    _write_sidecar(target, preset.sha256)


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """A cross-process lock: the lock file is created with O_EXCL and removed on exit."""
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            if _is_stale(lock):
                lock.unlink(missing_ok=True)
            else:
                time.sleep(_LOCK_POLL_S)
    try:
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        yield
    finally:
        lock.unlink(missing_ok=True)


def _is_stale(lock: Path) -> bool:
    """The holder is gone: its process no longer exists (POSIX) or the lock is very old."""
    try:
        age = time.time() - lock.stat().st_mtime
        owner = lock.read_text().strip()
    except FileNotFoundError:
        return False
    if age > _STALE_LOCK_S:
        return True
    if os.name != "posix" or not owner.isdigit():
        return False
    try:
        os.kill(int(owner), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
