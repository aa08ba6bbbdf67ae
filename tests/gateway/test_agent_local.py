"""End to end with the real local model: an agent's request that must stay on this machine is
served by the bundled Gemma 3 270M through the gateway, tools and all, or refused with a reason;
nothing of it reaches the remote endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
    ChatCompletionNamedToolChoiceParam,
)

from bench.harness.fake_llm_server import FakeLLMServer
from tests.support.gateway_process import running_gateway
from tests.support.lsp_session import endpoint_toml

pytestmark = pytest.mark.model

SENSITIVE = {"X-Gateway-LS-Sensitive": "1"}
LOOKUP_TOOL: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a word up in the dictionary.",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string"}},
            "required": ["word"],
        },
    },
}
ASK: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Look up the word 'gateway'."}]


def local_config(model_path: Path, remote_url: str, tool_calls: str) -> str:
    return (
        f'[local]\nmodel_path = "{model_path.as_posix()}"\nn_ctx = 2048\n'
        f'tool_calls = "{tool_calls}"\n'
        + endpoint_toml("remote", remote_url, fim=False, roles='["agent"]')
    )


def test_a_model_whose_template_has_no_tool_calling_is_refused_with_the_reason(
    tmp_path: Path, bundled_model_path: Path
) -> None:
    with (
        FakeLLMServer(name="remote") as remote,
        running_gateway(tmp_path, local_config(bundled_model_path, remote.base_url, "auto")) as gw,
    ):
        client = gw.client().with_options(default_headers=SENSITIVE, timeout=180)
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="auto", messages=ASK, tools=[LOOKUP_TOOL])
        assert caught.value.code == "tools_not_supported"
        assert "chat template has no tool calling" in caught.value.message
        assert remote.requests == []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_local_model_calls_a_tool_with_chatml_function_calling(
    tmp_path: Path, bundled_model_path: Path, stream: bool
) -> None:
    with (
        FakeLLMServer(name="remote") as remote,
        running_gateway(
            tmp_path, local_config(bundled_model_path, remote.base_url, "chatml")
        ) as gw,
    ):
        client = gw.client().with_options(default_headers=SENSITIVE, timeout=180)
        forced: ChatCompletionNamedToolChoiceParam = {
            "type": "function",
            "function": {"name": "lookup"},
        }
        completion: ChatCompletion
        if stream:
            with client.chat.completions.stream(
                model="auto", messages=ASK, tools=[LOOKUP_TOOL], tool_choice=forced, max_tokens=48
            ) as events:
                for _ in events:
                    pass
                completion = events.get_final_completion()
        else:
            completion = client.chat.completions.create(
                model="auto", messages=ASK, tools=[LOOKUP_TOOL], tool_choice=forced, max_tokens=48
            )
        choice = completion.choices[0]
        assert completion.model == "local"
        assert choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls or []
        assert isinstance(call, ChatCompletionMessageFunctionToolCall)
        assert call.id and call.function.name == "lookup"
        # A grammar made from the tool's schema holds the arguments to it (greedy decoding:
        # the same every run).
        arguments = json.loads(call.function.arguments)
        assert isinstance(arguments.get("word"), str) and arguments["word"]
        assert remote.requests == []
