"""The `gateway-ls` command line (docs/command-line.md; its reference is generated from here).

Exit codes: 0 ok, 2 bad usage or bad configuration (the message names file, line and key),
1 anything else.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from lsp_server import __version__
from lsp_server.cli.collection import collection_held_off
from lsp_server.cli.exit_codes import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, UsageError
from lsp_server.cli.init import STARTING_ENDPOINTS
from lsp_server.config.loader import ConfigError, find_config_file, load_config_file
from lsp_server.config.model import LOCAL_MODEL_AUTO, LOCAL_MODEL_PRESETS, Config

log = logging.getLogger("gateway-ls")


def main(argv: Sequence[str] | None = None) -> int:
    _without_httpx_command_line()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return EXIT_USAGE if exit_.code not in (0, None) else EXIT_OK
    _setup_logging(args.log_level)
    try:
        # `init` writes the file that the other commands read.
        config = Config() if args.command == "init" else load_config(args.config)
        exit_code: int = args.run(args, config)
        return exit_code
    except (ConfigError, UsageError) as error:
        print(f"gateway-ls: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_FAILURE


def _without_httpx_command_line() -> None:
    """httpx imports its own command-line client with itself whenever click, rich and pygments
    are installed (a development environment has them): tens of milliseconds and several
    megabytes that no command here uses. A `None` in `sys.modules` makes that import fail,
    which httpx expects when they are missing."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def load_config(cli_path: str | None) -> Config:
    path = find_config_file(cli_path)
    return load_config_file(path) if path is not None else Config()


def parse_host_port(value: str, *, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """`HOST:PORT`, `:PORT` or `PORT`; IPv6 hosts in brackets (`[::1]:PORT`)."""
    host, _, port_text = value.rpartition(":")
    host = host.strip("[]") or default_host
    try:
        port = int(port_text)
    except ValueError:
        raise UsageError(f"expected HOST:PORT, got {value!r}") from None
    if not 0 <= port <= 65535:
        raise UsageError(f"port out of range in {value!r}")
    return host, port


def _common_options(*, defaults: bool) -> argparse.ArgumentParser:
    """`--config` and `--log-level`, accepted before and after the command. After it they must
    not default, or argparse would overwrite a value given before it with the default."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="PATH",
        default=None if defaults else argparse.SUPPRESS,
        help="configuration file (TOML)",
    )
    common.add_argument(
        "--log-level",
        default="warning" if defaults else argparse.SUPPRESS,
        choices=["debug", "info", "warning", "error"],
        help="log level on stderr (default: warning)",
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; the command-line reference is generated from it."""
    parser = argparse.ArgumentParser(
        prog="gateway-ls",
        description="A language server that routes code suggestions to the fastest model.",
        parents=[_common_options(defaults=True)],
    )
    common = _common_options(defaults=False)
    parser.add_argument("--version", action="version", version=f"gateway-ls {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", parents=[common], help="LSP over stdio, TCP or WebSocket")
    transport = serve.add_mutually_exclusive_group()
    transport.add_argument("--tcp", metavar="HOST:PORT", help="listen for LSP over TCP")
    transport.add_argument("--ws", metavar="HOST:PORT", help="listen for LSP over WebSocket")
    # What LSP clients append to the command (vscode-languageclient among them): stdio is the
    # default transport anyway, and the client's process id is known from `initialize` too.
    transport.add_argument("--stdio", action="store_true", help="LSP over stdio (the default)")
    serve.add_argument("--clientProcessId", type=int, metavar="PID", help=argparse.SUPPRESS)
    serve.set_defaults(run=_run_serve)

    gateway = commands.add_parser(
        "gateway", parents=[common], help="OpenAI-compatible HTTP API on the same router"
    )
    gateway.add_argument("--host", default=None, help="bind address (default 127.0.0.1)")
    gateway.add_argument("--port", type=int, default=None, help="port (default 11435)")
    gateway.set_defaults(run=_run_gateway)

    complete = commands.add_parser(
        "complete", parents=[common], help="print one inline suggestion for FILE:LINE:COL"
    )
    complete.add_argument("location", metavar="FILE:LINE:COL", help="LINE and COL are 1-based")
    complete.add_argument(
        "--deadline-ms",
        type=int,
        default=None,
        help="time budget (default: the larger of routing.inline_deadline_ms and 20000, "
        "since a command is not a keystroke and may have to load the local model)",
    )
    complete.add_argument(
        "--endpoint",
        metavar="NAME",
        default=None,
        help='ask only this endpoint (a configured name, or "local"); privacy rules still win',
    )
    complete.add_argument(
        "--next-edit",
        action="store_true",
        help="print the predicted next edit around FILE:LINE:COL as a unified diff instead",
    )
    complete.set_defaults(run=_run_complete)

    doctor = commands.add_parser(
        "doctor", parents=[common], help="check the configuration, endpoints and local model"
    )
    doctor.add_argument("--no-local", action="store_true", help="skip loading the local model")
    doctor.add_argument(
        "--recalibrate",
        action="store_true",
        help="measure every installed local preset again (figures kept from a busier day)",
    )
    doctor.add_argument(
        "--json", action="store_true", help="print the findings as one JSON object instead"
    )
    doctor.set_defaults(run=_run_doctor)

    init = commands.add_parser(
        "init",
        parents=[common],
        help="write a starting configuration (to --config PATH, else where the server looks)",
    )
    init.add_argument(
        "--provider",
        action="append",
        default=[],
        choices=list(STARTING_ENDPOINTS),
        metavar="KIND",
        help="an endpoint of this provider (repeatable): " + ", ".join(STARTING_ENDPOINTS),
    )
    init.add_argument(
        "--local",
        metavar="PRESET",
        choices=[LOCAL_MODEL_AUTO, *LOCAL_MODEL_PRESETS],
        help="the local model: a preset, or auto (the default)",
    )
    init.add_argument(
        "--base-url",
        action="append",
        default=[],
        metavar="KIND=URL",
        help="a provider's API at another URL (a proxy, a self-hosted server)",
    )
    init.set_defaults(run=_run_init)

    stats = commands.add_parser("stats", parents=[common], help="routing statistics")
    stats.add_argument("--url", help="read a running gateway (http://127.0.0.1:11435)")
    stats.add_argument("--json", action="store_true", help="print the raw JSON")
    stats.add_argument(
        "--token-env",
        metavar="NAME",
        help="variable holding the gateway's bearer token (default: [gateway] token_env)",
    )
    stats.add_argument(
        "--usage",
        action="store_true",
        help="with --url: spend and tokens per client and endpoint, from the usage ledger",
    )
    stats.add_argument(
        "--period",
        choices=("day", "month"),
        default="day",
        help="with --usage: the current UTC day (default) or month",
    )
    stats.set_defaults(run=_run_stats)

    model = commands.add_parser("model", parents=[common], help="local-model presets")
    model_commands = model.add_subparsers(dest="model_command", required=True, metavar="ACTION")
    pull = model_commands.add_parser(
        "pull",
        parents=[common],
        help="fetch a preset (pinned revision, SHA-256 checked) into the user cache",
    )
    pull.add_argument("preset", metavar="PRESET", help="gemma-3-270m, qwen2.5-coder-0.5b, ...")
    pull.add_argument(
        "--offline",
        action="store_true",
        help="only from the cache (as HF_HUB_OFFLINE=1): verify what an earlier pull left",
    )
    pull.set_defaults(run=_run_model_pull)
    return parser


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # These log whole messages (document text) at their INFO/DEBUG levels.
    for noisy in ("pygls", "httpx", "httpcore", "hpack", "websockets", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLogger().level))


def _run_serve(args: argparse.Namespace, config: Config) -> int:
    with collection_held_off():
        from lsp_server.cli.serve import serve

    tcp = parse_host_port(args.tcp) if args.tcp else None
    ws = parse_host_port(args.ws) if args.ws else None
    return serve(config, tcp=tcp, ws=ws)


def _run_gateway(args: argparse.Namespace, config: Config) -> int:
    with collection_held_off():
        from lsp_server.cli.gateway import run_gateway

    host = args.host or config.gateway.host
    port = args.port if args.port is not None else config.gateway.port
    return run_gateway(config, host=host, port=port)


def _run_complete(args: argparse.Namespace, config: Config) -> int:
    if args.next_edit:
        from lsp_server.cli.next_edit import next_edit_at

        return next_edit_at(
            config, args.location, deadline_ms=args.deadline_ms, endpoint=args.endpoint
        )
    from lsp_server.cli.complete import complete_at

    return complete_at(config, args.location, deadline_ms=args.deadline_ms, endpoint=args.endpoint)


def _run_doctor(args: argparse.Namespace, config: Config) -> int:
    from lsp_server.cli.doctor import run_doctor

    return run_doctor(
        config, load_local=not args.no_local, recalibrate=args.recalibrate, as_json=args.json
    )


def _run_init(args: argparse.Namespace, config: Config) -> int:
    from lsp_server.cli.init import init_target, write_starting_configuration

    return write_starting_configuration(
        init_target(args.config), args.provider, args.local, args.base_url
    )


def _run_model_pull(args: argparse.Namespace, config: Config) -> int:
    from lsp_server.cli.model import pull_model

    return pull_model(args.preset, offline=args.offline)


def _run_stats(args: argparse.Namespace, config: Config) -> int:
    from lsp_server.cli.stats import print_stats, print_usage

    token_env = (args.token_env,) if args.token_env else config.gateway.token_env
    if args.usage:
        if args.url is None:
            print("gateway-ls stats: --usage reads a gateway: give its --url", file=sys.stderr)
            return EXIT_USAGE
        return print_usage(url=args.url, period=args.period, as_json=args.json, token_env=token_env)
    return print_stats(url=args.url, as_json=args.json, token_env=token_env)
