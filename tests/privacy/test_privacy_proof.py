"""Proof of routing rule 1 over the real server: sensitive content never reaches an endpoint.

A recording endpoint counts every byte it receives. One session opens a document for each
default sensitive glob and one normal document per kind of secret the detector knows, each with
a unique marker, and asks for everything the editor can ask about them (inline completion,
completion items, code actions and the refactor they offer). The endpoint must receive nothing
at all until a normal document, the positive control, reaches it. Every probe stays open and
shares a word with the control, so context beyond the file would rank it into the control's
prompt: none may appear there, while a normal neighbouring file does. The API key named by
`api_key_env` must never show in the server's debug log nor in `gatewayLs.status`.

The fake secrets are assembled at run time from split pieces, so the repository holds nothing a
secret scanner would flag.
"""

from __future__ import annotations

import asyncio
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from bench.credential_corpus import Sample, load_corpus
from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from lsp_server.privacy.secret_rules import find_secrets
from tests.support.lsp_session import (
    endpoint_toml,
    inline_completion,
    lsp_session,
    open_document,
    server_status,
)
from tests.support.report import ServerLog, ServerMemory, report_scenario

KEY_VARIABLE = "GATEWAY_LS_PROOF_KEY"
ROUTING = (
    "[routing]\ninline_deadline_ms = 5000\nhedge_after_ms = 4000\n\n[local]\nenabled = false\n"
)

_rng = random.Random(20250601)
_UPPER_DIGITS = string.ascii_uppercase + string.digits
_ALNUM = string.ascii_letters + string.digits


def _draw(alphabet: str, length: int) -> str:
    """Random characters holding at least one upper case letter, one lower and one digit
    where the alphabet has them, as real keys do and as the detector's rules expect."""
    while True:
        value = "".join(_rng.choice(alphabet) for _ in range(length))
        wanted = [
            kind
            for kind in (string.ascii_uppercase, string.ascii_lowercase, string.digits)
            if set(kind) & set(alphabet)
        ]
        if all(set(value) & set(kind) for kind in wanted):
            return value


def _private_key_block() -> str:
    label = "PRIV" + "ATE KEY"
    body = "\n".join(_draw(_ALNUM + "+/", 64) for _ in range(3))
    return f"-----BEGIN RSA {label}-----\n{body}\n-----END RSA {label}-----"


# Each kind of secret the detector knows, planted in the line of code where it is typically found.
PLANTED: dict[str, Callable[[], str]] = {
    "aws-access-key": lambda: (
        f'aws_id = "{"AK" + "IA" + _draw(string.ascii_uppercase + "234567", 16)}"'
    ),
    "github-token": lambda: f'gh = "{"gh" + "p_" + _draw(_ALNUM, 36)}"',
    "anthropic-key": lambda: f'client_cfg = "{"sk" + "-ant-" + _draw(_ALNUM, 40)}"',
    "openai-key": lambda: f'openai_cfg = "{"sk" + "-proj-" + _draw(_ALNUM, 48)}"',
    "google-api-key": lambda: f'maps = "{"AI" + "za" + _draw(_ALNUM, 35)}"',
    "slack-token": lambda: (
        f'bot = "{"xo" + "xb-" + _draw(string.digits, 12) + "-" + _draw(_ALNUM, 24)}"'
    ),
    "slack-webhook": lambda: (
        f'hook = "https://hooks.slack.com/services/T{_draw(_UPPER_DIGITS, 9)}'
        f'/B{_draw(_UPPER_DIGITS, 9)}/{_draw(_ALNUM, 24)}"'
    ),
    "stripe-key": lambda: f'billing = "{"sk" + "_live_" + _draw(_ALNUM, 24)}"',
    "gitlab-token": lambda: f'gl = "{"gl" + "pat-" + _draw(_ALNUM, 20)}"',
    "npm-token": lambda: f'registry = "{"np" + "m_" + _draw(_ALNUM, 36)}"',
    "pypi-token": lambda: f'upload = "{"py" + "pi-AgEIcHlwaS5vcmc" + _draw(_ALNUM, 60)}"',
    "huggingface-token": lambda: f'hub = "{"h" + "f_" + _draw(string.ascii_letters, 34)}"',
    "sendgrid-key": lambda: f'mail = "{"S" + "G." + _draw(_ALNUM, 22) + "." + _draw(_ALNUM, 43)}"',
    "jwt": lambda: (
        f'session = "{"ey" + "J" + _draw(_ALNUM, 24)}.{"ey" + "J" + _draw(_ALNUM, 32)}'
        f'.{_draw(_ALNUM, 32)}"'
    ),
    "aws-secret-key": lambda: f'secret_access_key = "{_draw(_ALNUM + "/+", 40)}"',
    "url-credentials": lambda: (
        f'DATABASE_URL = "postgres://app:{_draw(_ALNUM, 14)}@db.internal/app"'
    ),
    "bearer-token": lambda: f'headers = {{"Authorization": "Bearer {_draw(_ALNUM, 32)}"}}',
    "password-assignment": lambda: f'db_password = "{_draw(_ALNUM, 14)}"',
    "high-entropy": lambda: f'blob = "{_draw(_ALNUM, 40)}"',
    "private-key": lambda: f'PEM = """\n{_private_key_block()}\n"""',
    "gcp-service-account": lambda: f'"private_key_id": "{_draw("0123456789abcdef", 40)}",',
}

# Each default glob, and each way of writing a path the file system reads as a sensitive one.
SENSITIVE_PATHS = (
    ".env",
    ".env.local",
    "x.pem",
    "id.key",
    "secrets/db.yml",
    "sub/../.env",
    "./.env.production",
    ".ENV",
    "Secrets/db.yml",
    "server.PEM",
    ".envrc",
    ".ssh/id_ed25519",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".aws/credentials",
    ".docker/config.json",
    ".kube/config",
    "deploy/prod-kubeconfig.yaml",
    "client.p12",
    "client.pfx",
    "release.jks",
    "android.keystore",
    "infra/prod.tfvars",
    "infra/terraform.tfstate",
    "gcp-service-account.json",
    ".config/gh/hosts.yml",
    ".config/gcloud/application_default_credentials.json",
    ".azure/msal_token_cache.json",
    ".azure/accessTokens.json",
    "worker/.dev.vars",
    ".streamlit/secrets.toml",
    "config/secrets.yml",
    "appsettings.Production.json",
)
CORPUS = [sample for sample in load_corpus() if sample.kind]


@dataclass(frozen=True, slots=True)
class Probe:
    """A document opened in the session, with the unique marker that identifies its content."""

    path: Path
    marker: str
    text: str

    @property
    def uri(self) -> str:
        return self.path.as_uri()


# A word every probe and the control share: context ranking would pick any probe it may.
SHARED_WORD = "ledger_balance"


def marker_for(slug: str) -> str:
    """A word found nowhere else: lower case, so it never looks like a secret itself."""
    word = "".join(ch if ch.isalnum() else "_" for ch in slug)
    return f"zqmarker_{word}_{_rng.randrange(10**8)}"


def sensitive_probe(root: Path, relative: str) -> Probe:
    marker = marker_for(relative)
    return Probe(root / relative, marker, f"# {marker}\nmode = {SHARED_WORD}\nname = ")


def corpus_probe(root: Path, index: int, sample: Sample) -> Probe:
    marker = marker_for(f"corpus_{index}")
    text = f"# {marker}\nsettings = {{\n{sample.text}\n}}\nresult = {SHARED_WORD} + "
    return Probe(root / f"corpus_{index}.py", marker, text)


def symlink_probe(root: Path) -> Probe:
    """An innocent name that is a link to a `.env` file."""
    marker = marker_for("symlink")
    text = f"# {marker}\nmode = {SHARED_WORD}\nname = "
    (root / "linked").mkdir()
    (root / "linked" / ".env").write_text(text, encoding="utf-8")
    (root / "linked" / "settings.py").symlink_to(root / "linked" / ".env")
    return Probe(root / "linked" / "settings.py", marker, text)


def window_cut_probes(root: Path) -> list[Probe]:
    """A minified line whose prompt window starts inside a key, and a private key whose BEGIN
    line is out of the window."""
    marker = marker_for("minified")
    key = "AK" + "IA" + _draw(string.ascii_uppercase + "234567", 16)
    minified = f'var {SHARED_WORD}=1;/*{marker}*/var k="{key}";' + "f(1);" * 1199 + "g("
    cut = len(minified) - 6000  # where the 6,000-character window starts
    assert minified.index(key) < cut < minified.index(key) + len(key)
    marker_key = marker_for("key_body")
    body = "\n".join(_draw(_ALNUM + "+/", 64) for _ in range(120))
    label = "PRIV" + "ATE KEY"
    pem = f"-----BEGIN RSA {label}-----\n{body}\n-----END RSA {label}-----\n"
    key_text = f"{pem}# {marker_key}\nresult = {SHARED_WORD} + "
    return [
        Probe(root / "bundle.min.js", marker, minified),
        Probe(root / "key_notes.py", marker_key, key_text),
    ]


def planted_probe(root: Path, kind: str) -> Probe:
    marker = marker_for(kind)
    line = PLANTED[kind]()
    found = {finding.kind for finding in find_secrets(line)}
    assert kind in found, f"the planted {kind} is not recognised (found {found or 'nothing'})"
    text = f"# {marker}\nsettings = {{\n{line}\n}}\nresult = {SHARED_WORD} + "
    return Probe(root / f"planted_{kind.replace('-', '_')}.py", marker, text)


def end_of(probe: Probe) -> types.Position:
    lines = probe.text.split("\n")
    return types.Position(line=len(lines) - 1, character=len(lines[-1]))


async def ask_everything(client: LanguageClient, probe: Probe) -> int:
    """Every request an editor makes about a document; returns how many were made."""
    language = "yaml" if probe.path.suffix == ".yml" else "python"
    open_document(client, probe.uri, probe.text, language=language)
    cursor = end_of(probe)
    inline = await inline_completion(client, probe.uri, cursor.line, cursor.character)
    assert inline is not None and not inline.items  # the local model is off: nothing to offer
    completion = await client.text_document_completion_async(
        types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=probe.uri), position=cursor
        )
    )
    assert isinstance(completion, types.CompletionList) and not completion.items
    everything = types.Range(start=types.Position(line=0, character=0), end=cursor)
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=probe.uri),
            range=everything,
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    # pygls' client mistakes these code actions for bare commands; the titles survive that.
    assert actions and actions[0].title == "Refactor with reasoning model…"
    target = {
        "uri": probe.uri,
        "range": {
            "start": {"line": 0, "character": 0},
            "end": {"line": cursor.line, "character": cursor.character},
        },
        "instruction": "",
    }
    outcome = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="gatewayLs.refactor", arguments=[target])
    )
    assert isinstance(outcome, dict), outcome
    assert outcome["applied"] is False  # must stay local, and the local model is off
    decisions = [d for d in (await server_status(client))["decisions"] if d["uri"] == probe.uri]
    assert decisions and all(d["reason"] == "sensitive" for d in decisions), decisions
    return 4


async def context_gathered(client: LanguageClient) -> bool:
    """Wait until the context store has gathered what was opened (the neighbour and the
    control make two chunks; no probe may make one)."""
    for _ in range(300):
        context = (await server_status(client))["context"]
        chunks: int = context["chunks"]
        if context["gathering"] == 0 and chunks >= 2:
            return chunks == 2
        await asyncio.sleep(0.1)
    return False


async def test_sensitive_content_never_reaches_the_endpoint(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    api_key = "sk" + "-proof-" + _draw(_ALNUM, 40)
    (tmp_path / "secrets").mkdir()
    sensitive = [sensitive_probe(tmp_path, relative) for relative in SENSITIVE_PATHS]
    sensitive.append(symlink_probe(tmp_path))
    planted = [planted_probe(tmp_path, kind) for kind in PLANTED]
    planted += [corpus_probe(tmp_path, i, sample) for i, sample in enumerate(CORPUS)]
    planted += window_cut_probes(tmp_path)
    control_marker = marker_for("control")
    control_text = f"# {control_marker}\nresult = {SHARED_WORD} + "
    control = Probe(tmp_path / "control.py", control_marker, control_text)
    neighbour_marker = marker_for("neighbour")
    neighbour_text = f"# {neighbour_marker}\n{SHARED_WORD} = 0\n"
    neighbour = Probe(tmp_path / "neighbour.py", neighbour_marker, neighbour_text)
    log = ServerLog(capfd)

    with FakeLLMServer(
        Behaviour(text="compute()\n"), name="recording", api_key=api_key
    ) as endpoint:
        config = ROUTING + endpoint_toml(
            "remote",
            endpoint.base_url,
            roles='["inline", "refactor"]',
            extra=f'api_key_env = "{KEY_VARIABLE}"',
        )
        async with lsp_session(
            tmp_path,
            config_text=config,
            env={KEY_VARIABLE: api_key},
            extra_args=("--log-level", "debug"),
        ) as client:
            log.follow(client)
            memory = ServerMemory()
            requests = 0
            for probe in (*sensitive, *planted):
                requests += await ask_everything(client, probe)
            leaked = endpoint.bytes_received
            assert endpoint.requests == [] and leaked == 0

            # The positive control: a normal document does reach the endpoint, key and all,
            # with a normal neighbouring file as context and no probe beside it.
            open_document(client, neighbour.uri, neighbour.text)
            open_document(client, control.uri, control.text)
            assert await context_gathered(client)
            cursor = end_of(control)
            answer = await inline_completion(client, control.uri, cursor.line, cursor.character)
            requests += 1
            assert answer is not None and answer.items[0].insert_text == "compute()"
            received = endpoint.received_text()
            assert control.marker in received and neighbour.marker in received
            assert endpoint.requests[0].headers["authorization"] == f"Bearer {api_key}"
            for probe in (*sensitive, *planted):
                assert probe.marker not in received, probe.path.name

            # A key the endpoint refuses is reported without being echoed.
            endpoint.api_key = "another-key"
            refused = Probe(tmp_path / "refused.py", marker_for("refused"), "result = ")
            open_document(client, refused.uri, refused.text)
            await inline_completion(client, refused.uri, 0, len(refused.text))
            requests += 1
            assert await log.wait_for("remote: auth: ")

            assert api_key not in json.dumps(await server_status(client))
            growth = memory.growth_mb()

    assert api_key not in log.text
    for probe in (*sensitive, *planted):  # nothing of a sensitive document, at any level
        assert probe.marker not in log.text, probe.path.name
    for sample in CORPUS:
        for secret in find_secrets(sample.text):
            assert sample.text[secret.start : secret.end] not in log.text, sample.kind
    # The debug level was really in force: debug lines on stderr before the editor attached,
    # or sent to it as `window/logMessage` of type Log afterwards.
    debug_sent = any(m.type == types.MessageType.Log for m in client.log_messages)
    assert debug_sent or " DEBUG " in log.text
    assert "Traceback" not in log.text
    report_scenario(
        "privacy-proof",
        requests=requests,
        failures_survived=1,
        bytes_leaked=leaked,
        memory_growth_mb=growth,
    )


async def test_each_credential_shape_stays_home_in_its_own_file(tmp_path: Path) -> None:
    """As a new user meets it: every labelled sample of the corpus in a file of its usual name
    (`docker-compose.yml`, `wp-config.php`, `config/secrets.yml`, ...), one document open and
    one inline request with the cursor after the secret, bytes counted at the recording
    endpoint. Every sample is tried before judging, so a failure names all that leaked."""
    with FakeLLMServer(Behaviour(text="compute()\n"), name="recording") as endpoint:
        config = ROUTING + endpoint_toml("remote", endpoint.base_url)
        async with lsp_session(tmp_path, config_text=config) as client:
            leaked: list[str] = []
            for index, sample in enumerate(load_corpus()):
                path = tmp_path / f"case_{index}" / sample.file_name
                path.parent.mkdir(parents=True, exist_ok=True)
                marker = marker_for(f"case_{index}")
                probe = Probe(path, marker, f"{sample.text}\n# {marker}\n")
                before = endpoint.bytes_received
                open_document(client, probe.uri, probe.text)
                cursor = end_of(probe)
                await inline_completion(client, probe.uri, cursor.line, cursor.character)
                if endpoint.bytes_received != before:
                    leaked.append(f"{sample.kind or 'by name'}: {sample.file_name}")
            assert leaked == [], f"{len(leaked)} reached the endpoint: {leaked}"

            marker = marker_for("control")
            control = Probe(tmp_path / "control.py", marker, f"# {marker}\nresult = ")
            open_document(client, control.uri, control.text)
            cursor = end_of(control)
            await inline_completion(client, control.uri, cursor.line, cursor.character)
            assert control.marker in endpoint.received_text()
