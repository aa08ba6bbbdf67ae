"""What each configuration key means, as declared on its field in `config.model`.

Every field of the configuration's dataclasses carries a `KeyInfo` in its metadata (`key(...)`):
its one-line meaning, the check its value must pass beyond its type, whether an editor's
settings may set it, and, where the default is not a plain value, the default in words. The
field itself gives the type and the default. The validator (`config/validation.py`), the editor
screen (`config/editor_settings.py`) and the generated configuration reference all read this one
declaration, so a key cannot be known to one of them and missing from another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

# "free": a knob that can neither leak nor run anything; "stricter": privacy an editor may only
# tighten; "file": from the configuration file (or the command line) alone.
EditorAccess = Literal["free", "stricter", "file"]

_METADATA_KEY = "gateway_ls_key"


@dataclass(frozen=True, slots=True)
class Check:
    """A rule a value must pass beyond its type: a problem in words, or None; and the rule's
    range as the reference states it."""

    test: Callable[[Any], str | None]
    bounds: str


@dataclass(frozen=True, slots=True)
class KeyInfo:
    meaning: str
    check: Check | None = None
    editor: EditorAccess = "file"
    default: str = ""  # the default in words, where the field's own is not the whole story


def key(
    meaning: str,
    *,
    check: Check | None = None,
    editor: EditorAccess = "file",
    default: str = "",
) -> dict[str, KeyInfo]:
    """A field's metadata: `field(default=..., metadata=key("what it is", ...))`."""
    return {_METADATA_KEY: KeyInfo(meaning, check, editor, default)}


def key_info(field: dataclasses.Field[Any]) -> KeyInfo:
    info = field.metadata.get(_METADATA_KEY)
    if not isinstance(info, KeyInfo):
        raise TypeError(f"configuration field {field.name} declares no key(...)")
    return info


def declared_fields(cls: type) -> Iterator[tuple[dataclasses.Field[Any], KeyInfo]]:
    """The fields of a configuration dataclass that are keys of the file, each with its info."""
    for field in dataclasses.fields(cls):
        if field.name != "source":
            yield field, key_info(field)
