"""Standard input for the stdio transport, safe against an absurd `Content-Length`.

pygls reads a message body with one `read(n)`, which reserves n bytes up front: a frame that
claims a length of a hundred terabytes ends the server with MemoryError. Here a body beyond the
limit is read and thrown away in chunks (the stream stays in step with the sender) and handed on
as a body that does not parse, which pygls logs and skips.
"""

from __future__ import annotations

from typing import BinaryIO

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DISCARD_CHUNK = 1024 * 1024
UNREADABLE_BODY = b"\x00message too large\x00"


class BoundedStdin:
    def __init__(self, stream: BinaryIO, *, limit: int = MAX_MESSAGE_BYTES) -> None:
        self._stream = stream
        self._limit = limit

    def readline(self) -> bytes:
        return self._stream.readline()

    def read(self, n: int) -> bytes:
        if n <= self._limit:
            return self._stream.read(n)
        remaining = n
        while remaining > 0:
            chunk = self._stream.read(min(remaining, DISCARD_CHUNK))
            if not chunk:
                return b""  # end of input: the reader stops as it would anyway
            remaining -= len(chunk)
        return UNREADABLE_BODY
