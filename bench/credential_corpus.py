"""A labelled corpus of credentials as people keep them: one sample per shape, in its usual file.

Fake but realistic: each sample is a template whose random parts (`{alnum:36}`, `{hex:40}`, ...)
are drawn at load time from a seeded generator, so the repository holds no string a secret
scanner would flag, and every run sees the same values. `kind` is the rule expected to find the
sample in its text; `None` means only its file name gives it away (the sensitive globs).
Used by the privacy tests, the end-to-end proof and `bench/bench_privacy.py` (recall).
"""

from __future__ import annotations

import base64
import random
import re
import string
from dataclasses import dataclass

_ALPHABETS = {
    "alnum": string.ascii_letters + string.digits,
    "hex": "0123456789abcdef",
    "HEX": "0123456789ABCDEF",
    "upper": string.ascii_uppercase + string.digits,
    "aws": string.ascii_uppercase + "234567",
    "lower": string.ascii_lowercase + string.digits,
    "letters": string.ascii_letters,
    "digits": string.digits,
    "b64": string.ascii_letters + string.digits + "+/",
    "url": string.ascii_letters + string.digits + "_-",
    # WordPress' salt generator: printable ASCII but quotes and backslash.
    "salt": string.ascii_letters + string.digits + "!#$%&()*+,-./:;<=>?@[]^_`{|}~ ",
}
# Words of a passphrase (`{words:N}`): no word a prompt or a sentence would use.
_WORDS = (
    *("correct", "horse", "battery", "staple", "orbit", "maple", "tundra", "velvet", "cobalt"),
    *("lantern", "pepper", "quartz", "harbor", "falcon", "meadow", "ember", "glacier", "saddle"),
    *("walnut", "cactus", "violet", "thunder", "pebble", "canyon", "marble", "copper", "willow"),
)
_FIELD = re.compile(r"\{(\w+):(\d+)\}")


@dataclass(frozen=True, slots=True)
class Sample:
    kind: str | None
    file_name: str
    text: str


# (kind, file name, template). `{basic:N}` is base64 of `user:<N random characters>`;
# `{pem:N}` is a private key body of N lines.
Template = tuple[str | None, str, str]

_EARLIER: tuple[Template, ...] = (
    ("aws-access-key", "settings.py", 'AWS_ACCESS_KEY_ID = "AK' + 'IA{aws:16}"'),
    ("aws-secret-key", "deploy.sh", "export AWS_SECRET_ACCESS_KEY={b64:40}"),
    ("github-token", "ci.yml", "  GH_TOKEN: gh" + "p_{alnum:36}"),
    ("github-token", "release.py", 'token = "github' + '_pat_{alnum:22}_{alnum:59}"'),
    ("anthropic-key", "agent.py", 'client = Anthropic(api_key="sk-' + 'ant-api03-{url:93}")'),
    ("openai-key", "app.py", 'OpenAI(api_key="sk-' + 'proj-{alnum:48}")'),
    ("google-api-key", "maps.js", "const key = 'AI" + "za{alnum:35}';"),
    ("slack-token", "bot.py", 'WebClient(token="xo' + 'xb-{digits:12}-{alnum:24}")'),
    (
        "slack-webhook",
        "notify.py",
        'URL = "https://hooks.slack.com/services/T{upper:9}/B{upper:9}/{alnum:24}"',
    ),
    ("stripe-key", "billing.py", 'stripe.api_key = "sk' + '_live_{alnum:24}"'),
    ("stripe-key", "billing_test.py", 'stripe.api_key = "sk' + '_test_{alnum:24}"'),
    ("stripe-key", "webhooks.py", 'endpoint_secret = "wh' + 'sec_{alnum:32}"'),
    ("gitlab-token", "gitlab.toml", 'token = "gl' + 'pat-{url:20}"'),
    ("npm-token", "publish.sh", "NPM_TOKEN=np" + "m_{alnum:36}"),
    ("pypi-token", "upload.cfg", "password = py" + "pi-AgEIcHlwaS5vcmc{url:70}"),
    ("huggingface-token", "train.py", 'login("h' + 'f_{letters:34}")'),
    ("sendgrid-key", "mail.py", 'SG_KEY = "S' + 'G.{url:22}.{url:43}"'),
    ("jwt", "client.py", 'session = "ey' + "J{url:30}.ey" + 'J{url:40}.{url:43}"'),
    ("private-key", "fixtures.py", 'KEY = """-----BEGIN RSA PRIV' + 'ATE KEY-----\n{pem:5}\n"""'),
    ("private-key", "deploy_key", "-----BEGIN OPENSSH PRIV" + "ATE KEY-----\n{pem:5}\n"),
    (
        "gcp-service-account",
        "project-1a2b3c.json",
        '{"type": "service_account", "private_key_id": "{hex:40}", "client_email": "x@y"}',
    ),
    ("url-credentials", "db.py", 'DATABASE_URL = "postgres://app:{alnum:16}@db.internal:5432/app"'),
    ("url-credentials", "git-credentials.txt", "https://octo:{alnum:20}@github.com"),
    ("bearer-token", "api.sh", "curl -H 'Authorization: Bearer {alnum:40}' https://api.x.io"),
    ("basic-auth", "fetch.py", 'headers = {"Authorization": "Basic {basic:14}"}'),
    ("basic-auth", "docker.json", '{"auths": {"registry.x.io": {"auth": "{basic:16}"}}}'),
    ("password-assignment", "app.py", 'db_password = "{alnum:14}"'),
    ("password-assignment", "prod.env.sh", "export DB_PASS={alnum:16}"),
    ("password-assignment", "mail.ini", "SMTP_PWD = {alnum:14}"),
    ("password-assignment", "settings.py", 'APP_SECRET = "{alnum:32}"'),
    ("password-assignment", "service.env.sh", "PAYMENTS_SERVICE_KEY={alnum:32}"),
    ("password-assignment", "config.go", 'const apiToken = "{alnum:32}"'),
    (
        "connection-string",
        "storage.cs",
        'var cs = "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={b64:86}==;'
        'EndpointSuffix=core.windows.net";',
    ),
    (
        "connection-string",
        "Db.cs",
        'var cs = "Server=db.acme.local;Database=Orders;User Id=app;Password={alnum:16};";',
    ),
    (
        "connection-string",
        "application.properties",
        "spring.datasource.url=jdbc:mysql://db:3306/app?user=app&password={alnum:14}&ssl=true",
    ),
    ("connection-string", "ora.properties", "url=jdbc:oracle:thin:scott/{alnum:12}@db:1521:ORCL"),
    ("dsn-credentials", "main.go", 'dsn := "app:{alnum:14}@tcp(127.0.0.1:3306)/orders"'),
    ("dsn-credentials", "celery.py", 'broker = "admin:{alnum:14}@mq.acme.local:5672/prod"'),
    (
        "netrc-password",
        "netrc.txt",
        "machine api.acme.io login deploy password {alnum:20}",
    ),
    (
        "netrc-password",
        "netrc-multi.txt",
        "machine api.acme.io\n  login deploy\n  password {alnum:20}\n",
    ),
    ("npm-token", "npmrc.txt", "//registry.npmjs.org/:_authToken={alnum:36}"),
    ("npm-token", "npmrc-auth.txt", "_auth={basic:18}"),
    ("kubeconfig-credentials", "kube.yaml", "    client-key-data: {b64:120}="),
    ("kubeconfig-credentials", "kube-token.yaml", "    token: {lower:6}.{lower:16}"),
    ("digitalocean-token", "do.tf", 'token = "do' + 'p_v1_{hex:64}"'),
    ("shopify-token", "shop.rb", 'ShopifyAPI::Session.new(token: "sh' + 'pat_{hex:32}")'),
    ("databricks-token", "dbx.py", 'DATABRICKS = "da' + 'pi{hex:32}"'),
    ("grafana-token", "grafana.sh", "GRAFANA=gl" + "sa_{alnum:32}_{hex:8}"),
    ("vault-token", "vault.sh", "VAULT=hv" + "s.{url:90}"),
    ("google-oauth-token", "gcloud.py", 'creds = "ya' + '29.{url:120}"'),
    ("google-oauth-secret", "oauth.py", 'CLIENT = "GOC' + 'SPX-{url:28}"'),
    ("llm-api-key", "router.py", 'OPENROUTER = "sk-' + 'or-v1-{hex:64}"'),
    ("llm-api-key", "deepseek.py", 'DEEPSEEK = "sk-' + '{hex:32}"'),
    ("llm-api-key", "groq.py", 'GROQ = "gs' + 'k_{alnum:52}"'),
    ("replicate-token", "rep.py", 'REPLICATE = "r' + '8_{alnum:37}"'),
    ("linear-key", "linear.ts", 'const LINEAR = "lin' + '_api_{alnum:40}";'),
    ("postman-key", "pm.sh", "PM=PM" + "AK-{hex:24}-{hex:34}"),
    ("pulumi-token", "pulumi.sh", "PULUMI=pu" + "l-{hex:40}"),
    ("newrelic-key", "nr.yml", "key: NR" + "AK-{upper:27}"),
    ("doppler-token", "doppler.sh", "DOPPLER=dp" + ".pt.{alnum:43}"),
    ("supabase-token", "supa.sh", "SUPA=sb" + "p_{hex:40}"),
    ("square-token", "square.py", 'SQUARE = "sq' + '0atp-{url:22}"'),
    ("twilio-key", "twilio.py", 'TWILIO = "S' + 'K{hex:32}"'),
    ("mailgun-key", "mg.py", 'MAILGUN = "ke' + 'y-{hex:32}"'),
    ("age-secret-key", "age.txt", "AGE-SECRET" + "-KEY-1{upper:58}"),
    ("high-entropy", "fixtures.py", 'CONFIG = {{"signature": "{alnum:40}"}}'),
    # Compose `environment:` lists.
    (
        "password-assignment",
        "docker-compose.yml",
        "services:\n  db:\n    image: mysql:8\n    environment:\n      - MYSQL_PASS={alnum:14}\n",
    ),
    (
        "password-assignment",
        "compose.yaml",
        'services:\n  db:\n    environment:\n      - "POSTGRES_PASSWORD={alnum:16}"\n',
    ),
    (
        "password-assignment",
        "compose.prod.yml",
        "    environment:\n      - MYSQL_ROOT_PASSWORD={letters:12}\n      - MYSQL_DATABASE=shop\n",
    ),
    (
        "password-assignment",
        "compose.override.yml",
        "    environment:\n      REDIS_PASSWORD: {alnum:20}\n",
    ),
    # Kubernetes env pairs: the name on one line, the value on the next.
    (
        "name-value-pair",
        "deployment.yaml",
        "        env:\n        - name: DB_PASSWORD\n          value: {alnum:16}\n",
    ),
    (
        "name-value-pair",
        "job.yaml",
        '          env:\n            - name: "API_TOKEN"\n              value: "{alnum:24}"\n',
    ),
    (
        "name-value-pair",
        "task-definition.json",
        '"environment": [{{"name": "STRIPE_SECRET", "value": "{alnum:24}"}}]',
    ),
    # Passwords with spaces.
    ("password-assignment", "mailer.py", 'password = "{words:4}"'),
    ("password-assignment", "gpg.yml", "signing:\n  passphrase: '{words:5}'\n"),
    ("password-assignment", "db.ini", "[db]\npassword = {words:4}\n"),
    # Command lines: password flags and environment prefixes.
    ("cli-credential", "backup.sh", "mysql -u root -p{alnum:12} shop < dump.sql"),
    ("cli-credential", "restore.sh", "mysqldump --user=app -p'{alnum:12}' shop > shop.sql"),
    ("cli-credential", "release.sh", "docker login -u deploy -p {alnum:20} registry.acme.io"),
    (
        "cli-credential",
        "azure.sh",
        "az login --service-principal -u http://deployer --password {alnum:20} --tenant acme",
    ),
    ("cli-credential", "deploy.sh", "./deploy --api-key={alnum:32} --region eu-west-1"),
    ("cli-credential", "smoke.sh", "curl -u admin:{alnum:14} https://ci.acme.io/api/json"),
    (
        "password-assignment",
        "dump.sh",
        "PGPASSWORD={alnum:14} pg_dump -h db -U app shop > shop.sql",
    ),
    ("password-assignment", "Makefile", "\tMYSQL_PWD={alnum:12} mysql -u app shop < schema.sql"),
    # Credentials passed as arguments.
    ("auth-argument", "client.py", "r = requests.get(url, auth=('admin', '{alnum:14}'))"),
    ("auth-argument", "fetch.py", "session.auth = HTTPBasicAuth('deploy', '{alnum:16}')"),
    ("password-assignment", "api.py", "login(user='deploy', password='{alnum:14}')"),
    ("hex-token", "sms.py", 'client = Client("AC{hex:32}", "{hex:32}")'),
    ("hex-token", "search.js", "const client = algoliasearch('{upper:10}', '{hex:32}');"),
    (
        "password-assignment",
        "pusher.py",
        "pusher = Pusher(app_id='{digits:7}', key='{hex:20}', secret='{hex:20}')",
    ),
    # Framework secret files.
    ("password-assignment", "config/secrets.yml", "production:\n  secret_key_base: {hex:128}\n"),
    ("password-assignment", "wp-config.php", "define( 'DB_PASSWORD', '{alnum:16}' );"),
    ("password-assignment", "wp-salts.php", "define('AUTH_KEY',         '{salt:64}');"),
)

# The third round's classes: shapes written the way people keep them in other languages and
# tools, each class in several languages and file types.
ROUND_THREE: dict[str, tuple[Template, ...]] = {
    # A secret named by its enclosing block, not its own key.
    "block name": (
        (
            "block-secret",
            "variables.tf",
            'variable "db_password" {{\n  description = "Primary database"\n'
            '  type        = string\n  sensitive   = true\n  default     = "{alnum:18}"\n}}\n',
        ),
        ("block-secret", "main.tf", 'variable "api_token" {{ default = "{alnum:32}" }}'),
        (
            "block-secret",
            "template.pkr.hcl",
            'variable "winrm_password" {{\n  type    = string\n  default = "{alnum:16}"\n}}\n',
        ),
        (
            "block-secret",
            "stack.yaml",
            "Parameters:\n  DBPassword:\n    NoEcho: true\n    Type: String\n    MinLength: 8\n"
            "    Default: {alnum:16}\n",
        ),
        (
            "block-secret",
            "stack.json",
            '{{"Parameters": {{\n  "MasterUserPassword": {{\n    "Type": "String",\n'
            '    "Default": "{alnum:16}"\n  }}\n}}}}',
        ),
        (
            "block-secret",
            "azuredeploy.json",
            '"parameters": {{\n  "adminPassword": {{\n    "type": "securestring",\n'
            '    "defaultValue": "{alnum:16}"\n  }}\n}}',
        ),
        (
            "block-secret",
            "Pulumi.yaml",
            "config:\n  stripeSecret:\n    type: string\n    default: sk{alnum:24}\n",
        ),
        ("block-secret", "secrets.nix", 'smtpPassword = {{\n  value = "{alnum:16}";\n}};\n'),
        ("block-secret", "settings.toml", '[mail.smtp_password]\nvalue = "{alnum:16}"\n'),
    ),
    # URL userinfo with an empty user.
    "URL with an empty user": (
        (
            "url-credentials",
            "cache.py",
            'r = redis.from_url("redis://:{alnum:20}@cache.internal:6379/0")',
        ),
        ("url-credentials", "queue.env.sh", "REDIS_URL=rediss://:{alnum:24}@redis.acme.io:6380"),
        (
            "url-credentials",
            "worker.js",
            'const redis = new Redis("redis://:{alnum:20}@10.0.0.5:6379");',
        ),
        (
            "url-credentials",
            "cache.go",
            'opt, _ := redis.ParseURL("redis://:{alnum:20}@cache:6379/1")',
        ),
        (
            "url-credentials",
            "compose.cache.yml",
            "    command: redis-cli -u redis://:{alnum:18}@redis:6379 ping\n",
        ),
        ("url-credentials", "sidekiq.yml", ":redis:\n  :url: 'redis://:{alnum:18}@redis:6379/2'\n"),
    ),
    # Colon-separated credential files.
    "colon-separated file": (
        (
            "colon-credentials",
            "pgpass.txt",
            "# hostname:port:database:username:password\ndb.internal:5432:orders:app:{alnum:16}\n",
        ),
        ("colon-credentials", "pgpass.conf", "*:*:*:replicator:{alnum:20}\n"),
        (
            "colon-credentials",
            "Dockerfile",
            'RUN echo "db:5432:shop:shop:{alnum:16}" > /root/.pgpass && chmod 600 /root/.pgpass',
        ),
        ("colon-credentials", "setup.sh", "echo '10.0.0.7:5432:*:backup:{alnum:14}' >> ~/.pgpass"),
        ("colon-credentials", "proxies.txt", "proxy1.acme.io:8080:crawler:{alnum:14}\n"),
        (
            "colon-credentials",
            "pgpass.yml",
            '- copy:\n    dest: ~/.pgpass\n    content: "db.acme.local:5432:app:app:{alnum:16}"\n',
        ),
    ),
    # API keys in custom request headers.
    "API-key header": (
        (
            "cli-credential",
            "check.sh",
            "curl -s -H 'X-API-Key: {alnum:32}' https://api.acme.io/v1/ping",
        ),
        (
            "cli-credential",
            "azure-openai.sh",
            "curl https://acme.openai.azure.com/openai/deployments -H 'api-key: {hex:32}'",
        ),
        (
            "cli-credential",
            "fetch.sh",
            'wget --header="PRIVATE-TOKEN: {url:20}" https://gitlab.acme.io',
        ),
        (
            "cli-credential",
            "README.md",
            '```sh\ncurl --header "X-Auth-Token: {alnum:24}" https://api.acme.io\n```\n',
        ),
        (
            "cli-credential",
            "deploy.yml",
            '      - run: curl -fsS -H "X-Vault-Token: {alnum:26}" https://vault.acme.io/v1/kv\n',
        ),
        ("header-credential", "client.go", 'req.Header.Set("X-API-Key", "{alnum:32}")'),
        ("header-credential", "api.js", "xhr.setRequestHeader('X-Auth-Token', '{alnum:24}');"),
        ("header-credential", "Api.java", 'conn.setRequestProperty("x-api-key", "{alnum:32}");'),
        (
            "header-credential",
            "Client.cs",
            'http.DefaultRequestHeaders.Add("Ocp-Apim-Subscription-Key", "{hex:32}");',
        ),
    ),
    # Escaped strings: a notebook's JSON cells, commands in strings.
    "escaped string": (
        (
            "password-assignment",
            "analysis.ipynb",
            '{{"cells": [{{"cell_type": "code", "source": [\n    "import os\\n",\n'
            '    "os.environ[\\"TOKEN\\"] = \\"{alnum:24}\\"\\n"\n]}}]}}',
        ),
        (
            "password-assignment",
            "train.ipynb",
            '    "source": [\n     "db_password = \\"{alnum:16}\\"\\n",\n     "connect()"\n    ]',
        ),
        (
            "password-assignment",
            "tasks.json",
            '{{"label": "run", "command": "export API_KEY=\\"{alnum:24}\\" && ./run"}}',
        ),
        (
            "password-assignment",
            "Request.java",
            'String body = "{{\\"password\\":\\"{alnum:16}\\"}}";',
        ),
        (
            "password-assignment",
            "bootstrap.py",
            "run('echo export DB_PASS=\\'{alnum:16}\\' >> ~/.profile')",
        ),
        (
            "cli-credential",
            "requests.ipynb",
            '     "!curl -H \\"X-API-Key: {alnum:32}\\" https://api.acme.io\\n",',
        ),
        (
            "block-secret",
            "infra.json",
            '{{"tf": "variable \\"db_password\\" {{ default = \\"{alnum:16}\\" }}"}}',
        ),
    ),
}

_BY_NAME: tuple[Template, ...] = (
    # Found by their file name alone.
    (None, ".env", "DEBUG=1\nMODE=plain\n"),
    (None, "id_ed25519", "not shown\n"),
    (None, ".npmrc", "registry=https://registry.npmjs.org/\n"),
    (None, ".aws/credentials", "[default]\nregion = eu-west-1\n"),
    (None, "prod.tfvars", 'region = "eu-west-1"\n'),
    (None, "release.keystore", "binary\n"),
    (None, ".config/gh/hosts.yml", "github.com:\n    user: octo\n    git_protocol: ssh\n"),
    (None, ".config/gcloud/application_default_credentials.json", '{{"type": "user"}}\n'),
    (None, ".azure/msal_token_cache.json", "{{}}\n"),
    (None, ".dev.vars", "MODE=plain\n"),
    (None, ".streamlit/secrets.toml", 'region = "eu"\n'),
    (None, "config/secrets.yml", "production:\n  region: eu\n"),
    (None, "appsettings.Production.json", '{{"Logging": {{}}}}\n'),
    (None, ".pgpass", "# empty\n"),
)

TEMPLATES: tuple[Template, ...] = (
    *_EARLIER,
    *(template for shapes in ROUND_THREE.values() for template in shapes),
    *_BY_NAME,
)


def _expand(template: str, rng: random.Random) -> str:
    def field(match: re.Match[str]) -> str:
        name, size = match.group(1), int(match.group(2))
        if name == "basic":
            password = _draw(rng, _ALPHABETS["alnum"], size)
            return base64.b64encode(f"deploy:{password}".encode()).decode()
        if name == "words":
            return " ".join(rng.choice(_WORDS) for _ in range(size))
        if name == "pem":
            return "\n".join(_draw(rng, _ALPHABETS["b64"], 64) for _ in range(size))
        return _draw(rng, _ALPHABETS[name], size)

    return _FIELD.sub(field, template).replace("{{", "{").replace("}}", "}")


def _draw(rng: random.Random, alphabet: str, size: int) -> str:
    """Random characters with upper case, lower case and digits wherever the alphabet has them,
    as real keys do."""
    wanted = [k for k in (str.isupper, str.islower, str.isdigit) if any(map(k, alphabet))]
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(size))
        if size < 6 or all(any(map(k, value)) for k in wanted):
            return value


def load_corpus(seed: int = 20251202) -> list[Sample]:
    rng = random.Random(seed)
    return [Sample(kind, name, _expand(text, rng)) for kind, name, text in TEMPLATES]


def round_three(corpus: list[Sample]) -> dict[str, list[Sample]]:
    """The samples of `load_corpus()` in each of the third round's classes."""
    classes: dict[str, list[Sample]] = {}
    start = len(_EARLIER)
    for name, shapes in ROUND_THREE.items():
        classes[name] = corpus[start : start + len(shapes)]
        start += len(shapes)
    return classes
