"""The SHA-256 of a file, read in blocks so a model file of a gigabyte costs little memory."""

from __future__ import annotations

import hashlib
from pathlib import Path

_BLOCK = 4 * 1024 * 1024


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()
