"""LSP over stdio, read by the event loop itself.

pygls reads stdin through a thread pool: each header line and each body is a hop to a worker
thread and back, which costs more than everything else on a keystroke's path through the server.
Editors hand a language server a pipe, and a pipe the event loop can watch directly; anything
else (a regular file, a terminal) falls back to pygls' threaded reader.

Both readers are bounded like `bounded_stdin`: a body beyond `MAX_MESSAGE_BYTES` is read and
thrown away in chunks and handed on as a body that does not parse, which pygls logs and skips.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import stat
from threading import Event
from typing import TYPE_CHECKING, BinaryIO

from pygls.exceptions import JsonRpcException
from pygls.io_ import StdinAsyncReader, StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.protocol import JsonRPCProtocol

from lsp_server import json_codec
from lsp_server.event_loop import run_on_fastest_loop
from lsp_server.lsp.bounded_stdin import (
    DISCARD_CHUNK,
    MAX_MESSAGE_BYTES,
    UNREADABLE_BODY,
    BoundedStdin,
)

if TYPE_CHECKING:
    from pygls.client import JsonRPCClient
    from pygls.io_ import AsyncReader

log = logging.getLogger(__name__)

_HEADER_LINE_LIMIT = 64 * 1024
_IGNORED_HEADER = b"X-Discarded: an over-long header line\r\n"
_CONTENT_LENGTH = re.compile(rb"^Content-Length: (\d+)\r\n$")


class PipeReader:
    """`readline` / `readexactly` on stdin for pygls' message loop, without threads."""

    def __init__(self, stream: BinaryIO, server: LanguageServer) -> None:
        self._stream = stream
        self._server = server
        self._pipe: asyncio.StreamReader | None = None
        self._fallback: StdinAsyncReader | None = None

    async def readline(self) -> bytes:
        pipe = await self._open()
        if pipe is None:
            return await self._threaded().readline()
        try:
            return await pipe.readline()
        except ValueError:  # longer than the limit; asyncio has dropped what it buffered
            return _IGNORED_HEADER

    async def readexactly(self, n: int) -> bytes:
        pipe = await self._open()
        if pipe is None:
            return await self._threaded().readexactly(n)
        try:
            if n <= MAX_MESSAGE_BYTES:
                return await pipe.readexactly(n)
            remaining = n
            while remaining > 0:
                remaining -= len(await pipe.readexactly(min(remaining, DISCARD_CHUNK)))
            return UNREADABLE_BODY
        except asyncio.IncompleteReadError:
            return b""  # end of input: the loop stops as it would with pygls' reader

    async def _open(self) -> asyncio.StreamReader | None:
        if self._pipe is not None or self._fallback is not None:
            return self._pipe
        loop = asyncio.get_running_loop()
        pipe = asyncio.StreamReader(limit=_HEADER_LINE_LIMIT)
        if not _is_pipe_or_socket(self._stream):
            log.info("stdin is not a pipe: reading it on a thread")
            self._threaded()
            return None
        try:
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(pipe), self._stream)
        except (ValueError, OSError) as error:
            log.info("stdin is not a pipe (%s): reading it on a thread", error)
            self._threaded()
            return None
        self._pipe = pipe
        return pipe

    def _threaded(self) -> StdinAsyncReader:
        if self._fallback is None:
            bounded = BoundedStdin(self._stream)
            self._fallback = StdinAsyncReader(bounded, self._server.thread_pool)  # type: ignore[arg-type]
        return self._fallback


def _is_pipe_or_socket(stream: BinaryIO) -> bool:
    """What an event loop can watch. Asked first: uvloop aborts the process on anything else (a
    regular file) where asyncio's loop raises."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def read_messages(
    server: LanguageServer | JsonRPCClient, reader: AsyncReader, stop_event: Event
) -> None:
    """pygls' `run_async` message loop, with bodies decoded by `json_codec`; for a server or
    a client."""
    protocol: JsonRPCProtocol = server.protocol
    content_length = 0
    while not stop_event.is_set():
        header = await reader.readline()
        if not header:
            break
        if not content_length:
            match = _CONTENT_LENGTH.fullmatch(header)
            if match:
                content_length = int(match.group(1))
        if content_length and not header.strip():
            body = await reader.readexactly(content_length)
            if not body:
                break
            try:
                protocol.handle_message(json_codec.decode(body, protocol.structure_message))
            except Exception as error:
                log.exception("Unable to handle message")
                server.report_server_error(error, JsonRpcException)
            finally:
                content_length = 0


def serve_stdio(server: LanguageServer, stdin: BinaryIO, stdout: BinaryIO) -> int:
    """What pygls' `start_io` does, with `PipeReader` in place of its threaded reader and
    `read_messages` in place of its message loop.

    Returns the exit code: `exit` gives 0 after `shutdown` and 1 without, as LSP says.
    """
    server._stop_event = stop_event = Event()  # `server.shutdown()` sets it
    server.protocol.set_writer(StdoutWriter(stdout))
    try:
        run_on_fastest_loop(read_messages(server, PipeReader(stdin, server), stop_event))
    except BrokenPipeError:
        log.error("the connection to the editor is gone; shutting down")
    except KeyboardInterrupt:
        pass
    except SystemExit as exit_:  # pygls' `exit` handler
        return exit_.code if isinstance(exit_.code, int) else 1
    finally:
        server.shutdown()
    return 0
