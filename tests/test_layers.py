"""The package's layers (docs/architecture.md, "Layers"): imports flow from the front doors
down to the backends, never up and never sideways between parts of one layer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[1] / "lsp_server"

# Lower numbers sit higher; a module may import only from parts below its own.
LAYERS: dict[str, int] = {
    "__main__": -1,
    "cli": 0,
    "lsp": 1,
    "gateway": 1,
    "core": 2,
    "suggest": 3,
    "refactor": 3,
    "chat": 3,
    "nextedit": 3,
    "routing": 4,
    "context": 4,
    "limits": 4,
    "backends": 5,
    "privacy": 5,
    "config": 6,
    # Shared vocabulary and small helpers at the top of the package, below everything.
    "reasons": 7,
    "failures": 7,
    "progress": 7,
    "loopback": 7,
    "event_loop": 7,
    "text_edits": 7,
    "json_codec": 7,
    "after_answer": 7,
    "permit": 7,
    "__init__": 7,
}


def part_of(module: Path) -> str:
    relative = module.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def imported_parts(module: Path) -> set[str]:
    tree = ast.parse(module.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name.split(".")[1] for name in names if name.startswith("lsp_server.") and "." in name}


def test_every_part_has_a_layer() -> None:
    parts = {part_of(module) for module in PACKAGE.rglob("*.py")}
    assert parts <= set(LAYERS), f"give these a layer: {sorted(parts - set(LAYERS))}"


def test_imports_flow_down() -> None:
    wrong = []
    for module in sorted(PACKAGE.rglob("*.py")):
        part = part_of(module)
        for imported in imported_parts(module):
            if imported != part and LAYERS[imported] <= LAYERS[part]:
                wrong.append(f"{module.relative_to(PACKAGE)} imports lsp_server.{imported}")
    assert not wrong, "\n".join(wrong)


# -- the front doors ----------------------------------------------------------------------------

FRONT_DOORS = ("cli", "lsp", "gateway")
# Beyond its own package, a front door imports the core, the configuration and the vocabulary
# every layer may use (`reasons`, `failures`, ...), and the core's requests and outcomes (the
# wire types below); it decides nothing itself.
FRONT_DOOR_PARTS = {"core", "config"} | {part for part, layer in LAYERS.items() if layer == 7}
WIRE_TYPES: dict[str, frozenset[str]] = {
    "lsp_server.backends.base": frozenset(
        {
            "ChatEvent",
            "ChatMessage",
            "ChatRequest",
            "CompletionRequest",
            "Relayed",
            "RelayedUsage",
            "TokenLimitField",
            "ToolCall",
            "ToolCallDelta",
            "Usage",
        }
    ),
    "lsp_server.backends.local_model": frozenset({"LocalState"}),
    "lsp_server.chat.pass_through": frozenset({"PassedThrough"}),
    "lsp_server.limits.limiter": frozenset({"Admission", "Demand"}),
    "lsp_server.limits.quota": frozenset({"LimitKind", "Spent", "Window"}),
    "lsp_server.nextedit.request": frozenset({"EditRequest"}),
    "lsp_server.nextedit.service": frozenset({"NextEdit"}),
    "lsp_server.refactor.service": frozenset({"RefactorFailed"}),
    "lsp_server.routing.sequential_route": frozenset({"Answered", "EventSink"}),
    "lsp_server.suggest.service": frozenset({"Suggestion"}),
}
ANY = frozenset({"*"})
# What else a front door may import, and why. (front door, module): (names, reason).
FRONT_DOOR_EXCEPTIONS: dict[tuple[str, str], tuple[frozenset[str], str]] = {
    ("gateway", "lsp_server.backends.base"): (
        frozenset({"estimate_tokens"}),
        "the one token estimate: the usage an answer reports agrees with what the limits charge",
    ),
    ("gateway", "lsp_server.nextedit.mercury_format"): (
        frozenset({"MalformedPrompt", "parse_mercury_prompt"}),
        "Mercury's prompt is a client's wire format too: read with the code that writes it",
    ),
    ("gateway", "lsp_server.nextedit.zeta_format"): (
        frozenset({"is_zeta_prompt", "parse_zeta_prompt", "zeta_answer"}),
        "Zeta's prompt and answer are Zed's wire format too: read and written with that code",
    ),
    ("gateway", "lsp_server.nextedit.zeta2_format"): (
        frozenset({"is_zeta2_prompt", "parse_zeta2_prompt", "zeta2_answer"}),
        "Zeta 2's prompt and answer are Zed's wire format too: read and written with that code",
    ),
    ("lsp", "lsp_server.backends.factory"): (
        frozenset({"preparing_remote_backends"}),
        "start-up: the HTTP stack is imported on its own thread once `initialize` is answered, "
        "before the engine exists",
    ),
    ("lsp", "lsp_server.refactor.prompt"): (
        frozenset({"READY_INSTRUCTIONS"}),
        "the instructions offered to the person are the refactor prompt's own words",
    ),
    ("lsp", "lsp_server.refactor.service"): (
        frozenset({"DEFAULT_INSTRUCTION"}),
        "the instruction offered first is the refactor service's own",
    ),
    ("lsp", "lsp_server.routing.status_file"): (
        frozenset({"StatusPublisher"}),
        "the running process publishes its status for `gateway-ls stats`",
    ),
    ("cli", "lsp_server.lsp"): (ANY, "`serve` starts the LSP front door"),
    ("cli", "lsp_server.gateway"): (ANY, "`gateway` starts the HTTP front door"),
    ("cli", "lsp_server.routing.status_file"): (
        frozenset({"StatusPublisher", "read_running"}),
        "the gateway process publishes its status; `stats` and `model` read the running ones",
    ),
    ("cli", "lsp_server.routing.redis_link"): (
        frozenset({"RedisLink"}),
        "the gateway process starts and stops its link to the shared state",
    ),
    ("cli", "lsp_server.backends.base"): (
        frozenset({"Backend", "BackendError", "ChatMessage", "ChatRequest", "CompletionRequest"}),
        "`doctor` makes each endpoint's own one-token call: the backends are its subject",
    ),
    ("cli", "lsp_server.routing.gate"): (
        frozenset({"Gate", "StaysHome"}),
        "`doctor` calls the endpoints itself: through the same gate as the router, under the "
        "configured offline mode",
    ),
    ("cli", "lsp_server.backends.factory"): (
        frozenset({"local_backend_factory", "remote_backend"}),
        "`doctor` builds each endpoint's backend and loads the local model to check them",
    ),
    ("cli", "lsp_server.backends"): (
        frozenset({"model_hub"}),
        "`model pull` fetches a local model's file",
    ),
    ("cli", "lsp_server.backends.bundled_model"): (
        ANY,
        "`model pull` and `model` verify and place the local model's files",
    ),
    ("cli", "lsp_server.backends.model_presets"): (
        ANY,
        "`model` lists the local-model presets and their licences",
    ),
    ("cli", "lsp_server.backends.local"): (
        ANY,
        "`model` shows how each preset fits this machine, as the local model measures it",
    ),
    ("cli", "lsp_server.suggest.languages"): (
        frozenset({"LANGUAGE_BY_SUFFIX"}),
        "the language of a file named on the command line, as an editor's languageId says it",
    ),
}


def imported_names(module: Path) -> set[tuple[str, str]]:
    """(module, name) of every import of the package's own code; `import x` gives name ""."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    found: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update((node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update((alias.name, "") for alias in node.names)
    return {(m, n) for m, n in found if m == "lsp_server" or m.startswith("lsp_server.")}


def excepted(door: str, module: str, name: str) -> tuple[str, str] | None:
    """The exception that lets `door` import `name` from `module`, if one does."""
    for (who, prefix), (names, _) in FRONT_DOOR_EXCEPTIONS.items():
        inside = module == prefix or module.startswith(prefix + ".")
        if who == door and inside and (names == ANY or name in names):
            return who, prefix
    return None


def test_front_doors_import_only_the_core_config_vocabulary_and_wire_types() -> None:
    wrong = []
    used: set[tuple[str, str]] = set()
    for door in FRONT_DOORS:
        for module in sorted((PACKAGE / door).rglob("*.py")):
            for imported, name in imported_names(module):
                part = imported.split(".")[1] if "." in imported else "__init__"
                if part in (door, *FRONT_DOOR_PARTS) or name in WIRE_TYPES.get(imported, ()):
                    continue
                exception = excepted(door, imported, name)
                if exception is None:
                    wrong.append(f"{module.relative_to(PACKAGE)}: {name} from {imported}")
                else:
                    used.add(exception)
    assert not wrong, "move this logic into the core, or list a reason:\n" + "\n".join(wrong)
    stale = sorted(set(FRONT_DOOR_EXCEPTIONS) - used)
    assert not stale, f"exceptions nothing needs any more: {stale}"
    assert all(reason for _, reason in FRONT_DOOR_EXCEPTIONS.values())


TESTS = Path(__file__).resolve().parent


def test_test_modules_import_helpers_from_tests_support_only() -> None:
    """A helper two test modules share lives in tests/support; importing it from another test
    module runs that module's fixtures and ties the two together."""
    offenders = []
    for module in TESTS.rglob("test_*.py"):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                package, _, name = node.module.rpartition(".")
                if package.startswith("tests") and name.startswith("test_"):
                    offenders.append(f"{module.relative_to(TESTS)} imports {node.module}")
    assert not offenders, "\n".join(offenders)


BENCH = TESTS.parent / "bench"


def test_benches_import_nothing_from_the_tests() -> None:
    """The harness both use (fake upstream, processes, permits, Redis and llama.cpp servers)
    lives in `bench/harness`; the tests import it, never the other way round, so a bench runs
    from a tree without its tests."""
    offenders = []
    for module in BENCH.rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            constants = (
                [node.value]
                if isinstance(node, ast.Constant) and isinstance(node.value, str)
                else []
            )
            # a module run as `python -m tests.…` is named in a string
            for name in names + [c for c in constants if c.startswith("tests.")]:
                if name == "tests" or name.startswith("tests."):
                    offenders.append(f"{module.relative_to(BENCH.parent)}: {name}")
    assert not offenders, "\n".join(offenders)


# -- the one door out ---------------------------------------------------------------------------

# The backend methods that make a call, which take the gate's permit (`lsp_server/permit.py`).
BACKEND_CALLS = frozenset({"complete", "chat", "chat_events", "edit", "connect", "events"})
GATE = PACKAGE / "routing" / "gate.py"


def calls_without_permit(source: str, *, inside_backends: bool) -> list[int]:
    """Lines of `source` that call a backend (a receiver named like one: `backend`,
    `endpoint.backend`, an `upstream`; `self` and `super()` inside the backends) without
    passing the gate's `permit`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in BACKEND_CALLS:
            continue
        receiver = ast.unparse(node.func.value)
        named = receiver.rsplit(".", 1)[-1].lower()
        is_backend = "backend" in named or "upstream" in named
        if inside_backends and receiver in ("self", "super()"):
            is_backend = True
        if is_backend and not any(k.arg == "permit" for k in node.keywords):
            found.append(node.lineno)
    return found


def test_every_backend_call_carries_the_gates_permit() -> None:
    wrong = []
    for module in sorted(PACKAGE.rglob("*.py")):
        inside = part_of(module) == "backends"
        for line in calls_without_permit(
            module.read_text(encoding="utf-8"), inside_backends=inside
        ):
            wrong.append(f"{module.relative_to(PACKAGE)}:{line}")
    assert not wrong, "ask the gate (routing/gate.py) for a permit and pass it:\n" + "\n".join(
        wrong
    )


def test_the_permit_check_finds_a_route_that_skips_the_gate() -> None:
    """The check above, tried once on a route that calls a backend without asking the gate."""
    skipping = "def ask(endpoint, usage):\n    return endpoint.backend.complete(request, usage)\n"
    asking = skipping.replace("usage)", "usage, permit=permit)")
    assert calls_without_permit(skipping, inside_backends=False) == [2]
    assert calls_without_permit(asking, inside_backends=False) == []


def test_only_the_gate_issues_permits() -> None:
    issuers = []
    for module in sorted(PACKAGE.rglob("*.py")):
        source = module.read_text(encoding="utf-8")
        tree = ast.parse(source)
        for node in ast.walk(tree):
            builds = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "Permit"
            )
            takes_key = isinstance(node, ast.ImportFrom) and any(
                alias.name == "GATE_ONLY" for alias in node.names
            )
            if (builds or takes_key) and module != GATE:
                issuers.append(f"{module.relative_to(PACKAGE)}:{getattr(node, 'lineno', 0)}")
    assert not issuers, "only routing/gate.py issues permits:\n" + "\n".join(issuers)


# -- no import circle -----------------------------------------------------------------------------


def module_name(module: Path) -> str:
    relative = module.relative_to(PACKAGE.parent).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


MODULES = {module_name(module): module for module in PACKAGE.rglob("*.py")}


def module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports a module makes at module level, inside `if TYPE_CHECKING:` and `try:`
    blocks too; not those inside functions (deferred on purpose, to keep start-up quick)."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If | ast.Try):
            pending.extend(node.body)
            pending.extend(node.orelse)
            if isinstance(node, ast.Try):
                pending.extend(node.finalbody)
                for handler in node.handlers:
                    pending.extend(handler.body)
    return found


def imported_modules(name: str, source: str, *, is_package: bool, known: set[str]) -> set[str]:
    """The modules of `known` that the module `name` imports at module level; `from a import
    b` names the module `a.b` when `b` is one, else `a`; relative imports resolved."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in module_level_imports(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            found.add(submodule if submodule in known else base)
    return {target for target in found if target in known and target != name}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for following in sorted(graph.get(node, ())):
            if following not in index:
                visit(following)
                low[node] = min(low[node], low[following])
            elif following in on_stack:
                low[node] = min(low[node], index[following])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_import_circle_in_the_package() -> None:
    """Imports under `if TYPE_CHECKING:` count: a module that types against another depends on
    it as much as one that calls it, and a circle hidden from the interpreter is still one for
    the reader (break it with a `typing.Protocol` on the lower side)."""
    known = set(MODULES)
    graph = {
        name: imported_modules(
            name,
            module.read_text(encoding="utf-8"),
            is_package=module.name == "__init__.py",
            known=known,
        )
        for name, module in MODULES.items()
    }
    circles = import_circles(graph)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_circle_check_finds_a_ring_of_type_checking_and_relative_imports() -> None:
    """The walk above, tried on a small package whose modules import in a ring."""
    sources = {
        "pkg.a": "from pkg import b\n",
        "pkg.b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub.c import T\n",
        "pkg.sub.c": "from ..a import f\n",
        "pkg.d": "import pkg.a\ndef g():\n    from pkg import d\n",
    }
    graph = {
        name: imported_modules(name, source, is_package=False, known=set(sources))
        for name, source in sources.items()
    }
    assert graph == {
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.sub.c"},
        "pkg.sub.c": {"pkg.a"},
        "pkg.d": {"pkg.a"},
    }
    assert import_circles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
    del graph["pkg.sub.c"]
    assert import_circles(graph) == []


# -- small modules ------------------------------------------------------------------------------

MAX_MODULE_LINES = 500


def test_no_module_is_over_500_lines() -> None:
    lines = {
        module.relative_to(PACKAGE).as_posix(): len(module.read_text(encoding="utf-8").splitlines())
        for module in sorted(PACKAGE.rglob("*.py"))
    }
    over = sorted(name for name, count in lines.items() if count > MAX_MODULE_LINES)
    assert not over, "split these along their seams: " + ", ".join(
        f"{name} ({lines[name]} lines)" for name in over
    )
