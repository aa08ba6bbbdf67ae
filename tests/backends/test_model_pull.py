"""`gateway-ls model pull` against a loopback hub: the pinned file is fetched once, verified by
SHA-256, found again offline, refused (and removed) when its bytes do not match, and then used
by the local backend's model resolution."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lsp_server.backends import model_hub
from lsp_server.backends.bundled_model import (
    CACHE_DIR_ENV,
    ModelUnavailable,
    ensure_preset_model,
)
from lsp_server.backends.model_presets import (
    PRESETS,
    QWEN_CODER_0_5B,
    QWEN_CODER_1_5B_BASE,
    HubFile,
    ModelPreset,
    licence_path,
)
from lsp_server.config.model import LOCAL_MODEL_PRESETS
from tests.support.fake_hub import FakeHub, fake_hub
from tests.support.real_tools import bundled_model_package

CONTENT = b"GGUF" + bytes(range(256)) * 64
TINY_HUB = HubFile(repo="example/tiny-GGUF", filename="tiny.gguf", revision="main")
TINY = ModelPreset(
    name="tiny-test",
    file_name="tiny.gguf",
    size=len(CONTENT),
    sha256=hashlib.sha256(CONTENT).hexdigest(),
    parts=(("tiny_model_part_not_installed", "part01.bin"),),
    install_hint="pip install tiny-model-parts",
    licence=QWEN_CODER_0_5B.licence,
    hub=TINY_HUB,
)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    with fake_hub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        yield hub


def test_pull_fetches_verifies_and_finds_it_again_offline(hub: FakeHub, tmp_path: Path) -> None:
    hub.publish(TINY_HUB.repo, TINY_HUB.revision, TINY_HUB.filename, CONTENT)

    pulled = model_hub.pull(TINY, tmp_path)
    again = model_hub.pull(TINY, tmp_path, offline=True)

    assert pulled.read_bytes() == CONTENT
    assert again == pulled
    assert hub.downloads == 1
    assert str(pulled).startswith(str(tmp_path / "huggingface"))


def test_a_pulled_preset_is_what_the_local_model_loads(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.publish(TINY_HUB.repo, TINY_HUB.revision, TINY_HUB.filename, CONTENT)
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    pulled = model_hub.pull(TINY, tmp_path)

    # The parts are not installed: resolution finds the pulled file instead.
    assert ensure_preset_model(TINY) == pulled


def test_a_file_whose_hash_does_not_match_is_refused_and_removed(
    hub: FakeHub, tmp_path: Path
) -> None:
    tampered = CONTENT[:-1] + b"!"
    hub.publish(TINY_HUB.repo, TINY_HUB.revision, TINY_HUB.filename, tampered)

    with pytest.raises(model_hub.PullFailed, match="SHA-256 mismatch"):
        model_hub.pull(TINY, tmp_path)

    assert model_hub.cached_file(TINY, tmp_path) is None
    blobs = list((tmp_path / "huggingface").rglob("blobs/*"))
    assert blobs == []


def test_offline_without_a_cached_file_says_so(hub: FakeHub, tmp_path: Path) -> None:
    with pytest.raises(model_hub.PullFailed, match="offline"):
        model_hub.pull(TINY, tmp_path, offline=True)
    assert hub.downloads == 0


def _cli(
    tmp_path: Path, hub: FakeHub, *args: str, offline: bool = False
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GATEWAY_LS_CONFIG", "HF_HUB_OFFLINE")}
    env.update(
        {CACHE_DIR_ENV: str(tmp_path / "cache"), "HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path)}
    )
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "lsp_server", "model", "pull", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_refuses_a_real_preset_served_with_other_bytes(hub: FakeHub, tmp_path: Path) -> None:
    pinned = QWEN_CODER_0_5B.hub
    assert pinned is not None
    hub.publish(pinned.repo, pinned.revision, pinned.filename, CONTENT)

    result = _cli(tmp_path, hub, QWEN_CODER_0_5B.name)

    assert result.returncode == 1, result.stderr
    assert "SHA-256 mismatch" in result.stderr
    assert QWEN_CODER_0_5B.sha256 in result.stderr
    assert hub.downloads == 1


def test_cli_fetches_a_base_preset_at_its_pinned_commit_and_checks_it(
    hub: FakeHub, tmp_path: Path
) -> None:
    pinned = QWEN_CODER_1_5B_BASE.hub
    assert pinned is not None and len(pinned.revision) == 40
    hub.publish(pinned.repo, pinned.revision, pinned.filename, CONTENT)

    result = _cli(tmp_path, hub, QWEN_CODER_1_5B_BASE.name)

    assert result.returncode == 1, result.stderr
    assert f"at revision {pinned.revision}" in result.stderr
    assert "SHA-256 mismatch" in result.stderr
    assert hub.downloads == 1


def test_a_base_preset_not_pulled_names_the_pull_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))

    with pytest.raises(ModelUnavailable, match=r"gateway-ls model pull qwen2\.5-coder-1\.5b-base"):
        ensure_preset_model(QWEN_CODER_1_5B_BASE)


def test_cli_offline_with_an_empty_cache_fails_without_asking_the_hub(
    hub: FakeHub, tmp_path: Path
) -> None:
    result = _cli(tmp_path, hub, "qwen2.5-coder-1.5b", offline=True)

    assert result.returncode == 1
    assert "not in the cache (offline)" in result.stderr
    assert hub.downloads == 0


def test_cli_unknown_preset_is_bad_usage(hub: FakeHub, tmp_path: Path) -> None:
    result = _cli(tmp_path, hub, "qwen2.5-coder-70b")

    assert result.returncode == 2
    assert "qwen2.5-coder-0.5b" in result.stderr


def test_every_preset_is_configurable_pinned_and_licensed() -> None:
    bundled_model_package()  # the bundled model's licence comes with it
    assert tuple(PRESETS) == LOCAL_MODEL_PRESETS
    for preset in PRESETS.values():
        assert len(preset.sha256) == 64
        assert licence_path(preset).is_file(), preset.name
    qwen_licence = licence_path(QWEN_CODER_0_5B).read_text()
    assert "Apache License" in qwen_licence and "Version 2.0" in qwen_licence
