"""The configuration in force: the file's, with the editor's `gatewayLs` overrides merged over it.

Either half may change at run time (hot reload, `didChangeConfiguration`); a change that does not
validate raises `ConfigError` and leaves the configuration in force untouched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lsp_server.config.loader import merge_overrides
from lsp_server.config.model import Config


class Settings:
    def __init__(self, file_config: Config) -> None:
        self._file_config = file_config
        self._overrides: Mapping[str, Any] = {}
        self._origin = "editor settings"
        self.effective = file_config

    def with_file(self, file_config: Config) -> Config:
        effective = self._merge(file_config, self._overrides, self._origin)
        self._file_config, self.effective = file_config, effective
        return effective

    def with_overrides(self, overrides: Mapping[str, Any], *, origin: str) -> Config:
        effective = self._merge(self._file_config, overrides, origin)
        self._overrides, self._origin, self.effective = overrides, origin, effective
        return effective

    @staticmethod
    def _merge(file_config: Config, overrides: Mapping[str, Any], origin: str) -> Config:
        if not overrides:
            return file_config
        return merge_overrides(file_config, overrides, origin=origin)
