"""JSON bodies (JSON-RPC messages, the gateway's requests and what it sends upstream) read and
written with orjson, with the standard library's exact behaviour.

orjson parses and writes a message several times faster than `json` (a 120 KB `didOpen` in a
tenth of the time). Whatever orjson reads otherwise than `json` goes through `json` as the
standard library would have read it, so no message is read differently: what it refuses (NaN,
a body in UTF-16, nesting past its depth) and integers past 64 bits, which it reads as floats.
Written, what orjson cannot encode (integers past 64 bits) goes through `json`; in a JSON-RPC
message a float that is not finite becomes `null` where `json` wrote `Infinity`, which no JSON
parser of an editor would accept.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

Hook = Callable[[dict[str, Any]], Any]

# orjson reads an integer beyond 64 bits as a float; no float this large comes in a message.
_OVERFLOWED = float(2**63)
# Such an integer has at least 19 digits: a body without a run that long is read alike by both,
# and its values need not be walked (a C pass over the bytes: half the walk's time on 40 KB, a
# fifth of it on an upstream's server-sent event).
_DIGITS_AS_ZEROS = bytes(48 if byte in b"0123456789" else 32 for byte in range(256))
_LONG_NUMBER = b"0" * 19
# Such a run covers two consecutive multiples of 9, so every ninth byte of the body shows two
# digits in a row there: a body whose every ninth byte shows none is cleared at a ninth of the
# cost of the whole pass (most bodies are text; a 40 KB agent turn's check went from 43 to 10 us).
_SAMPLE_STEP = 9
_DIGIT_PAIR = b"00"

_DUMP_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_NON_STR_KEYS


def decode(body: bytes, object_hook: Hook) -> Any:
    """`json.loads(body, object_hook=object_hook)`: the hook sees every object, innermost
    first."""
    try:
        return _hooked(orjson.loads(body), object_hook)
    except (orjson.JSONDecodeError, RecursionError, _Overflowed):
        return json.loads(body, object_hook=object_hook)


def loads(body: bytes | str) -> Any:
    """`json.loads(body)`."""
    try:
        value = orjson.loads(body)
        if _may_hold_long_integers(body):
            _check_floats(value)
        return value
    except (orjson.JSONDecodeError, RecursionError, _Overflowed):
        return json.loads(body)


def dumps(data: Any) -> bytes:
    """`json.dumps(data)` as bytes: UTF-8 without escapes from orjson; what it cannot encode
    (integers past 64 bits, lone surrogates) written by `json`, escaped to ASCII."""
    try:
        return orjson.dumps(data)
    except orjson.JSONEncodeError:
        return json.dumps(data).encode("ascii")


def encode(data: Any, default: Callable[[Any], Any]) -> bytes:
    """`json.dumps(data, default=default)` as UTF-8 (without escaping what is not ASCII)."""
    try:
        return orjson.dumps(data, default=default, option=_DUMP_OPTIONS)
    except orjson.JSONEncodeError:
        return json.dumps(data, default=default, ensure_ascii=False).encode("utf-8")


def _may_hold_long_integers(body: bytes | str) -> bool:
    """Whether `body` has a run of 19 digits. Digits are ASCII, so text is looked at as UTF-8
    (lone surrogates passed through: `json` reads them)."""
    raw = body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass")
    if _DIGIT_PAIR not in raw[::_SAMPLE_STEP].translate(_DIGITS_AS_ZEROS):
        return False
    return _LONG_NUMBER in raw.translate(_DIGITS_AS_ZEROS)


class _Overflowed(Exception):
    """An integer beyond 64 bits, read by orjson as a float."""


def _check_floats(value: Any) -> None:
    """Raise `_Overflowed` where orjson read an integer beyond 64 bits as a float."""
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, list):
        if isinstance(value, float) and abs(value) >= _OVERFLOWED:
            raise _Overflowed
        return
    for item in value:
        if isinstance(item, dict | list | float):
            _check_floats(item)


def _hooked(value: Any, hook: Hook) -> Any:
    """The hook applied to every object, innermost first, as `json`'s `object_hook` does. The
    objects are found first and the hook runs only once none of it needs `json` instead: the
    hook may have effects (pygls' pops the type a response was awaited with)."""
    found: list[tuple[dict[str, Any] | list[Any] | None, Any, dict[str, Any]]] = []
    _find_objects(None, None, value, found)
    for parent, key, obj in found:
        hooked = hook(obj)
        if parent is None:
            return hooked
        parent[key] = hooked
    return value


def _find_objects(
    parent: dict[str, Any] | list[Any] | None,
    key: Any,
    value: Any,
    found: list[tuple[dict[str, Any] | list[Any] | None, Any, dict[str, Any]]],
) -> None:
    """Every object under `value` with where it sits, innermost first."""
    if isinstance(value, dict):
        for item_key, item in value.items():
            if isinstance(item, dict | list | float):
                _find_objects(value, item_key, item, found)
        found.append((parent, key, value))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, dict | list | float):
                _find_objects(value, index, item, found)
    elif isinstance(value, float) and abs(value) >= _OVERFLOWED:
        raise _Overflowed
