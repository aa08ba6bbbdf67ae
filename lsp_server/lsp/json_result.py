"""An answer written as it is: a handler's result made of JSON's own types throughout."""

from __future__ import annotations

from typing import Any


class JsonResult(dict[str, Any]):
    """A result of objects, arrays, strings, numbers, booleans and null only, which the
    protocol writes as it is (`protocol.JsonCodecWriting`). pygls hands every answer to its
    converter, which walks a result it has no type for value by value: about 13 µs for a
    next edit's answer, on the request's path."""
