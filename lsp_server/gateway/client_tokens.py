"""Who is calling the gateway: one bearer token per client, and how many requests each sent.

A client is known by the name of the environment variable its token came from
(`[gateway] token_env`, one name or several) or by the name on its line of the token file
(`[gateway] token_file`: `client-name token` per line, `#` starts a comment). Tokens are kept
only as SHA-256 digests and a presented token is compared with every client's digest, so the
time a check takes says nothing about which token, or how much of one, was right.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import stat
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp_server.config.loader import ConfigError
from lsp_server.config.model import GatewayConfig
from lsp_server.config.validation import CLIENT_NAME

log = logging.getLogger(__name__)

MAX_TOKEN_FILE_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Client:
    name: str
    digest: bytes


class ClientTokens:
    """The accepted tokens by client name, and the requests counted per client."""

    def __init__(self, tokens: Iterable[tuple[str, str]]) -> None:
        self._clients = tuple(_Client(name, _digest(token.encode())) for name, token in tokens)
        self.requests: Counter[str] = Counter()
        self.refused = 0

    def __bool__(self) -> bool:
        return bool(self._clients)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(client.name for client in self._clients)

    def identify(self, presented: bytes) -> str | None:
        """The client whose token this is, or None; the same work whichever matches."""
        digest = _digest(presented)
        found = None
        for client in self._clients:
            if hmac.compare_digest(digest, client.digest):
                found = client.name
        return found

    def status(self) -> dict[str, Any]:
        return {
            "clients": [{"name": n, "requests": self.requests[n]} for n in self.names],
            "refused": self.refused,
        }


def _digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


def load_client_tokens(config: GatewayConfig, *, source: Path | None) -> ClientTokens:
    """Every client token the configuration names; `ConfigError` for a token file that is not
    usable. A variable that is unset or empty names no client (and is reported if others do)."""
    tokens: list[tuple[str, str]] = []
    unset: list[str] = []
    for variable in config.token_env:
        value = os.environ.get(variable, "").strip()
        if value:
            tokens.append((variable, value))
        else:
            unset.append(variable)
    if config.token_file:
        tokens.extend(read_token_file(Path(config.token_file), config_source=source))
    _check_distinct(tokens, config_source=source)
    if tokens and unset:
        log.warning(
            "[gateway] token_env names unset or empty variables, no client uses them: %s",
            ", ".join(unset),
        )
    return ClientTokens(tokens)


def read_token_file(path: Path, *, config_source: Path | None) -> list[tuple[str, str]]:
    """(client name, token) per line. Errors name the line, never its content."""
    file = str(path)
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_TOKEN_FILE_BYTES + 1)
            mode = os.fstat(handle.fileno()).st_mode
    except OSError as error:
        raise ConfigError(
            f"cannot read {file}: {error.strerror or error}",
            file=_file(config_source),
            key="gateway.token_file",
        ) from None
    if len(raw) > MAX_TOKEN_FILE_BYTES:
        raise ConfigError("the token file is larger than 1 MB", file=file)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError("the token file is not UTF-8 text", file=file) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("%s: the token file can be read by other users; chmod 600 it", file)
    tokens: list[tuple[str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        content = line.split("#", 1)[0].strip()
        if not content:
            continue
        fields = content.split()
        if len(fields) != 2 or not CLIENT_NAME.fullmatch(fields[0]):
            raise ConfigError(
                "expected `client-name token` (a name of letters, digits and _ . @ -, a space, "
                "then the token)",
                file=file,
                line=number,
            )
        tokens.append((fields[0], fields[1]))
    if not tokens:
        raise ConfigError("the token file names no client", file=file)
    return tokens


def _check_distinct(tokens: list[tuple[str, str]], *, config_source: Path | None) -> None:
    names: set[str] = set()
    owners: dict[str, str] = {}
    for name, token in tokens:
        if name in names:
            raise ConfigError(
                f"two tokens for the client {name!r}", key="gateway", file=_file(config_source)
            )
        names.add(name)
        if token in owners:
            raise ConfigError(
                f"the clients {owners[token]!r} and {name!r} have the same token, so the "
                "gateway could not tell them apart",
                key="gateway",
                file=_file(config_source),
            )
        owners[token] = name


def _file(source: Path | None) -> str | None:
    return str(source) if source else None
