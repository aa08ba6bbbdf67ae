"""Progress of long work (assembling, checking, loading the local model) on stderr."""

from __future__ import annotations

import sys
import threading


class StderrProgress:
    """A one-line bar on a terminal; one line per step when stderr is a file or a pipe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_message = ""
        self._tty = sys.stderr.isatty()

    def __call__(self, message: str, fraction: float | None) -> None:
        with self._lock:
            if self._tty:
                bar = ""
                if fraction is not None:
                    filled = int(max(0.0, min(1.0, fraction)) * 24)
                    bar = f"[{'#' * filled}{'.' * (24 - filled)}] {fraction * 100:3.0f}% "
                end = "\n" if fraction is not None and fraction >= 1.0 else ""
                sys.stderr.write(f"\r\033[K{bar}{message}{end}")
                sys.stderr.flush()
            elif message != self._last_message:
                percent = "" if fraction is None else f" ({fraction * 100:.0f}%)"
                sys.stderr.write(f"gateway-ls: {message}{percent}\n")
                sys.stderr.flush()
            self._last_message = message
