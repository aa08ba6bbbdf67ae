"""Privacy rules: secret detection, sensitive paths and the verdict that routing acts on.

Secret values are assembled at run time from pieces, so no realistic secret literal sits in the
repository for scanners to trip over.
"""

from __future__ import annotations

import base64
import inspect
import json
import random
import string
import sysconfig
import textwrap
import urllib.request
from argparse import ArgumentParser
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.credential_corpus import Sample, load_corpus
from bench.other_languages import NODE_MODULES, other_language_files
from lsp_server.config.model import DEFAULT_SENSITIVE_GLOBS, RoutingConfig
from lsp_server.privacy.guard import CONTEXT_MARGIN, PrivacyGuard, context_span
from lsp_server.privacy.policy import (
    SecretMemo,
    SensitivityPolicy,
    classify,
    contains_secret,
    file_system_paths,
    find_secrets,
    normalize_path,
)
from tests.support.config_text import AWS_KEY_ID

pytestmark = pytest.mark.unit

BASE62 = string.ascii_letters + string.digits


def fake(length: int, alphabet: str = BASE62, seed: int = 7) -> str:
    """A random-looking value with upper case, lower case and digits (those in `alphabet`)."""
    rng = random.Random(seed)
    wanted = [kind for kind in (str.isupper, str.islower, str.isdigit) if any(map(kind, alphabet))]
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(length))
        if all(any(map(kind, value)) for kind in wanted):
            return value


def pem_body(lines: int = 3) -> str:
    return "\n".join(fake(64, BASE62 + "+/", seed=i) for i in range(lines))


def jwt() -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'sub': '1234567890'})}.{fake(43)}"


AWS_SECRET = "wJalrXUtnFEMI/K7MDENG" + "/bPxRfiCYEXAMPLEKEY"
GITHUB_PAT = "ghp_" + fake(36)
OPENAI_KEY = "sk-proj-" + fake(48, BASE62 + "_-")
ANTHROPIC_KEY = "sk-ant-" + "api03-" + fake(93, BASE62 + "_-")
PRIVATE_KEY = f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body()}\n-----END RSA PRIVATE KEY-----"
DB_PASSWORD = "hunter2" + "-Corr3ct"

# (kind, text, the secret as it appears in the text)
POSITIVES: list[tuple[str, str, str | None]] = [
    ("aws-access-key", f"aws_access_key_id = {AWS_KEY_ID}\n", AWS_KEY_ID),
    ("aws-access-key", f'client = boto3.client("s3", "{AWS_KEY_ID}")', AWS_KEY_ID),
    ("aws-secret-key", f"aws_secret_access_key = {AWS_SECRET}\n", AWS_SECRET),
    ("aws-secret-key", f'{{"SecretAccessKey": "{AWS_SECRET}"}}', AWS_SECRET),
    ("github-token", f'GH = "{GITHUB_PAT}"', GITHUB_PAT),
    ("github-token", "use github_pat_" + fake(22) + "_" + fake(59, seed=3), None),
    ("openai-key", f"client = OpenAI(api_key='{OPENAI_KEY}')", OPENAI_KEY),
    ("openai-key", "OPENAI_API_KEY=sk-" + fake(48) + "\n", None),
    ("anthropic-key", f"ANTHROPIC_API_KEY={ANTHROPIC_KEY}\n", ANTHROPIC_KEY),
    ("google-api-key", "const key = 'AIza" + fake(35, BASE62 + "_-") + "';", None),
    ("slack-token", "slack = WebClient(token='xoxb-" + "1234567890-" + fake(24) + "')", None),
    (
        "slack-webhook",
        "url = 'https://hooks.slack.com/services/T0" + "1ABCDEF/B0" + "2GHIJKL/" + fake(24) + "'",
        None,
    ),
    ("stripe-key", "stripe.api_key = 'sk_" + "live_" + fake(24) + "'", None),
    ("gitlab-token", "token: glpat-" + fake(20), None),
    ("npm-token", "//registry.npmjs.org/:_authToken=npm_" + fake(36) + "\n", None),
    ("pypi-token", "password = pypi-" + "AgEIcHlwaS5vcmc" + fake(60) + "\n", None),
    ("huggingface-token", "login('hf_" + fake(34, string.ascii_letters) + "')", None),
    ("sendgrid-key", "SG." + fake(22) + "." + fake(43, seed=5), None),
    ("jwt", f"headers = {{'Cookie': 'session={jwt()}'}}", jwt()),
    ("private-key", f"key = '''{PRIVATE_KEY}'''", PRIVATE_KEY),
    (
        "private-key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\n" + pem_body(2) + "\n",  # cut off by the prompt
        "-----BEGIN OPENSSH PRIVATE KEY-----\n" + pem_body(2) + "\n",
    ),
    (
        "gcp-service-account",
        json.dumps({"type": "service_account", "private_key": PRIVATE_KEY}),
        None,
    ),
    (
        "gcp-service-account",
        '{"type": "service_account", "private_key_id": "' + "0123456789abcdef" * 2 + '01234567"',
        "0123456789abcdef" * 2 + "01234567",
    ),
    ("url-credentials", "DATABASE_URL = 'postgres://app:" + DB_PASSWORD + "@db:5432/app'", None),
    ("bearer-token", "curl -H 'Authorization: Bearer " + fake(40) + "'", fake(40)),
    ("password-assignment", f'password = "{DB_PASSWORD}"', DB_PASSWORD),
    ("password-assignment", f"const apiKey = `{DB_PASSWORD}`;", DB_PASSWORD),
    ("password-assignment", f'dbPassword := "{DB_PASSWORD}"', DB_PASSWORD),
    ("password-assignment", f'api_key: str = "{DB_PASSWORD}"', DB_PASSWORD),
    ("password-assignment", f'{{"client_secret": "{DB_PASSWORD}"}}', DB_PASSWORD),
    ("password-assignment", f"connect(user='app', passwd='{DB_PASSWORD}')", DB_PASSWORD),
    ("password-assignment", f"  :password => '{DB_PASSWORD}',", DB_PASSWORD),
    ("password-assignment", f"export DB_PASSWORD={DB_PASSWORD}\n", DB_PASSWORD),
    ("password-assignment", f"db:\n  password: {DB_PASSWORD}\n", DB_PASSWORD),
    ("password-assignment", f"spring.datasource.password={DB_PASSWORD}\r\n", DB_PASSWORD),
    ("password-assignment", f'GITHUB_TOKEN = "{"a1b2c3d4" * 5}"', "a1b2c3d4" * 5),
    ("high-entropy", f'CONFIG = {{"signature": "{fake(40)}"}}', fake(40)),
]


@pytest.mark.parametrize(("kind", "text", "secret"), POSITIVES)
def test_each_kind_of_secret_is_found(kind: str, text: str, secret: str | None) -> None:
    findings = find_secrets(text)
    assert [finding.kind for finding in findings] == [kind]
    if secret is not None:
        assert text[findings[0].start : findings[0].end] == secret
    assert contains_secret(text)


NEGATIVES: list[str] = [
    'password = input("Password: ")',
    "token = get_token()",
    "password = getpass.getpass()",
    'api_key = os.environ["OPENAI_API_KEY"]',
    'api_key = os.getenv("ANTHROPIC_API_KEY")',
    'api_key_env = "INCEPTION_API_KEY"',
    'GITHUB_TOKEN = "GITHUB_TOKEN"',
    'password = ""',
    'password = "changeme"',
    'api_key = "<your-api-key>"',
    'api_key = "your-api-key-here"',
    'secret = "${APP_SECRET}"',
    "password: ${DB_PASSWORD}",
    'password: "{{ vault_db_password }}"',
    'token = f"{prefix}-{suffix}"',
    'password = "xxxxxxxx"',
    'PASSWORD_PROMPT = "Password: "',
    'TOKEN_URL = "https://oauth2.googleapis.com/token"',
    'credentials_file = "secrets/service.json"',
    'private_key = "keys/id_ed25519.pem"',
    "token: str",
    "    api_key: Optional[str] = None",
    "password: str | None = None",
    'if token == "integer":',
    'if token != "string_literal":',
    'pad_token = "<pad>"',
    'mask_token = "[MASK]"',
    "llama_token = ctypes.c_int32",
    "token = next_token2",
    'tokenizer = "bert-base-uncased"',
    "max_tokens = 64",
    "token_count = len(tokens)",
    "secret_name = 'prod/db'",
    'headers = {"Authorization": f"Bearer {token}"}',
    "url = 'postgres://postgres:postgres@localhost:5432/app'",
    "url = 'https://user:pass@example.com/'",
    "request_id = '550e8400-e29b-41d4-a716-446655440000'",
    "# fixed in a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
    "rev = 'a94a8fe5ccb19ba61c4c0873d391e987982fbbd3'",
    "digest = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'",
    'COLOURS = {"fg": "#1e1e1e", "bg": "#FFFFFF", "accent": "#ff8800"}',
    '"integrity": "sha512-' + fake(86, BASE62 + "+/") + '=="',
    '__all__ = ["BrowserObservationV1", "TestHTTP2ConnectionPool"]',
    "license = 'BSD-3-Clause-No-Military-License'",
    "path = 'lsp_server/backends/http_common2.py'",
    "sketch-this-is-a-long-css-class-name = 1",
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_ordinary_code_is_not_flagged(text: str) -> None:
    assert find_secrets(text) == []
    assert not contains_secret(text)


def ordinary_python(size: int = 16 * 1024) -> str:
    source = "".join(inspect.getsource(module) for module in (textwrap, json.decoder))
    return (source * (size // len(source) + 1))[:size]


def test_ordinary_python_source_has_no_findings() -> None:
    module = inspect.getmodule(ArgumentParser)
    assert module is not None
    assert find_secrets(inspect.getsource(module)) == []
    assert find_secrets(ordinary_python()) == []


def test_findings_are_ordered_and_do_not_overlap_the_more_specific_kind_wins() -> None:
    text = f'a = "{GITHUB_PAT}"\nb = "{AWS_KEY_ID}"\npassword = "{DB_PASSWORD}"\n'
    assert [f.kind for f in find_secrets(text)] == [
        "github-token",
        "aws-access-key",
        "password-assignment",
    ]


def test_offsets_survive_characters_that_lower_case_to_two() -> None:
    text = "İstanbul = 'İİİ'\n" * 3 + f'password = "{DB_PASSWORD}"'
    [finding] = find_secrets(text)
    assert text[finding.start : finding.end] == DB_PASSWORD


def test_a_docstring_example_password_is_still_a_password() -> None:
    source = inspect.getsource(urllib.request)
    assert {f.kind for f in find_secrets(source)} == {"password-assignment"}


FRAGMENTS = [
    "password",
    "api_key",
    "token",
    " = ",
    ": ",
    '"',
    "'",
    "`",
    "\n",
    "\r\n",
    "export ",
    "AKIA",
    "sk-",
    "sk-ant-",
    "ghp_",
    "eyJ",
    ".",
    "-----BEGIN PRIVATE KEY-----",
    "-----END PRIVATE KEY-----",
    "\\n",
    "://u:",
    "@",
    "Bearer ",
    "İ",
    "ß",
    fake(20),
    fake(40, seed=2),
    "0123456789abcdef",
]


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(),
        st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=5))).map("".join),
    )
)
def test_find_secrets_never_raises_and_offsets_are_in_bounds(text: str) -> None:
    findings = find_secrets(text)
    for finding in findings:
        assert 0 <= finding.start < finding.end <= len(text)
    for earlier, later in pairwise(findings):
        assert earlier.end <= later.start
    assert contains_secret(text) == bool(findings)


DEFAULT_POLICY = SensitivityPolicy(DEFAULT_SENSITIVE_GLOBS)


@pytest.mark.parametrize(
    ("path_or_uri", "glob"),
    [
        ("/home/u/proj/.env", "**/.env"),
        (".env", "**/.env"),
        ("/home/u/proj/.env.local", "**/.env.*"),
        ("/home/u/proj/certs/server.pem", "**/*.pem"),
        ("/home/u/proj/id.key", "**/*.key"),
        ("/home/u/proj/config/secrets/db.yml", "**/secrets/**"),
        ("file:///home/u/proj/.env", "**/.env"),
        ("file:///home/u/My%20Project/config/.env.production", "**/.env.*"),
        ("file:///home/u/My Project/secrets/token.txt", "**/secrets/**"),
        ("file:///home/u/proj/%2Eenv", "**/.env"),
        ("file:///c%3A/Users/u/proj/.env", "**/.env"),
        ("file:///C:/Users/u/My%20Certs/server.pem", "**/*.pem"),
        ("C:\\Users\\u\\proj\\secrets\\db.yml", "**/secrets/**"),
        ("file://fileserver/share/team/.env", "**/.env"),
        ("vscode-remote://ssh-remote%2Bhost/home/u/proj/.env", "**/.env"),
        # As the file system sees them: dot segments, case, Windows' aliases.
        ("file:///home/u/proj/sub/../.env", "**/.env"),
        ("file:///home/u/proj/./.env", "**/.env"),
        ("./.env", "**/.env"),
        ("sub/../.env", "**/.env"),
        ("../.env", "**/.env"),
        ("/home/u/proj//.env", "**/.env"),
        ("/home/u/proj/.ENV", "**/.env"),
        ("/home/u/proj/Secrets/db.yml", "**/secrets/**"),
        ("/home/u/proj/certs/server.PEM", "**/*.pem"),
        ("C:\\Users\\u\\proj\\.env.", "**/.env"),
        ("C:/Users/u/proj/server.pem::$DATA", "**/*.pem"),
        # The credential files people keep next to code.
        ("/home/u/proj/.envrc", "**/.envrc"),
        ("/home/u/.ssh/id_rsa", "**/id_@(rsa|dsa|ecdsa|ed25519)!(*.pub)"),
        ("/home/u/.ssh/id_ed25519_sk", "**/id_@(rsa|dsa|ecdsa|ed25519)!(*.pub)"),
        ("/home/u/.ssh/id_ecdsa", "**/id_@(rsa|dsa|ecdsa|ed25519)!(*.pub)"),
        ("/home/u/.netrc", "**/?(_|.)netrc"),
        ("C:/Users/u/_netrc", "**/?(_|.)netrc"),
        ("/home/u/proj/.npmrc", "**/.npmrc"),
        ("/home/u/.pypirc", "**/.pypirc"),
        ("/home/u/.git-credentials", "**/.git-credentials"),
        ("/home/u/.aws/credentials", "**/.aws/credentials"),
        ("/home/u/.docker/config.json", "**/.docker/config.json"),
        ("/home/u/.kube/config", "**/.kube/config"),
        ("/home/u/proj/deploy/staging-kubeconfig.yaml", "**/*kubeconfig*"),
        ("/home/u/proj/client.p12", "**/*.@(p12|pfx|jks|keystore)"),
        ("/home/u/proj/client.PFX", "**/*.@(p12|pfx|jks|keystore)"),
        ("/home/u/proj/android/release.keystore", "**/*.@(p12|pfx|jks|keystore)"),
        ("/home/u/proj/infra/prod.tfvars", "**/*.tfvars"),
        ("/home/u/proj/infra/terraform.tfstate", "**/*.tfstate"),
        ("/home/u/proj/gcp-service-account.json", "**/*service?account*.json"),
        ("/home/u/proj/client_secret_1234.json", "**/client_secret*.json"),
        ("/home/u/.config/gh/hosts.yml", "**/@(gh|GitHub CLI)/hosts.yml"),
        ("C:/Users/u/AppData/Roaming/GitHub CLI/hosts.yml", "**/@(gh|GitHub CLI)/hosts.yml"),
        (
            "/home/u/.config/gcloud/application_default_credentials.json",
            "**/application_default_credentials.json",
        ),
        ("/home/u/.config/gcloud/credentials.db", "**/gcloud/@(credentials|access_tokens).db"),
        ("/home/u/.config/gcloud/access_tokens.db", "**/gcloud/@(credentials|access_tokens).db"),
        (
            "/home/u/.config/gcloud/legacy_credentials/me@x.io/adc.json",
            "**/gcloud/legacy_credentials/**",
        ),
        ("/home/u/.azure/msal_token_cache.json", "**/.azure/**"),
        ("/home/u/.azure/msal_token_cache.bin", "**/.azure/**"),
        ("/home/u/.azure/accessTokens.json", "**/.azure/**"),
        ("/home/u/.azure/service_principal_entries.json", "**/.azure/**"),
        ("/home/u/proj/worker/.dev.vars", "**/.dev.vars"),
        ("/home/u/proj/worker/.dev.vars.staging", "**/.dev.vars.*"),
        ("/home/u/proj/.streamlit/secrets.toml", "**/.streamlit/secrets.toml"),
        ("/home/u/proj/config/secrets.yml", "**/config/secrets.yml"),
        ("/home/u/proj/Api/appsettings.Production.json", "**/appsettings.!(Development).json"),
        ("/home/u/proj/Api/appsettings.Staging.json", "**/appsettings.!(Development).json"),
        ("/home/u/.microsoft/usersecrets/4f1c-77/secrets.json", "**/usersecrets/*/secrets.json"),
        (
            "C:/Users/u/AppData/Roaming/Microsoft/UserSecrets/4f1c-77/secrets.json",
            "**/usersecrets/*/secrets.json",
        ),
    ],
)
def test_sensitive_paths_match_their_glob(path_or_uri: str, glob: str) -> None:
    assert DEFAULT_POLICY.is_sensitive_path(path_or_uri)
    assert DEFAULT_POLICY.matching_glob(path_or_uri) == glob


@pytest.mark.parametrize(
    "path_or_uri",
    [
        "/home/u/proj/main.py",
        "/home/u/.ssh/id_ed25519.pub",
        "/home/u/proj/netrc.py",
        "/home/u/proj/keystore.py",
        "/home/u/proj/terraform.md",
        "../main.py",
        "/home/u/proj/environment.py",
        "/home/u/proj/secrets.py",
        "/home/u/proj/my.key.py",
        "/home/u/proj/keyboard.ts",
        # The shared, checked-in settings of ASP.NET Core and Streamlit, and neighbours of the
        # credential files above.
        "/home/u/proj/Api/appsettings.json",
        "/home/u/proj/Api/appsettings.Development.json",
        "/home/u/proj/.streamlit/config.toml",
        "/home/u/proj/config/database.yml",
        "/home/u/proj/gh/hosts.py",
        "/home/u/proj/dev.vars.md",
        "file:///home/u/proj/src/app.py",
        "file:///c%3A/Users/u/proj/README.md",
        "untitled:Untitled-1",
        "untitled:/home/u/proj/.env",
        "",
    ],
)
def test_other_paths_are_not_sensitive(path_or_uri: str) -> None:
    assert not DEFAULT_POLICY.is_sensitive_path(path_or_uri)


def test_a_symbolic_link_is_judged_by_the_file_it_leads_to(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("K=1\n")
    (tmp_path / "settings.py").symlink_to(tmp_path / ".env")
    (tmp_path / "vault").mkdir()
    (tmp_path / "secrets").symlink_to(tmp_path / "vault")
    (tmp_path / "vault" / "db.yml").write_text("x: 1\n")
    (tmp_path / "config").symlink_to(tmp_path / "secrets")
    assert DEFAULT_POLICY.matching_glob((tmp_path / "settings.py").as_uri()) == "**/.env"
    assert DEFAULT_POLICY.matching_glob(str(tmp_path / "settings.py")) == "**/.env"
    assert DEFAULT_POLICY.is_sensitive_path((tmp_path / "secrets" / "db.yml").as_uri())
    assert not DEFAULT_POLICY.is_sensitive_path((tmp_path / "vault" / "db.yml").as_uri())
    assert file_system_paths("untitled:Untitled-1") == ()


def test_uris_are_normalised_to_paths() -> None:
    assert normalize_path("file:///home/u/My%20Project/a.py") == "/home/u/My Project/a.py"
    assert normalize_path("file:///c%3A/Users/u/a.py") == "c:/Users/u/a.py"
    assert normalize_path("file://server/share/a.py") == "//server/share/a.py"
    assert normalize_path("C:\\Users\\u\\a.py") == "C:/Users/u/a.py"
    assert normalize_path("untitled:Untitled-1") is None


def test_custom_globs_support_braces_and_an_empty_list() -> None:
    policy = SensitivityPolicy(["**/*.{p12,pfx}", "/srv/private/**"])
    assert policy.matching_glob("/home/u/certs/client.pfx") == "**/*.{p12,pfx}"
    assert policy.is_sensitive_path("file:///srv/private/notes.md")
    assert not policy.is_sensitive_path("/home/u/private/notes.md")
    assert not SensitivityPolicy([]).is_sensitive_path("/home/u/proj/.env")


def test_classify_a_sensitive_path_names_the_glob() -> None:
    verdict = classify(DEFAULT_POLICY, "file:///home/u/proj/.env", "DEBUG=1", redact_secrets=True)
    assert (verdict.local_only, verdict.reason, verdict.detail) == (
        True,
        "sensitive-path",
        "**/.env",
    )


def test_classify_a_secret_in_the_prompt_names_its_kind_never_the_secret() -> None:
    prompt = f"import os\nclient = OpenAI(api_key='{OPENAI_KEY}')\n"
    verdict = classify(DEFAULT_POLICY, "file:///home/u/proj/app.py", prompt, redact_secrets=True)
    assert (verdict.local_only, verdict.reason, verdict.detail) == (
        True,
        "secret-in-prompt",
        "openai-key",
    )
    assert OPENAI_KEY not in repr(verdict)
    assert OPENAI_KEY[8:20] not in repr(verdict)


def test_classify_without_redaction_lets_secrets_through_but_not_sensitive_paths() -> None:
    prompt = f"password = '{DB_PASSWORD}'"
    shared = classify(DEFAULT_POLICY, "/home/u/proj/app.py", prompt, redact_secrets=False)
    assert (shared.local_only, shared.reason, shared.detail) == (False, None, None)
    local = classify(DEFAULT_POLICY, "/home/u/proj/.env", prompt, redact_secrets=False)
    assert local.reason == "sensitive-path"


def test_classify_clean_code_is_shareable_and_the_path_reason_comes_first() -> None:
    clean = classify(DEFAULT_POLICY, "untitled:Untitled-1", "def f():\n", redact_secrets=True)
    assert (clean.local_only, clean.reason, clean.detail) == (False, None, None)
    both = classify(DEFAULT_POLICY, "/p/.env", f"K={AWS_KEY_ID}", redact_secrets=True)
    assert both.reason == "sensitive-path"


SURROUNDING_CODE = textwrap.dedent(
    """\
    import os


    def connect(host: str) -> None:
        timeout = 30
    """
)


@pytest.mark.parametrize(("kind", "text", "secret"), POSITIVES)
def test_the_memo_finds_a_secret_from_every_cursor_position(
    kind: str, text: str, secret: str | None
) -> None:
    document = SURROUNDING_CODE + text + "\n" + SURROUNDING_CODE
    memo = SecretMemo()  # one memo for the whole walk, as across keystrokes in one document
    for cursor in range(0, len(document) + 1, 7):
        prefix, suffix = document[:cursor], document[cursor:]
        assert memo.first_secret_kind(prefix, suffix) == kind, cursor
    del secret


def test_the_memo_remembers_clean_text_and_sees_a_secret_typed_into_it() -> None:
    memo = SecretMemo(capacity=4)
    prefix, suffix = SURROUNDING_CODE * 20 + "    x = ", "\n" + SURROUNDING_CODE * 20
    assert memo.first_secret_kind(prefix, suffix) is None
    assert memo.first_secret_kind(prefix + "1", suffix) is None  # a keystroke
    typed = f'password = "{DB_PASSWORD}"'
    assert memo.first_secret_kind(prefix + typed, suffix) == "password-assignment"
    for _ in range(10):  # capacity bounds what is remembered
        memo.first_secret_kind(prefix + "\n" + SURROUNDING_CODE, suffix + "\n# more")
        suffix += "\n# more"
    assert len(memo._verdicts) <= 4


def test_classify_with_a_memo_agrees_with_classify_without() -> None:
    policy = SensitivityPolicy([])
    for _kind, text, _secret in POSITIVES:
        middle = len(text) // 2
        with_memo = classify(
            policy, "/p/a.py", text[:middle], text[middle:], redact_secrets=True, memo=SecretMemo()
        )
        without = classify(policy, "/p/a.py", text, redact_secrets=True)
        assert with_memo == without


CORPUS = load_corpus()


@pytest.mark.parametrize(
    "sample", [s for s in CORPUS if s.kind], ids=lambda s: f"{s.kind}-{s.file_name}"
)
def test_every_credential_shape_in_the_corpus_is_found(sample: Sample) -> None:
    assert sample.kind in {finding.kind for finding in find_secrets(sample.text)}


@pytest.mark.parametrize("sample", [s for s in CORPUS if not s.kind], ids=lambda s: s.file_name)
def test_credential_files_in_the_corpus_are_sensitive_by_name(sample: Sample) -> None:
    assert DEFAULT_POLICY.is_sensitive_path(f"/home/u/proj/{sample.file_name}")


NEW_NEGATIVES = [
    "SORT_KEY = 'name'",
    "PRIMARY_KEY = 'id'",
    "CACHE_KEY = 'users:v2'",
    "bypass = 'abc12345'",
    "OLDSTYLE_AUTH = re.compile(r'auth=(.*)', re.I)",
    "SERVER_AUTH = '1.3.6.1.5.5.7.3.1'",
    "email = 'joe@example.com'",
    "mailto = 'mailto:joe@example.com'",
    "@property",
    "conn = 'Server=db;Database=x;Password={password};'",
    "conn = f'Server=db;Password={pw};'",
    "_HEX_DIGITS = frozenset('0123456789ABCDEFabcdef')",
    "b'YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXpBQkNE'",
    "'Set-Cookie: Part_Number=\"Rocket_Launcher_0001\"'",
    "'N10pem_ctx_st4DOLLAR_17E'",
    "the password combination is checked",
]


@pytest.mark.parametrize("text", NEW_NEGATIVES)
def test_ordinary_code_stays_quiet_under_the_new_rules(text: str) -> None:
    assert find_secrets(text) == []


# Ordinary code near the shapes of the third round: blocks without a secret value, headers
# whose value is a reference or a scheme, colon-separated lines that are not credentials, URLs
# with an empty or placeholder password, escaped strings without a secret.
ROUND_THREE_NEGATIVES = [
    'variable "db_password" {\n  type      = string\n  sensitive = true\n}',
    'variable "db_password" {\n  default = var.fallback_password\n}',
    'variable "api_token" { default = "" }',
    'variable "db_password" { default = "changeme" }',
    'variable "region" {\n  default = "eu-west-1b"\n}',
    "password:\n  type: string\n  description: The user's password\n  default: null\n",
    "const token = { value: tokenValue, expires: 3600 };",
    "secret_settings:\n  value: ${SECRET_VALUE}\n",
    '"apiKey": {\n  "type": "string",\n  "defaultValue": "[parameters(\'key\')]"\n}',
    "curl -H 'Authorization: Bearer $TOKEN' https://api.x.io",
    'curl -H "X-API-Key: $API_KEY" https://api.x.io',
    "curl -H 'Idempotency-Key: 123e4567abc' https://api.x.io",
    'curl -H "X-Auth-Token: ${TOKEN}" https://x',
    "curl -H 'Content-Type: application/json' -H 'Accept: text/plain'",
    'req.Header.Set("X-API-Key", apiKey)',
    'req.Header.Set("X-API-Key", os.Getenv("API_KEY"))',
    'w.Header().Set("Content-Type", "application/json")',
    "started at 12:30:45:00:00",
    "mac = aa:bb:cc:dd:ee:ff",
    "localhost:5432:mydb:myuser:password\n",
    'print(f"{host}:{port}:{db}:{user}:{pw}")',
    "hostname:port:database:username:password\n",
    "x = a[1:2:3]\n",
    "REDIS_URL=redis://:@localhost:6379",
    'url = "redis://:${REDIS_PASSWORD}@redis:6379"',
    'url = "redis://:password@localhost:6379"',
    'msg = "He said \\"hello there\\" and left"',
    'json = "{\\"name\\": \\"value_of_thing\\", \\"count\\": 3}"',
    'print("token = \\"%s\\"" % token)',
    "'it\\'s a value: done'",
]


@pytest.mark.parametrize("text", ROUND_THREE_NEGATIVES)
def test_ordinary_code_stays_quiet_under_the_round_three_rules(text: str) -> None:
    assert find_secrets(text) == []


def test_a_secret_in_an_escaped_string_is_placed_in_the_original_text() -> None:
    text = f'x = 1\n"source": ["os.environ[\\"TOKEN\\"] = \\"{DB_PASSWORD}\\"\\n"]\n'

    [finding] = find_secrets(text)

    assert text[finding.start : finding.end] == DB_PASSWORD


def test_a_block_name_beyond_its_reach_is_not_read() -> None:
    """The name is looked for a bounded number of lines up, which the keystroke memo's reach
    covers."""
    lines = ["  # a note"] * 6
    far = 'variable "db_password" {\n' + "\n".join(lines) + f'\n  default = "{DB_PASSWORD}"\n}}'
    near = f'variable "db_password" {{\n  default = "{DB_PASSWORD}"\n}}'

    assert find_secrets(far) == []
    assert [f.kind for f in find_secrets(near)] == ["block-secret"]


# The syntaxes gitleaks writes its rule tests in, beyond `=` and `:`.
MORE_SYNTAXES = [
    f"<settings><password>{DB_PASSWORD}</password></settings>",
    f"<apiToken>\n    {DB_PASSWORD}\n</apiToken>",
    f"db_password: |\n  {DB_PASSWORD}\n",
    f'{{\\"db_password\\": \\"{DB_PASSWORD}\\"}}',
    f'var apiToken string = "{DB_PASSWORD}"',
    f'$dbPassword .= "{DB_PASSWORD}";',
    f"DB_PASSWORD ?= {DB_PASSWORD}",
    f"DEPLOY_TOKEN=npm_{fake(36).lower()}",
    # Being typed: the closing quote is not there yet.
    'password = "correct horse',
    f"  db_password: '{DB_PASSWORD}",
]


@pytest.mark.parametrize("text", MORE_SYNTAXES)
def test_a_secret_named_key_is_read_in_more_syntaxes(text: str) -> None:
    assert {finding.kind for finding in find_secrets(text)} == {"password-assignment"}


# Placeholders, references and prose in the shapes the key-name rules read: compose lists,
# Kubernetes pairs, command lines, arguments, framework secret files.
KEY_NAME_NEGATIVES = [
    "      - MYSQL_PASSWORD=${MYSQL_PASSWORD}",
    '      - "POSTGRES_PASSWORD=changeme"',
    "      - MYSQL_ALLOW_EMPTY_PASSWORD=yes",
    "      - MYSQL_RANDOM_ROOT_PASSWORD=true",
    "      - POSTGRES_PASSWORD_FILE=/run/secrets/db_password",
    "- name: DB_PASSWORD\n  valueFrom:\n    secretKeyRef:\n      name: db\n      key: password",
    "- name: DB_PASSWORD\n  value: $(DB_PASS)",
    '- name: API_TOKEN\n  value: "{{ .Values.apiToken }}"',
    "- name: DB_HOST\n  value: db.internal.acme",
    'password = "Enter your password"',
    'password = "the password of the user"',
    "password: The password of the user",
    'PASSWORD_HELP = "correct horse battery"',
    "mysql -u root -p shop < dump.sql",
    'mysql -u root -p"$MYSQL_PWD" shop',
    "mysql -u root -P 3306 -h db shop",
    'docker login -u deploy -p "$REGISTRY_PASSWORD" registry.acme.io',
    "echo $PW | docker login --password-stdin -u deploy registry.acme.io",
    "deploy --password $PASSWORD",
    "deploy --password <password>",
    "deploy --token=${{ secrets.DEPLOY_TOKEN }}",
    'parser.add_argument("--password", help="the database password")',
    "parser.add_argument('--token', '-t', default=None)",
    "pg_dump --password-file /run/secrets/db shop",
    "PGPASSWORD=$PW pg_dump -h db shop",
    'PGPASSWORD="${PW}" pg_dump -h db shop',
    "requests.get(url, auth=(user, password))",
    "requests.get(url, auth=('admin', os.environ['ADMIN_PASSWORD']))",
    "requests.get(url, auth=('user', 'xxxx'))",
    'os.environ.get("DB_PASSWORD", "")',
    'md5 = "d41d8cd98f00b204e9800998ecf8427e"',
    'client.download(sha256="e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")',
    '  secret_key_base: <%= ENV["SECRET_KEY_BASE"] %>',
    "define('DB_PASSWORD', getenv('DB_PASSWORD'));",
    "define( 'DB_PASSWORD', '' );",
    "define('AUTH_KEY', 'put your unique phrase here');",
    "define('DB_NAME', 'wordpress_prod');",
    'auth = "django.contrib.auth"',
    "AUTHENTICATION_BACKENDS = ['django.contrib.auth.backends.ModelBackend']",
    'token = "access_token"',
    '{"password": "db_password", "user": "db_user"}',
    'INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes"]',
    "curl -u $USER:$TOKEN https://ci.acme.io",
    "curl -u admin https://ci.acme.io",
    'sshpass -p "$SSHPASS" ssh host',
    "if password == confirm_password:",
    "set password = NULL where id = 1",
    "if token > limit:",
    "while token >= 0x10:",
    "<password>{{ vault_password }}</password>",
    "<token></token>",
    "password:\n  required: true",
    'print("shlex: token=" + repr(raw))',
    "self.assertIn('Password:', stderr.getvalue())",
]


@pytest.mark.parametrize("text", KEY_NAME_NEGATIVES)
def test_placeholders_in_every_key_name_syntax_are_not_secrets(text: str) -> None:
    assert find_secrets(text) == []


def test_a_kubernetes_pair_is_found_from_every_cursor_position() -> None:
    value = fake(16)
    text = f"env:\n- name: DB_PASSWORD\n  value: {value}\n- name: MODE\n  value: plain\n"
    policy = SensitivityPolicy(())
    for cursor in range(len(text) + 1):
        verdict = classify(
            policy,
            "/p/k.yaml",
            text[:cursor],
            text[cursor:],
            redact_secrets=True,
            memo=SecretMemo(),
        )
        assert verdict.detail == "name-value-pair", cursor


def test_a_window_that_starts_at_the_value_line_still_sees_its_name() -> None:
    value = fake(16)
    document = f"# settings\n- name: DB_PASSWORD\n  value: {value}\n" + "x = 1\n" * 3
    start = document.index("  value:")
    assert find_secrets(document[start:]) == []  # the value alone says nothing
    reason = guard().window_reason("file:///p/k.yaml", document, start, start, len(document))
    assert reason is not None


def guard() -> PrivacyGuard:
    return PrivacyGuard(lambda: RoutingConfig(sensitive_globs=()))


def test_a_window_that_cuts_a_token_in_half_still_sees_it() -> None:
    key = "AK" + "IA" + "Q3EGRJXLWNZ5TBHV"
    minified = "x" * 7000 + f'var k="{key}";' + "y" * 200
    cursor = len(minified)
    start = minified.index(key) + 5  # the window starts inside the key
    window = minified[start:cursor]
    assert find_secrets(window) == []  # what a window-only scan would miss
    assert guard().window_reason("file:///p/app.min.js", minified, start, cursor, cursor)
    span = context_span(minified, start, cursor)
    assert span[0] <= minified.index(key) and start - span[0] <= CONTEXT_MARGIN


def test_a_private_key_whose_begin_line_is_outside_the_window_still_counts() -> None:
    body = "\n".join(fake(64, BASE62 + "+/", seed=i) for i in range(120))
    document = (
        "-----BEGIN RSA PRIV" + "ATE KEY-----\n" + body + "\n-----END RSA PRIV" + "ATE KEY-----\n"
    )
    document += "value = \n"
    cursor = len(document) - 1
    start = cursor - 6000
    assert "BEGIN" not in document[start:cursor]
    assert guard().window_reason("file:///p/key.txt", document, start, cursor, len(document))
    clean = "value = 1\n" * 1000
    assert guard().window_reason("file:///p/a.py", clean, 4000, 9000, 10000) is None


@pytest.mark.slow
def test_false_alarms_on_the_standard_library_stay_under_one_percent() -> None:
    """Python's own sources, which nobody here wrote."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts)
    flagged = [f for f in files if find_secrets(f.read_text(encoding="utf-8", errors="replace"))]
    assert len(files) > 100
    assert len(flagged) / len(files) < 0.01, flagged


@pytest.mark.slow
def test_ordinary_files_in_other_languages_reach_the_remote() -> None:
    """JavaScript, TypeScript, JSON, YAML, Markdown, shell and Go that nobody here wrote: at
    least 95 % of the files of each language have no finding."""
    if not NODE_MODULES.is_dir():
        pytest.skip("the JavaScript and TypeScript files come from: cd clients/vscode && npm ci")
    for language, files in other_language_files().items():
        assert len(files) >= 30, language
        flagged = [
            f for f in files if find_secrets(f.read_text(encoding="utf-8", errors="replace"))
        ]
        assert len(flagged) / len(files) <= 0.05, (language, flagged)
