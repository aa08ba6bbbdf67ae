"""The configuration in force: the file's, with the editor's `gatewayLs` overrides merged over it.

Editor settings are not trusted like the file: a repository can ship them
(`.vscode/settings.json`, `.zed/settings.json`), so cloning one is enough for them to arrive.
They may tune knobs that can neither leak nor run anything (deadlines, hedging, threads, token
caps, turning the local model on or off) and make privacy stricter (more sensitive globs, added
to the file's; redaction on; offline "always"; context beyond the file off, or a smaller local
context budget). Everything else (endpoints and their URLs and key variables, model paths, the
gateway section, anything loosening privacy) comes only from the file or the command line: such
a setting is refused, named with the reason, and the rest of the override still applies.

Either half may change at run time (hot reload, `didChangeConfiguration`); a change that does not
validate raises `ConfigError` and leaves the configuration in force untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lsp_server.config.keys import EditorAccess, declared_fields
from lsp_server.config.loader import merge_overrides
from lsp_server.config.model import Config, LocalConfig, RoutingConfig

# The sections an editor may touch at all, and how each of their keys is declared
# (`key(editor=...)` in `config.model`): "free" knobs pass, "stricter" ones pass only as far as
# they tighten privacy (below), "file" ones are refused.
_EDITOR_SECTIONS: dict[str, type] = {"routing": RoutingConfig, "local": LocalConfig}
EDITOR_ACCESS: dict[tuple[str, str], EditorAccess] = {
    (section, field.name): info.editor
    for section, cls in _EDITOR_SECTIONS.items()
    for field, info in declared_fields(cls)
}
_FROM_THE_FILE_ONLY = {
    "endpoints": "endpoints, their URLs and key variables come only from the config file",
    "gateway": "the gateway section comes only from the config file",
}
_OFFLINE_STRICTNESS = {"never": 0, "auto": 0, "always": 1}


@dataclass(frozen=True, slots=True)
class RefusedSetting:
    """An editor setting that was not applied; `key` is dotted (`routing.redact_secrets`)."""

    key: str
    why: str


@dataclass(frozen=True, slots=True)
class ScreenedOverrides:
    allowed: dict[str, Any]
    refused: tuple[RefusedSetting, ...]


def screen_overrides(file_config: Config, overrides: Mapping[str, Any]) -> ScreenedOverrides:
    """What of the editor's `overrides` may apply over `file_config`, and what is refused.

    Values are never echoed in the reasons: a refused URL may carry a credential. Keys the
    configuration does not know pass through, so validation reports them as unknown.
    """
    allowed: dict[str, Any] = {}
    refused: list[RefusedSetting] = []
    for section, value in overrides.items():
        if value is None:
            continue
        if section in _FROM_THE_FILE_ONLY:
            refused.append(RefusedSetting(section, _FROM_THE_FILE_ONLY[section]))
        elif section in ("routing", "local") and isinstance(value, Mapping):
            kept: dict[str, Any] = {}
            for key, item in value.items():
                if item is None:
                    continue
                verdict = _screen_knob(file_config, section, key, item)
                if isinstance(verdict, RefusedSetting):
                    refused.append(verdict)
                elif verdict is not _DROP:
                    kept[key] = verdict
            allowed[section] = kept
        else:
            allowed[section] = value  # malformed or unknown: validation names it
    return ScreenedOverrides(allowed, tuple(refused))


_DROP = object()  # the setting repeats what the file says: nothing to apply, nothing to refuse


def _screen_knob(file_config: Config, section: str, key: str, value: Any) -> Any:
    dotted = f"{section}.{key}"
    routing = file_config.routing
    access = EDITOR_ACCESS.get((section, key))
    if access is None:
        return value  # unknown: validation names it
    if access == "free":
        return value
    if (section, key) == ("routing", "sensitive_globs"):
        if not isinstance(value, list | tuple):
            return value  # validation reports the type
        added = [glob for glob in value if glob not in routing.sensitive_globs]
        return [*routing.sensitive_globs, *added]  # added to the file's, never instead of them
    if (section, key) == ("routing", "redact_secrets"):
        if value is True or value == routing.redact_secrets:
            return value
        if value is False:
            return RefusedSetting(dotted, "turning secret redaction off is for the config file")
        return value
    if (section, key) == ("routing", "offline"):
        if value not in _OFFLINE_STRICTNESS:
            return value
        if _OFFLINE_STRICTNESS[value] >= _OFFLINE_STRICTNESS[routing.offline]:
            return value
        return RefusedSetting(
            dotted, 'the config file says offline "always"; only it can lift that'
        )
    if (section, key) == ("routing", "context"):
        if value is False or value == routing.context:
            return value
        if value is True:
            return RefusedSetting(dotted, "the config file turned context off; only it can")
        return value
    if (section, key) == ("local", "context_tokens"):
        if not isinstance(value, int) or isinstance(value, bool):
            return value  # validation reports the type
        in_file = file_config.local.context_tokens
        if value <= (in_file if in_file is not None else 0):
            return value
        if in_file is None:
            return RefusedSetting(
                dotted,
                "the config file leaves the context budget to the model's preset; "
                "an editor may only turn it off (0)",
            )
        return RefusedSetting(dotted, "an editor may lower the context budget, not raise it")
    # A "stricter" key without a rule above is refused like a file-only one: the safe side.
    if (section, key) == ("local", "model_path"):
        return RefusedSetting(dotted, "model paths come only from the config file")
    return RefusedSetting(dotted, "this setting comes only from the config file")


class Settings:
    """The file's configuration with the screened editor overrides over it.

    `on_refused` hears of each refused editor setting once per key, however often the editor
    sends it again.
    """

    def __init__(
        self,
        file_config: Config,
        *,
        on_refused: Callable[[RefusedSetting, str], None] | None = None,
    ) -> None:
        self._file_config = file_config
        self._overrides: Mapping[str, Any] = {}
        self._origin = "editor settings"
        self._on_refused = on_refused
        self._reported: set[str] = set()
        self.effective = file_config

    @property
    def file_config(self) -> Config:
        return self._file_config

    def with_file(self, file_config: Config) -> Config:
        effective = self._merge(file_config, self._overrides, self._origin)
        self._file_config, self.effective = file_config, effective
        return effective

    def with_overrides(self, overrides: Mapping[str, Any], *, origin: str) -> Config:
        effective = self._merge(self._file_config, overrides, origin)
        self._overrides, self._origin, self.effective = overrides, origin, effective
        return effective

    def _merge(self, file_config: Config, overrides: Mapping[str, Any], origin: str) -> Config:
        if not overrides:
            return file_config
        screened = screen_overrides(file_config, overrides)
        for refusal in screened.refused:
            if refusal.key not in self._reported:
                self._reported.add(refusal.key)
                if self._on_refused is not None:
                    self._on_refused(refusal, origin)
        return merge_overrides(file_config, screened.allowed, origin=origin)
