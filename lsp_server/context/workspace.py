"""The workspace folders, and the only files the store reads: regular files inside them, by
their real path (a symbolic link that leads out of the folders is not followed), within a size
cap. Only `file:` documents inside the folders contribute context."""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit


def file_path(uri: str) -> Path | None:
    """The local path of a `file:` URI; None for any other scheme or a remote share."""
    parts = urlsplit(uri)
    if parts.scheme.lower() != "file" or parts.netloc not in ("", "localhost"):
        return None
    path = unquote(parts.path)
    if len(path) > 2 and path[0] == "/" and path[2] == ":":  # file:///C:/x on Windows
        path = path[1:]
    return Path(path) if path else None


class WorkspaceFolders:
    def __init__(self, uris: Sequence[str] = ()) -> None:
        roots = (file_path(uri) for uri in uris)
        self.roots = tuple(Path(os.path.realpath(root)) for root in roots if root is not None)

    def relative(self, path: Path) -> str | None:
        """`path` relative to the folder holding it (its real path), in forward slashes;
        None when it is in none of them."""
        try:
            real = Path(os.path.realpath(path))
        except (OSError, ValueError):
            return None
        for root in self.roots:
            if real.is_relative_to(root):
                return PurePosixPath(*real.relative_to(root).parts).as_posix()
        return None

    def read(self, path: Path, max_bytes: int) -> str | None:
        """The text of a regular file inside the folders of at most `max_bytes`, or None."""
        if self.relative(path) is None:
            return None
        try:
            fd = os.open(os.path.realpath(path), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except (OSError, ValueError):
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
                return None
            data = os.read(fd, max_bytes + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(data) > max_bytes:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None
