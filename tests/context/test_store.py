"""The context store: its ring, eviction, ranking and budget, what it gathers from a workspace,
and what it never holds (sensitive files, secrets, files outside the workspace)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lsp_server.backends.base import ContextChunk, context_within
from lsp_server.config.model import RoutingConfig
from lsp_server.context.chunks import Chunk, ChunkKind, line_similarity
from lsp_server.context.identifiers import identifiers, jaccard
from lsp_server.context.ranking import prompt_chunks, rank
from lsp_server.context.ring import ChunkRing
from lsp_server.context.store import ContextStore
from lsp_server.privacy.guard import PrivacyGuard

pytestmark = pytest.mark.unit

WIDGETS = '''"""Widgets."""


def frobnicate_widget(widget: Widget, *, force: float = 1.0) -> Widget:
    """Turn a widget inside out, gently.

    More words that are not the first line.
    """
    return widget


class Widget:
    """A thing with knobs."""

    def __init__(self, knobs: int) -> None:
        self.knobs = knobs

    def turn(self, knob: int) -> None:
        pass

    def _hidden(self) -> None:
        pass
'''


def numbered(name: str, count: int = 64) -> str:
    return "".join(f"{name}_line_{i} = {i}\n" for i in range(count))


def chunk(name: str, text: str | None = None, uri: str = "file:///w/a.py") -> Chunk:
    return Chunk.of(uri, "a.py", 0, text if text is not None else numbered(name))


# -- the ring -------------------------------------------------------------------------------


def test_the_ring_keeps_the_newest_sixteen() -> None:
    ring = ChunkRing()
    for i in range(20):
        ring.add(chunk(f"c{i}"))
    kept = [c.text.split("_line_")[0] for c in ring]
    assert kept == [f"c{i}" for i in range(4, 20)]


def test_a_chunk_that_overlaps_by_more_than_nine_tenths_evicts_the_old_one() -> None:
    ring = ChunkRing()
    old = chunk("x")
    ring.add(old)
    lines = old.text.splitlines(keepends=True)
    nearly_the_same = "".join(lines[3:]) + "".join(f"new_{i} = 0\n" for i in range(3))
    assert line_similarity(old.text, nearly_the_same) > 0.9
    ring.add(chunk("", nearly_the_same))
    assert [c.text for c in ring] == [nearly_the_same]
    half = "".join(lines[:32]) + numbered("other", 32)
    assert line_similarity(nearly_the_same, half) <= 0.9
    ring.add(chunk("", half))
    assert len(ring) == 2


def test_the_same_text_again_keeps_its_place() -> None:
    ring = ChunkRing()
    first, second = chunk("a"), chunk("b")
    ring.add(first)
    ring.add(second)
    ring.add(chunk("a"))
    assert [c.sequence for c in ring] == [first.sequence, second.sequence]


# -- ranking and budget ---------------------------------------------------------------------


def test_jaccard_over_identifiers() -> None:
    a = identifiers("total = price * quantity\nreturn total")
    b = identifiers("price = lookup(item)\nquantity = 3")
    assert a == {"total", "price", "quantity"}  # `return` is too common to count
    assert jaccard(a, b) == pytest.approx(2 / 5)
    assert jaccard(a, frozenset()) == 0.0


def test_ranking_puts_the_most_alike_first_and_leaves_out_the_unrelated() -> None:
    cursor = identifiers("order_total = compute_order_total(cart_items, tax_rate)")
    close = chunk("", "def compute_order_total(cart_items, tax_rate):\n    ...\n")
    far = chunk("", "cart_items = []\nunrelated_thing = 1\n")
    unrelated = chunk("", "banana = apple + cherry\n")
    assert rank([unrelated, far, close], cursor) == [close, far]


def test_a_definition_of_a_name_used_at_the_cursor_outranks_lookalikes() -> None:
    cursor = identifiers("result = frobnicate_widget(part, force=2)\nparts = [part]")
    lookalike = chunk("", "part = parts[0]\nresult = part\nforce = 2\n")
    definition = Chunk(
        "file:///w/w.py",
        "w.py",
        3,
        "def frobnicate_widget(widget, *, force=1.0):\n",
        ChunkKind.DEFINITION,
        name="frobnicate_widget",
        words=identifiers("def frobnicate_widget(widget, *, force=1.0):"),
    )
    assert rank([lookalike, definition], cursor)[0] is definition


def test_a_definition_reached_through_a_module_used_at_the_cursor_comes_next(
    tmp_path: Path,
) -> None:
    (tmp_path / "mail").mkdir()
    (tmp_path / "mail" / "__init__.py").write_text("")
    (tmp_path / "mail" / "errors.py").write_text("class HeaderMissingDefect(Exception):\n    ...\n")
    other = tmp_path / "billing.py"
    other_text = "for line in parts:\n    total = line\n"
    main = tmp_path / "mail" / "parser.py"
    text = "from mail import errors\n\nfor line in parts:\n    defect = errors."
    store = store_for(tmp_path)
    store.opened(other.as_uri(), other_text, "python")
    store.opened(main.as_uri(), text, "python")
    store.gather_now()
    chunks = store.ranked(main.as_uri(), text, (0, 0), len(text), 4000)
    # The defect class shares no word with the cursor's text, yet `errors` is used there: it
    # comes first, before the chunk that only looks alike.
    assert [c.path for c in chunks] == ["mail/errors.py", "billing.py"]


def test_the_budget_holds_and_the_prompt_order_is_stable() -> None:
    chunks = [chunk(f"c{i}", numbered(f"c{i}", 8)) for i in range(10)]
    cost = ContextChunk("a.py", chunks[0].text).tokens
    chosen = prompt_chunks(reversed(chunks), budget_tokens=cost * 3 + 1, max_chunks=24)
    assert len(chosen) == 3 and sum(c.tokens for c in chosen) <= cost * 3 + 1
    # Best first in the request; each backend writes them oldest first.
    written = context_within(chosen, 10_000)
    assert [c.text for c in written] == [c.text for c in chunks[7:]]
    assert context_within(chosen, cost * 2)[0].text == chunks[8].text
    assert context_within(chosen, 0) == []


def test_a_chunk_the_window_already_holds_is_left_out() -> None:
    copy = chunk("", "def add(a, b):\n    return\n")
    other = chunk("", "def add_all(items):\n    return sum(items)\n")
    window = "def add(a, b):\n    return "
    chosen = prompt_chunks([copy, other], 1000, 24, window)
    assert [c.text for c in chosen] == [other.text]


def test_a_chunk_too_big_is_passed_over_for_smaller_ones() -> None:
    big = ContextChunk("big.py", "x = 1\n" * 400, order=0)
    small = ContextChunk("small.py", "y = 2\n", order=1)
    assert context_within((big, small), 100) == [small]


# -- gathering from a workspace ----------------------------------------------------------------


def store_for(root: Path, **routing: Any) -> ContextStore:
    config = RoutingConfig(**routing)
    store = ContextStore(PrivacyGuard(lambda: config), enabled=lambda: config.context)
    store.set_workspace_folders([root.as_uri()])
    return store


def ranked_for(store: ContextStore, path: Path, text: str, budget: int = 2000) -> str:
    """All the context text a prompt at the end of `text` would get."""
    offset = len(text)
    chunks = store.ranked(path.as_uri(), text, (offset, offset), offset, budget)
    return "\n".join(f"{c.path}\n{c.text}" for c in chunks)


def workspace(tmp_path: Path) -> tuple[Path, Path, str]:
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "widgets.py").write_text(WIDGETS)
    main = tmp_path / "main.py"
    text = "from shop.widgets import Widget, frobnicate_widget\n\nw = Widget(3)\nw2 = frob"
    main.write_text(text)
    return tmp_path, main, text


def test_definitions_of_imported_names_come_from_the_workspace(tmp_path: Path) -> None:
    root, main, text = workspace(tmp_path)
    store = store_for(root)
    store.opened(main.as_uri(), text, "python")
    store.gather_now()
    context = ranked_for(store, main, text + "nicate_widget(w, force=2)")
    assert "shop/widgets.py" in context
    assert "def frobnicate_widget(widget: Widget, *, force: float = 1.0) -> Widget:" in context
    assert '"""Turn a widget inside out, gently."""' in context
    assert "More words" not in context
    assert "def turn(self, knob: int) -> None:" in context and "_hidden" not in context
    assert store.workspace_path(main.as_uri()) == "main.py"


def test_a_document_keeps_its_chunks_while_the_cursor_stays_near(tmp_path: Path) -> None:
    """Chunks gathered meanwhile, or a ranking that moves with each character, would change
    the prompt's start and cost the model its KV cache: the chunks given stay while the
    window moves a little and they are all still held."""
    root, main, text = workspace(tmp_path)
    store = store_for(root)
    store.opened(main.as_uri(), text, "python")
    store.gather_now()
    text += "nicate_widget(w, force=2)\n"
    first = store.ranked(main.as_uri(), text, (0, 0), len(text), 2000)
    assert first and all(c.path == "shop/widgets.py" for c in first)

    lookalike = tmp_path / "other.py"
    store.opened(lookalike.as_uri(), "w2 = frobnicate_widget(w, force=2)\n", "python")
    store.gather_now()
    typed = text + "w"
    assert store.ranked(main.as_uri(), typed, (0, 0), len(typed), 2000) == first

    far = typed + "\n" * 40
    moved = store.ranked(main.as_uri(), far, (len(far), len(far)), len(far), 2000)
    assert "other.py" in {c.path for c in moved}

    # Near again, but what it was given is no longer held (the import went): ranked afresh.
    store.ranked(main.as_uri(), typed, (0, 0), len(typed), 2000)
    no_import = typed.replace("from shop.widgets import Widget, frobnicate_widget", "")
    store.opened(main.as_uri(), no_import, "python")
    store.gather_now()
    fresh = store.ranked(main.as_uri(), no_import, (0, 0), len(no_import), 2000)
    assert {c.path for c in fresh} == {"other.py"}


def test_an_open_document_is_read_before_the_disk(tmp_path: Path) -> None:
    root, main, text = workspace(tmp_path)
    store = store_for(root)
    edited = WIDGETS.replace("force: float = 1.0", "force: float = 9.5")
    store.opened((root / "shop" / "widgets.py").as_uri(), edited, "python")
    store.opened(main.as_uri(), text, "python")
    store.gather_now()
    assert "force: float = 9.5" in ranked_for(store, main, text + "nicate_widget(w)")


def test_chunks_of_other_open_files_join_by_similarity(tmp_path: Path) -> None:
    other = tmp_path / "billing.py"
    other_text = "def invoice_total(invoice_lines):\n    return sum(invoice_lines)\n"
    current = tmp_path / "report.py"
    current_text = "lines = load()\nprint(invoice_total(invoice_lines"
    store = store_for(tmp_path)
    store.opened(other.as_uri(), other_text, "python")
    store.opened(current.as_uri(), current_text, "python")
    store.gather_now()
    context = ranked_for(store, current, current_text)
    assert "billing.py\ndef invoice_total(invoice_lines):" in context
    assert "lines = load()" not in context  # the current window is not repeated


def test_recent_edits_are_kept_one_per_place(tmp_path: Path) -> None:
    path = tmp_path / "long.py"
    text = numbered("row", 400)
    store = store_for(tmp_path)
    for line in (10, 12, 300):
        store.changed(path.as_uri(), text, "python", line)
        store.gather_now()
    assert [(c.start_line, c.end_line) for c in store.edits] == [(4, 20), (292, 308)]


def test_a_sensitive_file_contributes_nothing(tmp_path: Path) -> None:
    store = store_for(tmp_path)
    env = tmp_path / ".env"
    store.opened(env.as_uri(), "shared_marker_word = 1\n", "dotenv")
    (tmp_path / "linked.py").symlink_to(env)
    store.opened((tmp_path / "linked.py").as_uri(), "shared_marker_word = 1\n", "python")
    store.gather_now()
    assert len(store.ring) == 0


def test_a_chunk_holding_a_secret_is_dropped_even_with_redaction_off(tmp_path: Path) -> None:
    key = "AK" + "IA" + "QWERTYUIOPASDFGH"
    store = store_for(tmp_path, redact_secrets=False)
    store.opened((tmp_path / "cfg.py").as_uri(), f'aws_id = "{key}"\nshared = 1\n', "python")
    store.gather_now()
    assert len(store.ring) == 0


def test_a_secret_in_an_imported_definition_is_dropped(tmp_path: Path) -> None:
    key = "AK" + "IA" + "QWERTYUIOPASDFGH"
    (tmp_path / "keys.py").write_text(f'AWS_ID = "{key}"\n\ndef sign(data):\n    ...\n')
    main = tmp_path / "main.py"
    text = "from keys import AWS_ID, sign\n\nsign(AWS_ID"
    store = store_for(tmp_path)
    store.opened(main.as_uri(), text, "python")
    store.gather_now()
    context = ranked_for(store, main, text)
    assert "def sign(data):" in context and key not in context


def test_only_files_inside_the_workspace_contribute(tmp_path: Path) -> None:
    inside, outside = tmp_path / "ws", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    (outside / "far.py").write_text("def far_away(x):\n    ...\n")
    (inside / "near.py").symlink_to(outside / "far.py")
    main = inside / "main.py"
    text = "from near import far_away\n\nfar_away("
    store = store_for(inside)
    store.opened((outside / "other.py").as_uri(), "far_away = 1\n", "python")
    store.opened("untitled:Untitled-1", "far_away = 2\n", "python")
    store.opened(main.as_uri(), text, "python")
    store.gather_now()
    assert "far_away(x)" not in ranked_for(store, main, text)
    assert len(store.ring) == 1  # main.py's own chunk only


def test_files_over_the_size_cap_are_not_parsed(tmp_path: Path) -> None:
    (tmp_path / "huge.py").write_text("def huge_thing():\n    ...\n" + "# pad\n" * 60_000)
    main = tmp_path / "main.py"
    text = "from huge import huge_thing\nhuge_thing("
    store = store_for(tmp_path)
    store.opened(main.as_uri(), text, "python")
    store.gather_now()
    assert "def huge_thing" not in ranked_for(store, main, text)


def test_huge_documents_and_minified_lines_make_no_chunks(tmp_path: Path) -> None:
    store = store_for(tmp_path)
    huge = "shared_word = 1\n" * 80_000  # over a megabyte
    store.opened((tmp_path / "dump.py").as_uri(), huge, "python")
    minified = "var shared_word=1;" + "f(1);" * 3000
    store.opened((tmp_path / "bundle.min.js").as_uri(), minified, "javascript")
    store.gather_now()
    assert len(store.ring) == 0
    assert store.ranked((tmp_path / "dump.py").as_uri(), huge, (0, 10), 5, 1000) == ()


def test_turned_off_it_gathers_and_gives_nothing(tmp_path: Path) -> None:
    root, main, text = workspace(tmp_path)
    store = store_for(root, context=False)
    store.opened(main.as_uri(), text, "python")
    store.gather_now()
    assert ranked_for(store, main, text + "nicate_widget(") == ""


def test_new_sensitive_globs_drop_what_was_gathered(tmp_path: Path) -> None:
    routing = [RoutingConfig()]
    store = ContextStore(PrivacyGuard(lambda: routing[0]))
    store.set_workspace_folders([tmp_path.as_uri()])
    store.opened((tmp_path / "notes.py").as_uri(), "shared_marker = 1\n", "python")
    store.gather_now()
    assert len(store.ring) == 1
    routing[0] = RoutingConfig(sensitive_globs=("**/notes.py",))
    store.reconfigure()
    assert len(store.ring) == 0


async def test_gathering_runs_off_the_keystroke_and_settles(tmp_path: Path) -> None:
    root, main, text = workspace(tmp_path)
    store = store_for(root)
    store.opened(main.as_uri(), text, "python")
    assert ranked_for(store, main, text + "nicate_widget(") == ""  # noted, not yet gathered
    await store.settled()
    assert "def frobnicate_widget" in ranked_for(store, main, text + "nicate_widget(")
    await store.aclose()
