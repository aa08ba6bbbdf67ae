"""A loopback stand-in for the Hugging Face hub: files at `/{repo}/resolve/{revision}/{name}`.

It answers HEAD with the headers huggingface_hub reads (the commit, the ETag the blob is named
by, the size) and GET with the bytes, and counts the downloads it served, so a test can tell a
cached file from a fetched one.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class FakeHub:
    url: str
    files: dict[str, bytes] = field(default_factory=dict)  # "repo/resolve/rev/name" -> bytes
    downloads: int = 0

    def publish(self, repo: str, revision: str, name: str, content: bytes) -> None:
        self.files[f"{repo}/resolve/{revision}/{name}"] = content


@contextlib.contextmanager
def fake_hub() -> Iterator[FakeHub]:
    hub = FakeHub(url="")

    class Handler(BaseHTTPRequestHandler):
        def _lookup(self) -> bytes | None:
            return hub.files.get(self.path.split("?", 1)[0].lstrip("/"))

        def _head(self, content: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(content)))
            self.send_header("ETag", f'"{hashlib.sha256(content).hexdigest()}"')
            self.send_header("X-Repo-Commit", COMMIT)
            self.end_headers()

        def do_HEAD(self) -> None:
            content = self._lookup()
            if content is None:
                self.send_error(404)
                return
            self._head(content)

        def do_GET(self) -> None:
            content = self._lookup()
            if content is None:
                self.send_error(404)
                return
            hub.downloads += 1
            self._head(content)
            self.wfile.write(content)

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
