"""The gateway's next-edit doors, replayed as the clients' own sources build their requests:
Continue's Mercury provider (`core/nextEdit/providers/MercuryCoderNextEditProvider.ts`,
`core/llm/llms/Inception.ts`), a script following Inception's documented edit API, and Zed's
OpenAI-compatible provider with `prompt_format: "zeta"` (`crates/edit_prediction`,
`crates/zeta_prompt`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.fake_llm_server import Behaviour, FakeLLMServer
from tests.support.gateway_process import Gateway, running_gateway
from tests.support.mercury_upstream import finish_the_rename, user_content

KEY_ENV = {"INCEPTION_API_KEY": "test-key"}
BEFORE = "def scale(amount, factor):\n"
REGION = "    result = value * factor\n    return result"
RENAMED = "    result = amount * factor\n    return result"
AFTER = "\n\nprint(scale(2, 3))"
# Continue's system prompt opens so (core/nextEdit/constants.ts, MERCURY_SYSTEM_PROMPT); the
# rest of it is long and reaches the upstream as it came.
CONTINUE_SYSTEM = (
    "You are Mercury, created by Inception Labs. You are an AI Agent and an expert at coding."
)
HISTORY = (
    "--- scale.py\n+++ scale.py\n@@ -1,3 +1,3 @@\n-def scale(value, factor):\n"
    "+def scale(amount, factor):\n     result = value * factor\n     return result"
)


def continue_user_message() -> str:
    """As Continue's template renders it: snippets, the file with the region and cursor, the
    diff history (core/nextEdit/templating/NextEditPromptEngine.ts, mercuryCoderNextEdit.ts)."""
    current = (
        BEFORE
        + "<|code_to_edit|>\n"
        + REGION.replace("value", "<|cursor|>value", 1)
        + "\n<|/code_to_edit|>"
        + AFTER
    )
    snippet = (
        "<|recently_viewed_code_snippet|>\ncode_snippet_file_path: util.py\n"
        "def helper():\n    return 1\n<|/recently_viewed_code_snippet|>"
    )
    return (
        f"<|recently_viewed_code_snippets|>\n{snippet}\n<|/recently_viewed_code_snippets|>\n\n"
        f"<|current_file_content|>\ncurrent_file_path: scale.py\n{current}\n"
        "<|/current_file_content|>\n\n"
        f"<|edit_diff_history|>\n{HISTORY}\n<|/edit_diff_history|>\n"
    )


def continue_extract(message: str) -> str:
    """Continue's `MercuryCoderProvider.extractCompletion`."""
    start = message.find("```\n") + len("```\n")
    return message[start : message.rfind("\n```")]


def zed_clean(output: str) -> str:
    """Zed's `clean_zeta1_model_output`, the cursor marker dropped."""
    content = output.replace("<|user_cursor_is_here|>", "")
    start = content.find("<|editable_region_start|>")
    start = 0 if start < 0 else start + len("<|editable_region_start|>")
    if content[start : start + 1] == "\n":
        start += 1
    end = content.find("<|editable_region_end|>")
    end = len(content) if end < 0 else end
    if end > 0 and content[end - 1] == "\n":
        end -= 1
    return content[start:end]


def zeta_prompt() -> str:
    """As `zeta_prompt::zeta1::format_zeta1_from_input` writes it."""
    instruction = (
        "### Instruction:\nYou are a code completion assistant and your task is to analyze user "
        "edits and then rewrite an excerpt that the user provides, suggesting the appropriate "
        "edits within the excerpt, taking into account the cursor location.\n\n### User Edits:\n\n"
    )
    events = (
        "User edited scale.py:\n```diff\n@@ -1,3 +1,3 @@\n-def scale(value, factor):\n"
        "+def scale(amount, factor):\n     result = value * factor\n     return result\n```"
    )
    excerpt = (
        "```scale.py\n<|start_of_file|>\n"
        + BEFORE
        + "<|editable_region_start|>\n"
        + REGION.replace("value", "<|user_cursor_is_here|>value", 1)
        + "\n<|editable_region_end|>"
        + AFTER
        + "\n```"
    )
    return instruction + events + "\n\n### User Excerpt:\n\n" + excerpt + "\n\n### Response:\n"


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
    assert asked.json["messages"] == messages  # passed through to Mercury as it came
    assert asked.json["model"] == "mercury-edit-2"


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
    prompt = user_content(asked.json)  # re-rendered in Mercury's format
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
