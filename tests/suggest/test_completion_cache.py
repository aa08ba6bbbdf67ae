import pytest
from hypothesis import given
from hypothesis import strategies as st

from lsp_server.suggest.cache import CachedSuggestion, CompletionCache
from lsp_server.suggest.prompt import build_completion_request

pytestmark = pytest.mark.unit

DOC = "file:///src/app.py"
PREFIX = "import os\n\ndef size(path):\n    return "
SUFFIX = "\n\nprint(size('.'))\n"
SUGGESTION = "os.path.getsize(path)"


def cache_with_suggestion() -> CompletionCache:
    cache = CompletionCache()
    cache.put(DOC, PREFIX, SUFFIX, SUGGESTION, "mercury")
    return cache


def test_same_spot_returns_the_whole_suggestion() -> None:
    cache = cache_with_suggestion()
    assert cache.get(DOC, PREFIX, SUFFIX) == CachedSuggestion(SUGGESTION, "mercury")


def test_typing_the_suggestion_serves_the_rest() -> None:
    cache = cache_with_suggestion()
    for typed in range(1, len(SUGGESTION)):
        hit = cache.get(DOC, PREFIX + SUGGESTION[:typed], SUFFIX)
        assert hit is not None
        assert hit.text == SUGGESTION[typed:]
    assert cache.stats.hits == len(SUGGESTION) - 1


def test_typing_all_of_it_leaves_nothing_to_serve() -> None:
    cache = cache_with_suggestion()
    assert cache.get(DOC, PREFIX + SUGGESTION, SUFFIX) is None


def test_typing_something_else_is_a_miss() -> None:
    cache = cache_with_suggestion()
    assert cache.get(DOC, PREFIX + "os.listdir", SUFFIX) is None
    assert cache.get(DOC, PREFIX + "x", SUFFIX) is None
    assert cache.stats.misses == 2


def test_backspacing_within_the_suggestion_is_still_a_hit() -> None:
    cache = cache_with_suggestion()
    cache.get(DOC, PREFIX + "os.path.g", SUFFIX)
    hit = cache.get(DOC, PREFIX + "os.pa", SUFFIX)
    assert hit is not None and hit.text == "th.getsize(path)"


def test_backspacing_into_the_old_prefix_is_a_miss() -> None:
    cache = cache_with_suggestion()
    assert cache.get(DOC, PREFIX[:-1], SUFFIX) is None


def test_changed_suffix_is_a_miss() -> None:
    cache = cache_with_suggestion()
    assert cache.get(DOC, PREFIX + "os", ")" + SUFFIX) is None  # the editor auto-closed a paren
    assert cache.get(DOC, PREFIX + "os", SUFFIX + "x = 1\n") is None


def test_suffix_is_compared_within_a_window() -> None:
    long_suffix = "\n" + "y = 2\n" * 100
    cache = CompletionCache()
    cache.put(DOC, PREFIX, long_suffix, SUGGESTION, "mercury")
    edited_far_below = long_suffix[:-6] + "z = 3\n"
    assert cache.get(DOC, PREFIX + "os.", edited_far_below) is not None


def test_prefix_is_compared_within_a_window() -> None:
    far_above = "# header\n" * 1000
    cache = CompletionCache()
    cache.put(DOC, far_above + PREFIX, SUFFIX, SUGGESTION, "mercury")
    edited_far_above = "#!python\n" + far_above[9:] + PREFIX + "os."
    hit = cache.get(DOC, edited_far_above, SUFFIX)
    assert hit is not None and hit.text == "path.getsize(path)"


def test_other_document_is_a_miss() -> None:
    cache = cache_with_suggestion()
    assert cache.get("file:///src/other.py", PREFIX, SUFFIX) is None


def test_multi_line_suggestion_typed_across_a_line_break() -> None:
    suggestion = "total = 0\n    for item in items:\n        total += item"
    prefix = "def sum_all(items):\n    "
    cache = CompletionCache()
    cache.put(DOC, prefix, "\n", suggestion, "local")
    typed = "total = 0\n    for it"
    hit = cache.get(DOC, prefix + typed, "\n")
    assert hit is not None and hit.text == "em in items:\n        total += item"
    after_break = cache.get(DOC, prefix + "total = 0\n", "\n")
    assert after_break is not None and after_break.text.startswith("    for item")


def test_windowed_prefixes_of_requests_still_match() -> None:
    """Callers may pass the request's prefix, whose window starts at a later line as they type."""
    document = "".join(f"item_{i:04} = {i}\n" for i in range(1000)) + "value = "
    suggestion = "compute_total_value(items)"
    cache = CompletionCache()
    window_starts = set()
    for typed in range(len(suggestion)):
        text = document + suggestion[:typed]
        request = build_completion_request(
            text, len(text), language="python", path="", max_tokens=8
        )
        window_starts.add(request.prefix[:9])
        if typed == 0:
            cache.put(DOC, request.prefix, request.suffix, suggestion, "mercury")
        hit = cache.get(DOC, request.prefix, request.suffix)
        assert hit is not None and hit.text == suggestion[typed:]
    assert len(window_starts) > 1


def test_non_ascii_and_crlf_text() -> None:
    prefix = "# café ☕\r\nname = "
    suggestion = '"Zoë 🚀"\r\nprint(name)'
    cache = CompletionCache()
    cache.put(DOC, prefix, "\r\n", suggestion, "local")
    hit = cache.get(DOC, prefix + '"Zoë 🚀"\r\npr', "\r\n")
    assert hit is not None and hit.text == "int(name)"


def test_empty_document_and_cursor_at_start() -> None:
    cache = CompletionCache()
    cache.put(DOC, "", "", "import os", "local")
    assert cache.get(DOC, "", "") == CachedSuggestion("import os", "local")
    assert cache.get(DOC, "imp", "") == CachedSuggestion("ort os", "local")


def test_empty_suggestions_are_not_stored() -> None:
    cache = CompletionCache()
    cache.put(DOC, PREFIX, SUFFIX, "", "mercury")
    assert cache.stats.entries == 0


def test_a_newer_suggestion_at_the_same_spot_replaces_the_older() -> None:
    cache = cache_with_suggestion()
    cache.put(DOC, PREFIX, SUFFIX, "0", "local")
    assert cache.get(DOC, PREFIX, SUFFIX) == CachedSuggestion("0", "local")
    assert cache.stats.entries == 1


def test_the_newest_matching_suggestion_wins() -> None:
    cache = cache_with_suggestion()
    cache.put(DOC, PREFIX + "os.", SUFFIX, "stat(path).st_size", "local")
    hit = cache.get(DOC, PREFIX + "os.st", SUFFIX)
    assert hit == CachedSuggestion("at(path).st_size", "local")
    assert cache.get(DOC, PREFIX + "os.pa", SUFFIX) == CachedSuggestion(
        "th.getsize(path)", "mercury"
    )


def test_least_recently_used_entry_is_evicted_first() -> None:
    cache = CompletionCache(max_entries=2)
    cache.put("a", "x = ", "", "1", "e")
    cache.put("b", "y = ", "", "2", "e")
    assert cache.get("a", "x = ", "") is not None  # "a" is now the most recently used
    cache.put("c", "z = ", "", "3", "e")
    assert cache.get("b", "y = ", "") is None
    assert cache.get("a", "x = ", "") is not None
    assert cache.get("c", "z = ", "") is not None
    assert cache.stats.entries == 2


def test_entries_per_document_are_bounded() -> None:
    cache = CompletionCache(max_per_document=3)
    for number in range(5):
        cache.put(DOC, f"v{number} = ", "", str(number), "e")
    assert cache.stats.entries == 3
    assert cache.get(DOC, "v0 = ", "") is None
    assert cache.get(DOC, "v4 = ", "") == CachedSuggestion("4", "e")


def test_invalidate_forgets_one_document() -> None:
    cache = cache_with_suggestion()
    cache.put("file:///other.py", PREFIX, SUFFIX, SUGGESTION, "mercury")
    cache.invalidate(DOC)
    cache.invalidate("file:///never-seen.py")
    assert cache.get(DOC, PREFIX, SUFFIX) is None
    assert cache.get("file:///other.py", PREFIX, SUFFIX) is not None
    assert cache.stats.entries == 1


def test_stats_count_hits_and_misses() -> None:
    cache = cache_with_suggestion()
    cache.get(DOC, PREFIX, SUFFIX)
    cache.get(DOC, PREFIX + "o", SUFFIX)
    cache.get(DOC, PREFIX + "q", SUFFIX)
    stats = cache.stats
    assert (stats.hits, stats.misses, stats.entries) == (2, 1, 1)


@given(
    st.text(alphabet="ab \n\r\té🚀", max_size=60),
    st.text(alphabet="ab \n\té🚀", min_size=1, max_size=40),
    st.text(alphabet="ab \n)", max_size=20),
    st.data(),
)
def test_any_typed_part_serves_the_rest(
    prefix: str, suggestion: str, suffix: str, data: st.DataObject
) -> None:
    cache = CompletionCache()
    cache.put(DOC, prefix, suffix, suggestion, "e")
    typed = data.draw(st.integers(0, len(suggestion) - 1))
    hit = cache.get(DOC, prefix + suggestion[:typed], suffix)
    assert hit is not None
    assert prefix + suggestion[:typed] + hit.text == prefix + suggestion
