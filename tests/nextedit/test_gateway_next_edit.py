"""The gateway's next-edit doors, replayed as the clients' own sources build their requests:
Continue's Mercury provider (`core/nextEdit/providers/MercuryCoderNextEditProvider.ts`,
`core/llm/llms/Inception.ts`), a script following Inception's documented edit API, and Zed's
OpenAI-compatible provider with `prompt_format: "zeta"` (`crates/edit_prediction`,
`crates/zeta_prompt`), `zeta2` and `zeta2.1` (ported in `tests/support/zed_zeta2.py`, which
names the Zed files it follows)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.harness.fake_llm_server import Behaviour, FakeLLMServer
from tests.support import zed_zeta2
from tests.support.edit_prompts import (
    KEY_ENV,
    REGION,
    RENAMED,
    ZETA2_REGION,
    ZETA21_REGION,
    continue_user_message,
    zed_clean,
    zeta2_input,
    zeta_prompt,
)
from tests.support.gateway_process import Gateway, running_gateway
from tests.support.mercury_upstream import REGION as REGION_IN_PROMPT
from tests.support.mercury_upstream import finish_the_rename, user_content

# Continue's system prompt opens so (core/nextEdit/constants.ts, MERCURY_SYSTEM_PROMPT); the
# rest of it is long and reaches the upstream as it came.
CONTINUE_SYSTEM = (
    "You are Mercury, created by Inception Labs. You are an AI Agent and an expert at coding."
)


def continue_extract(message: str) -> str:
    """Continue's `MercuryCoderProvider.extractCompletion`."""
    start = message.find("```\n") + len("```\n")
    return message[start : message.rfind("\n```")]


@pytest.fixture(scope="module")
def mercury() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(Behaviour(text=finish_the_rename("value", "amount")), name="m") as server:
        yield server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, mercury: FakeLLMServer) -> Iterator[Gateway]:
    config = (
        "[routing]\nedit_deadline_ms = 5000\n[local]\nenabled = false\n"
        '[[endpoints]]\nname = "mercury"\nkind = "inception"\n'
        f'base_url = "{mercury.provider_base_url("inception")}"\n'
        'model = "mercury-edit-2"\nroles = ["edit"]\n'
    )
    with running_gateway(tmp_path_factory.mktemp("edit-gw"), config, env=KEY_ENV) as gw:
        yield gw


def test_continues_mercury_request_streamed(gateway: Gateway, mercury: FakeLLMServer) -> None:
    mercury.reset()
    api_base = f"{gateway.base_url}/"  # Continue's apiBase ends with a slash
    messages = [
        {"role": "system", "content": CONTINUE_SYSTEM},
        {"role": "user", "content": continue_user_message()},
    ]
    body = {
        "model": "mercury-coder",
        "messages": messages,
        "max_tokens": 1024,
        "temperature": 0.0,
        "top_p": None,
        "frequency_penalty": None,
        "presence_penalty": 1.5,
        "stop": ["<|endoftext|>"],
        "stream": True,
    }
    with httpx.stream("POST", f"{api_base}edit/completions", json=body, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        content = ""
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                delta = json.loads(line[6:])["choices"][0]["delta"]
                content += delta.get("content") or ""
    assert continue_extract(content) == RENAMED
    (asked,) = [r for r in mercury.requests if r.path.endswith("/edit/completions")]
    assert asked.payload["messages"] == messages  # passed through to Mercury as it came
    assert asked.payload["model"] == "mercury-edit-2"


def test_inception_style_request_not_streamed(gateway: Gateway) -> None:
    body = {
        "model": "mercury-edit-2",
        "messages": [{"role": "user", "content": continue_user_message()}],
        "max_tokens": 256,
    }
    response = httpx.post(f"{gateway.base_url}/edit/completions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["object"] == "chat.completion"
    content = answer["choices"][0]["message"]["content"]
    assert content == f"```\n{RENAMED}\n```"
    assert response.headers["x-gateway-ls-endpoint"] == "mercury"


def test_a_prompt_without_a_region_is_a_bad_request(gateway: Gateway) -> None:
    body = {"model": "mercury-edit-2", "messages": [{"role": "user", "content": "hello"}]}
    response = httpx.post(f"{gateway.base_url}/edit/completions", json=body, timeout=30)
    assert response.status_code == 400
    assert "next-edit prompt" in response.json()["error"]["message"]


def test_zeds_zeta_request_is_answered_as_zed_reads_it(
    gateway: Gateway, mercury: FakeLLMServer
) -> None:
    mercury.reset()
    end = "<|editable_region_end|>"
    body = {  # RawCompletionRequest: no temperature, no stream
        "model": "zeta",
        "prompt": zeta_prompt(),
        "max_tokens": 256,
        "stop": [end, f"{end}\n", f"{end}\n\n", f"{end}\n\n\n"],
    }
    response = httpx.post(f"{gateway.base_url}/completions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    answer = response.json()
    for field in ("id", "object", "created", "model", "usage"):
        assert field in answer
    assert set(answer["usage"]) >= {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert zed_clean(answer["choices"][0]["text"]) == RENAMED
    (asked,) = [r for r in mercury.requests if r.path.endswith("/edit/completions")]
    prompt = user_content(asked.payload)  # re-rendered in Mercury's format
    assert "<|code_to_edit|>" in prompt and "<|cursor|>" in prompt
    assert "+def scale(amount, factor):" in prompt


def test_a_zeta_prompt_with_nothing_to_change_comes_back_unchanged(
    tmp_path: Path,
) -> None:
    with FakeLLMServer(Behaviour(text=lambda body: "")) as quiet:
        config = (
            "[routing]\nedit_deadline_ms = 5000\n[local]\nenabled = false\n"
            '[[endpoints]]\nname = "mercury"\nkind = "inception"\n'
            f'base_url = "{quiet.provider_base_url("inception")}"\n'
            'model = "mercury-edit-2"\nroles = ["edit"]\n'
        )
        with running_gateway(tmp_path, config, env=KEY_ENV) as gw:
            body = {"model": "zeta", "prompt": zeta_prompt(), "max_tokens": 256, "stop": []}
            response = httpx.post(f"{gw.base_url}/completions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    assert zed_clean(response.json()["choices"][0]["text"]) == REGION


# (model name Zed users type, Zed's prompt, its stop tokens, its parser, the region)
ZETA2_FORMS = {
    "zeta2": (zed_zeta2.format_v0211, [], zed_zeta2.parse_v0211, ZETA2_REGION),
    "zeta2.1": (
        zed_zeta2.format_v0318,
        [zed_zeta2.V0318_END_MARKER],
        zed_zeta2.parse_v0318,
        ZETA21_REGION,
    ),
}


@pytest.mark.parametrize("model", sorted(ZETA2_FORMS))
def test_zeds_zeta2_requests_get_the_renamed_use(
    gateway: Gateway, mercury: FakeLLMServer, model: str
) -> None:
    write, stop, parse, region = ZETA2_FORMS[model]
    mercury.reset()
    body = zed_zeta2.request_body(write(zeta2_input(region)), model, 64, stop)
    response = httpx.post(f"{gateway.base_url}/completions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    text = response.json()["choices"][0]["text"]
    assert parse(text, region) == region.replace("value", "amount")
    (asked,) = [r for r in mercury.requests if r.path.endswith("/edit/completions")]
    prompt = user_content(asked.payload)  # read back, re-rendered in Mercury's format
    assert "+def scale(amount, factor):" in prompt
    assert "def helper():" in prompt  # the related file came along


def test_zeta21_answers_with_the_changed_block_alone(gateway: Gateway) -> None:
    write, stop, _, region = ZETA2_FORMS["zeta2.1"]
    body = zed_zeta2.request_body(write(zeta2_input(region)), "zeta2.1", 64, stop)
    text = httpx.post(f"{gateway.base_url}/completions", json=body, timeout=30).json()
    answer = text["choices"][0]["text"]
    assert answer.startswith("<|marker_1|>")
    assert "<|marker_3|>" not in answer and "def clamp" not in answer
    assert answer.endswith(zed_zeta2.V0318_END_MARKER)


@pytest.mark.parametrize("model", [*sorted(ZETA2_FORMS), "qwen2.5-coder"])
def test_zeta2_with_nothing_to_change_leaves_the_region_as_it_was(
    tmp_path: Path, model: str
) -> None:
    """Whatever the model is called, the prompt's markers make it a next edit; Zed's parser
    turns the answer into no change (Zeta 2 reads the region back whole: a `NO_EDITS` there
    would be written into the file; Zeta 2.1 reads one marker twice)."""
    write, stop, parse, region = ZETA2_FORMS.get(model, ZETA2_FORMS["zeta2"])
    with FakeLLMServer(Behaviour(text=lambda body: "")) as quiet:
        config = (
            "[routing]\nedit_deadline_ms = 5000\n[local]\nenabled = false\n"
            '[[endpoints]]\nname = "mercury"\nkind = "inception"\n'
            f'base_url = "{quiet.provider_base_url("inception")}"\n'
            'model = "mercury-edit-2"\nroles = ["edit"]\n'
        )
        with running_gateway(tmp_path, config, env=KEY_ENV) as gw:
            body = zed_zeta2.request_body(write(zeta2_input(region)), model, 64, stop)
            response = httpx.post(f"{gw.base_url}/completions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    text = response.json()["choices"][0]["text"]
    assert zed_zeta2.zed_region_after(parse(text, region)) == region


def test_a_whitespace_only_answer_is_filtered_out_for_zed_too(tmp_path: Path) -> None:
    """The filter between the model and the screen stands on the gateway's path as well."""

    def respaced(body: dict[str, object]) -> str:
        region = REGION_IN_PROMPT.search(user_content(body))
        assert region is not None
        return (
            "```python\n"
            + region["region"].replace("<|cursor|>", "").replace(" * ", "  *  ")
            + "\n```"
        )

    write, stop, parse, region = ZETA2_FORMS["zeta2"]
    with FakeLLMServer(Behaviour(text=respaced)) as spacey:
        config = (
            '[routing]\nedit_deadline_ms = 5000\nedit_eagerness = "high"\n'
            "[local]\nenabled = false\n"
            '[[endpoints]]\nname = "mercury"\nkind = "inception"\n'
            f'base_url = "{spacey.provider_base_url("inception")}"\n'
            'model = "mercury-edit-2"\nroles = ["edit"]\n'
        )
        with running_gateway(tmp_path, config, env=KEY_ENV) as gw:
            body = zed_zeta2.request_body(write(zeta2_input(region)), "zeta2", 64, stop)
            response = httpx.post(f"{gw.base_url}/completions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    assert parse(response.json()["choices"][0]["text"], region) == region
