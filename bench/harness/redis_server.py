"""A real `redis-server` for tests and benchmarks: loopback only, a free port, no persistence.

`make test` installs the Debian package when the binary is missing (the `redis-server` target).
The server can be killed (SIGKILL, like a crash) and started again on the same port, to test what
the gateways do while it is gone and once it is back. With `tls=True` it speaks only TLS, with a
self-signed certificate made by the `openssl` command for 127.0.0.1 (`rediss://` URLs).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from pathlib import Path

from bench.harness.processes import free_port
from bench.harness.processes import stop as stop_process

STARTUP_TIMEOUT_S = 10.0


def redis_server_binary() -> str | None:
    return shutil.which("redis-server") or next(
        (p for p in ("/usr/bin/redis-server", "/usr/sbin/redis-server") if Path(p).is_file()), None
    )


class RedisServer:
    def __init__(self, *, password: str | None = None, tls: bool = False) -> None:
        binary = redis_server_binary()
        if binary is None:
            raise RuntimeError(
                "redis-server is not installed: `make redis-server` installs it "
                "(Debian: apt-get install -y redis-server)"
            )
        self.binary = binary
        self.password = password
        self.port = free_port()
        self._directory = tempfile.TemporaryDirectory(prefix="gateway-ls-redis-")
        self.process: subprocess.Popen[bytes] | None = None
        self.certificate = Path(self._directory.name) / "cert.pem" if tls else None

    @property
    def url(self) -> str:
        if self.certificate is not None:
            return f"rediss://127.0.0.1:{self.port}/0?ssl_ca_certs={self.certificate}"
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        command = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", self._directory.name,
            "--daemonize", "no",
            "--loglevel", "warning",
        ]  # fmt: skip
        if self.password:
            command += ["--requirepass", self.password]
        if self.certificate is not None:
            command += self._tls_options()
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not self.ping():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"redis-server did not start on 127.0.0.1:{self.port}")
            time.sleep(0.02)
        return self

    def _tls_options(self) -> list[str]:
        assert self.certificate is not None
        key = self.certificate.with_name("key.pem")
        if not self.certificate.exists():
            subprocess.run(
                ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                 "-keyout", str(key), "-out", str(self.certificate),
                 "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                check=True, capture_output=True, timeout=60,
            )  # fmt: skip
        return [
            "--port", "0",
            "--tls-port", str(self.port),
            "--tls-cert-file", str(self.certificate),
            "--tls-key-file", str(key),
            "--tls-ca-cert-file", str(self.certificate),
            "--tls-auth-clients", "no",
        ]  # fmt: skip

    def ping(self) -> bool:
        """True when the server answers PING (or asks for the password, which is as alive)."""
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as raw,
        ):
            connection = raw
            if self.certificate is not None:
                context = ssl.create_default_context(cafile=str(self.certificate))
                connection = context.wrap_socket(raw, server_hostname="127.0.0.1")
            connection.sendall(b"PING\r\n")
            reply = connection.recv(64)
            return reply.startswith((b"+PONG", b"-NOAUTH"))
        return False

    def kill(self) -> None:
        """Stop at once, as a crash would: no goodbye to the clients."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            stop_process(self.process)
        self.process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
        self._directory.cleanup()
