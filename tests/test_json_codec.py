"""orjson in the JSON-RPC path reads and writes every message as the json module would."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lsp_server.json_codec import decode, encode, loads

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=30,
)


def recording_hook() -> tuple[list[list[str]], Any]:
    seen: list[list[str]] = []

    def hook(obj: dict[str, Any]) -> dict[str, Any]:
        seen.append(sorted(obj))
        return {"hooked": obj}

    return seen, hook


@given(JSON)
def test_decoding_matches_json_loads_and_its_object_hook(value: Any) -> None:
    body = json.dumps(value).encode()
    ours, our_hook = recording_hook()
    theirs, their_hook = recording_hook()
    assert decode(body, our_hook) == json.loads(body, object_hook=their_hook)
    assert ours == theirs  # every object, innermost first


@given(JSON)
def test_encoding_reads_back_as_json_dumps_does(value: Any) -> None:
    assert json.loads(encode(value, str)) == json.loads(json.dumps(value, default=str))


def test_a_float_that_is_not_finite_is_written_as_valid_json() -> None:
    assert encode({"x": float("inf")}, str) == b'{"x":null}'


def test_what_orjson_refuses_goes_through_json() -> None:
    assert decode(b'{"id": 1, "n": [123456789012345678901234567890]}', dict) == {
        "id": 1,
        "n": [123456789012345678901234567890],
    }
    assert decode(b"-123456789012345678901234567890", dict) == -123456789012345678901234567890
    assert decode('{"id": 2}'.encode("utf-16"), dict) == {"id": 2}
    assert json.loads(encode({"big": 2**70, 1: "int key"}, str)) == {
        "big": 2**70,
        "1": "int key",
    }


def test_objects_json_cannot_encode_go_to_the_default() -> None:
    class Opaque:
        def __init__(self) -> None:
            self.field = "value"

    assert json.loads(encode({"x": Opaque()}, lambda o: o.__dict__)) == {"x": {"field": "value"}}


def test_text_beyond_ascii_is_written_as_utf8() -> None:
    assert encode({"text": "é→😀"}, str) == '{"text":"é→😀"}'.encode()


@given(JSON)
def test_loading_matches_json_loads(value: Any) -> None:
    body = json.dumps(value).encode()
    assert loads(body) == json.loads(body)


def test_integers_past_64_bits_and_large_floats_load_as_json_reads_them() -> None:
    body = b'{"big": [123456789012345678901234, -9223372036854775809], "far": 1.5e300}'
    assert loads(body) == json.loads(body)
    assert loads(body)["big"][0] == 123456789012345678901234


@given(JSON)
def test_loading_text_matches_json_loads(value: Any) -> None:
    text = json.dumps(value)
    assert loads(text) == json.loads(text)


def test_a_long_integer_is_read_as_json_reads_it_in_bytes_and_in_text() -> None:
    for body in ('{"n": 123456789012345678901234567890}', "[-9223372036854775809]"):
        assert loads(body.encode()) == json.loads(body)
        assert loads(body) == json.loads(body)
    assert loads(b'{"n": 1234567890123456789.5, "s": "12345678901234567890"}') == {
        "n": 1234567890123456789.5,
        "s": "12345678901234567890",
    }


def test_a_19_digit_integer_is_read_exactly_wherever_it_falls_in_a_long_body() -> None:
    # The check samples every ninth byte: the shortest overflowing integer, at each of the nine
    # offsets, in a body of text around it.
    text = "an agent's instructions, read once a turn. " * 40
    for shift in range(9):
        body = f'{{"instructions": "{text}{"x" * shift}", "seed": 9223372036854775808}}'
        assert loads(body.encode())["seed"] == 9223372036854775808
        assert loads(body) == json.loads(body)
