"""Real agent clients complete a tool round trip through the gateway exactly as they do directly.

Each client runs twice against the same scripted tool-using model (bench/harness/scripted_agent.py):
once pointed at the model itself, once at `gateway-ls gateway` in front of it. The model asks
for a tool, the client runs it and sends the result back, and the model answers with what the
tool said. Each test asserts that round trip (which tool, which arguments, what came back, the
final answer) and that both runs saw the same one.

Clients: the `openai` SDK (chat completions and the Responses API, streamed and not), the
OpenAI Agents SDK (its default Responses mode and `OpenAIChatCompletionsModel`), `llm` (chat and
Responses), Codex CLI (`codex exec` with a custom provider, `wire_api = "responses"`) and
opencode (`opencode run` over chat completions), all installed by `make test`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import openai
import pytest
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam
from openai.types.shared_params import FunctionDefinition

from bench.harness.scripted_agent import ScriptedAgentServer, ToolCallPlan, ToolScript
from tests.support.gateway_process import Gateway, running_gateway
from tests.support.lsp_session import endpoint_toml
from tests.support.real_tools import tool_missing

REPO = Path(__file__).resolve().parents[2]
CODEX = REPO / ".tools" / "codex" / "node_modules" / ".bin" / "codex"
CODEX_TIMEOUT_S = 180
OPENCODE = REPO / ".tools" / "opencode" / "node_modules" / ".bin" / "opencode"
SHELL_MARKER = "round-trip-ok"
WEATHER_SCHEMA: FunctionDefinition = {
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
# The API takes `strict` as optional (the test sends none); the SDK's type requires it.
WEATHER_TOOL = cast(FunctionToolParam, {"type": "function", **WEATHER_SCHEMA})
CHAT_WEATHER_TOOL: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": WEATHER_SCHEMA,
}
QUESTION = "What is the weather in Oslo?"


def weather(city: str) -> str:
    return f"rain in {city}"


def choose(tools: dict[str, Any]) -> ToolCallPlan | None:
    """The scripted model's tool: the weather for the SDK clients and llm; for Codex CLI, its
    shell (`exec_command` in current releases, `shell` in older ones); for opencode, `bash`."""
    if "get_weather" in tools:
        return ToolCallPlan("get_weather", {"city": "Oslo"})
    if "exec_command" in tools:
        return ToolCallPlan("exec_command", {"cmd": f"echo {SHELL_MARKER}"})
    if "bash" in tools:
        return ToolCallPlan("bash", {"command": f"echo {SHELL_MARKER}", "description": "marker"})
    if "shell" in tools:
        return ToolCallPlan("shell", {"command": ["echo", SHELL_MARKER]})
    return None


@dataclass(frozen=True)
class RoundTrip:
    """What a client saw of one tool round trip."""

    tool: str
    arguments: dict[str, Any]
    result: str
    answer: str


EXPECTED = RoundTrip("get_weather", {"city": "Oslo"}, "rain in Oslo", "The tool said: rain in Oslo")


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedAgentServer]:
    with ScriptedAgentServer(ToolScript(choose)) as server:
        yield server


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, model: ScriptedAgentServer
) -> Iterator[Gateway]:
    config = "[routing]\nrefactor_deadline_ms = 60000\n[local]\nenabled = false\n" + endpoint_toml(
        "scripted", model.base_url, fim=False, roles='["agent"]'
    )
    with running_gateway(tmp_path_factory.mktemp("agents-gateway"), config) as running:
        yield running


def both(run: Any, model: ScriptedAgentServer, gateway: Gateway) -> tuple[Any, Any]:
    """The client's round trip directly against the model, then through the gateway."""
    direct = run(model.base_url)
    through = run(gateway.base_url)
    return direct, through


def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=60)


# --- the openai SDK ---------------------------------------------------------------------------


def chat_round_trip(base_url: str, *, stream: bool) -> RoundTrip:
    sdk = client(base_url)
    messages: list[Any] = [{"role": "user", "content": QUESTION}]

    def ask() -> Any:
        if not stream:
            return sdk.chat.completions.create(
                model="auto", messages=messages, tools=[CHAT_WEATHER_TOOL]
            ).choices[0]
        with sdk.chat.completions.stream(
            model="auto",
            messages=messages,
            tools=[CHAT_WEATHER_TOOL],
            stream_options={"include_usage": True},
        ) as events:
            completion = events.get_final_completion()
        assert completion.usage is not None and completion.usage.total_tokens > 0
        return completion.choices[0]

    first = ask()
    assert first.finish_reason == "tool_calls"
    (call,) = first.message.tool_calls
    arguments = json.loads(call.function.arguments)
    result = weather(**arguments)
    messages.append(first.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    final = ask()
    assert final.finish_reason == "stop"
    return RoundTrip(call.function.name, arguments, result, final.message.content or "")


def responses_round_trip(base_url: str, *, stream: bool) -> RoundTrip:
    sdk = client(base_url)
    items: list[Any] = [{"role": "user", "content": QUESTION}]

    def ask() -> Any:
        if not stream:
            return sdk.responses.create(
                model="auto", input=items, tools=[WEATHER_TOOL], store=False
            )
        with sdk.responses.stream(
            model="auto", input=items, tools=[WEATHER_TOOL], store=False
        ) as events:
            seen = list(events)
            response = events.get_final_response()
        numbers = [event.sequence_number for event in seen]
        assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
        assert seen[0].type == "response.created" and seen[-1].type == "response.completed"
        return response

    first = ask()
    assert first.status == "completed"
    (call,) = [item for item in first.output if item.type == "function_call"]
    arguments = json.loads(call.arguments)
    result = weather(**arguments)
    items += [item.model_dump(exclude_none=True) for item in first.output]
    items.append({"type": "function_call_output", "call_id": call.call_id, "output": result})
    final = ask()
    assert final.usage is not None and final.usage.total_tokens > 0
    return RoundTrip(call.name, arguments, result, final.output_text)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_openai_sdk_chat_tool_round_trip(
    model: ScriptedAgentServer, gateway: Gateway, stream: bool
) -> None:
    direct, through = both(lambda url: chat_round_trip(url, stream=stream), model, gateway)
    assert direct == EXPECTED
    assert through == direct


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_openai_sdk_responses_tool_round_trip(
    model: ScriptedAgentServer, gateway: Gateway, stream: bool
) -> None:
    direct, through = both(lambda url: responses_round_trip(url, stream=stream), model, gateway)
    assert direct == EXPECTED
    assert through == direct


# --- the OpenAI Agents SDK --------------------------------------------------------------------


def agent_round_trip(base_url: str, *, api: str, stream: bool) -> RoundTrip:
    agents = pytest.importorskip("agents", reason="openai-agents is not installed (dev extra)")
    agents.set_tracing_disabled(True)
    calls: list[tuple[str, dict[str, Any], str]] = []

    # The SDK is imported when the test runs (importorskip), so its decorator is untyped here.
    @agents.function_tool  # type: ignore[untyped-decorator]
    def get_weather(city: str) -> str:
        """The weather in a city."""
        result = weather(city)
        calls.append(("get_weather", {"city": city}, result))
        return result

    model_class = (
        agents.OpenAIResponsesModel if api == "responses" else agents.OpenAIChatCompletionsModel
    )

    async def run() -> str:
        async with openai.AsyncOpenAI(
            base_url=base_url, api_key="unused", max_retries=0, timeout=60
        ) as sdk:
            agent = agents.Agent(
                name="weather",
                instructions="Answer with the weather tool.",
                tools=[get_weather],
                model=model_class(model="auto", openai_client=sdk),
            )
            if not stream:
                result = await agents.Runner.run(agent, QUESTION)
                return str(result.final_output)
            streamed = agents.Runner.run_streamed(agent, QUESTION)
            async for _ in streamed.stream_events():
                pass
            return str(streamed.final_output)

    answer = asyncio.run(run())
    ((tool, arguments, result),) = calls
    return RoundTrip(tool, arguments, result, answer)


@pytest.mark.parametrize(
    ("api", "stream"),
    [("responses", False), ("responses", True), ("chat", False), ("chat", True)],
    ids=["responses", "responses-streamed", "chat", "chat-streamed"],
)
def test_agents_sdk_tool_round_trip(
    model: ScriptedAgentServer, gateway: Gateway, api: str, stream: bool
) -> None:
    direct, through = both(
        lambda url: agent_round_trip(url, api=api, stream=stream), model, gateway
    )
    assert direct == EXPECTED
    assert through == direct


# --- llm (the command-line tool) --------------------------------------------------------------

LLM = Path(sys.executable).parent / "llm"
WEATHER_FUNCTION = 'def get_weather(city: str) -> str:\n    return f"rain in {city}"\n'


def llm_round_trip(base_url: str, model: ScriptedAgentServer, home: Path, api: str) -> RoundTrip:
    """`llm --functions`: llm runs the Python function the model asks for and sends its result
    back; its model comes from `extra-openai-models.yaml` in a user dir of its own."""
    if not LLM.exists():
        tool_missing(f"llm not found at {LLM} (the dev extra installs it)")
    home.mkdir(parents=True)
    responses = "  responses: true\n" if api == "responses" else ""
    (home / "extra-openai-models.yaml").write_text(
        f'- model_id: gw\n  model_name: auto\n  api_base: "{base_url}"\n'
        f"  supports_tools: true\n{responses}",
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_"))}
    env["LLM_USER_PATH"] = str(home)
    model.reset()
    finished = subprocess.run(
        [str(LLM), "-m", "gw", "--no-log", "--functions", WEATHER_FUNCTION, QUESTION],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 0, finished.stderr[-4000:]
    ((tool, arguments),), results = _tool_traffic(model)
    return RoundTrip(tool, arguments, results[-1], finished.stdout.strip())


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_llm_cli_tool_round_trip(
    model: ScriptedAgentServer, gateway: Gateway, tmp_path: Path, api: str
) -> None:
    direct = llm_round_trip(model.base_url, model, tmp_path / "direct", api)
    through = llm_round_trip(gateway.base_url, model, tmp_path / "gateway", api)
    assert direct == EXPECTED
    assert through == direct


# --- Codex CLI --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShellRun:
    """What one agent run did: the shell call the model asked for, whether the command's
    output went back to the model, and whether the agent's last message quotes it."""

    tool: str
    arguments: dict[str, Any]
    result_reached_model: bool
    answer_quotes_result: bool


def codex_binary() -> Path:
    if not CODEX.exists():
        tool_missing(f"Codex CLI not found at {CODEX}: `make codex` installs it")
    return CODEX


def codex_round_trip(
    base_url: str, model: ScriptedAgentServer, home: Path, workdir: Path
) -> ShellRun:
    """`codex exec` with a custom provider at `base_url` speaking the Responses API. The
    sandbox is off (`danger-full-access`): Landlock and seccomp are not there for it as root
    in a container, and the only command run is the model's `echo`."""
    home.mkdir(parents=True)
    workdir.mkdir(parents=True)
    (home / "config.toml").write_text(
        'model = "auto"\n'
        'model_provider = "under_test"\n'
        "check_for_update_on_startup = false\n"
        "[model_providers.under_test]\n"
        'name = "under test"\n'
        f'base_url = "{base_url}"\n'
        'wire_api = "responses"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n",
        encoding="utf-8",
    )
    last_message = home / "last-message.txt"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
    env["CODEX_HOME"] = str(home)
    model.reset()
    finished = subprocess.run(
        [
            str(codex_binary()),
            "exec",
            "--skip-git-repo-check",
            "--sandbox",
            "danger-full-access",
            "--cd",
            str(workdir),
            "--output-last-message",
            str(last_message),
            "Print round-trip-ok with the shell.",
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CODEX_TIMEOUT_S,
    )
    assert finished.returncode == 0, finished.stderr[-4000:]
    calls, results = _tool_traffic(model)
    ((tool, arguments),) = calls
    answer = last_message.read_text(encoding="utf-8")
    return ShellRun(
        tool=tool,
        arguments=arguments,
        result_reached_model=any(SHELL_MARKER in result for result in results),
        answer_quotes_result=answer.startswith("The tool said:") and SHELL_MARKER in answer,
    )


def _tool_traffic(model: ScriptedAgentServer) -> tuple[list[tuple[str, dict[str, Any]]], list[str]]:
    """The tool calls the model made and the results sent back to it, read from the last
    request it received, in whichever API it came (Responses directly, chat through the
    gateway)."""
    last = [r.json for r in model.requests if r.method == "POST" and isinstance(r.json, dict)][-1]
    calls: list[tuple[str, dict[str, Any]]] = []
    results: list[str] = []
    for item in last.get("input") or []:
        if item.get("type") == "function_call":
            calls.append((item["name"], json.loads(item["arguments"])))
        elif item.get("type") == "function_call_output":
            results.append(str(item["output"]))
    for message in last.get("messages") or []:
        for call in message.get("tool_calls") or []:
            calls.append((call["function"]["name"], json.loads(call["function"]["arguments"])))
        if message.get("role") == "tool":
            results.append(str(message["content"]))
    return calls, results


def test_codex_cli_runs_a_shell_command_the_model_asked_for(
    model: ScriptedAgentServer, gateway: Gateway, tmp_path: Path
) -> None:
    if shutil.which("bash") is None:
        pytest.skip("Codex CLI runs commands through bash")
    direct = codex_round_trip(model.base_url, model, tmp_path / "direct", tmp_path / "work-d")
    direct_requests = len(model.requests)
    through = codex_round_trip(gateway.base_url, model, tmp_path / "gateway", tmp_path / "work-g")
    assert direct == ShellRun(
        tool="exec_command",
        arguments={"cmd": f"echo {SHELL_MARKER}"},
        result_reached_model=True,
        answer_quotes_result=True,
    )
    assert through == direct
    # Through the gateway the model was asked in chat completions, as often as directly.
    asked = [r.path for r in model.requests if r.method == "POST"]
    assert asked == ["/v1/chat/completions"] * direct_requests


# --- opencode ---------------------------------------------------------------------------------


def opencode_round_trip(
    base_url: str, model: ScriptedAgentServer, root: Path, cache: Path
) -> ShellRun:
    """`opencode run` with a provider at `base_url` over chat completions (the AI SDK's
    OpenAI-compatible provider, which opencode fetches from npm into `cache` on first use),
    bash allowed without asking."""
    if not OPENCODE.exists():
        tool_missing(f"opencode not found at {OPENCODE}: `make opencode` installs it")
    work = root / "work"
    work.mkdir(parents=True)
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "under-test": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "under test",
                "options": {"baseURL": base_url, "apiKey": "unused"},
                "models": {"auto": {"name": "auto", "tool_call": True}},
            }
        },
        "model": "under-test/auto",
        "permission": {"bash": "allow"},
        "autoupdate": False,
    }
    (root / "opencode.json").write_text(json.dumps(config), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OPENCODE"))}
    env.update(
        HOME=str(root / "home"),
        XDG_CONFIG_HOME=str(root / "config"),
        XDG_DATA_HOME=str(root / "data"),
        XDG_STATE_HOME=str(root / "state"),
        XDG_CACHE_HOME=str(cache),
        OPENCODE_CONFIG=str(root / "opencode.json"),
        OPENCODE_DISABLE_AUTOUPDATE="1",
    )
    model.reset()
    finished = subprocess.run(
        [str(OPENCODE), "run", "-m", "under-test/auto", "Print round-trip-ok with bash."],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CODEX_TIMEOUT_S,
    )
    assert finished.returncode == 0, finished.stderr[-4000:]
    calls, results = _tool_traffic(model)
    ((tool, arguments),) = calls
    answer = finished.stdout.strip()
    return ShellRun(
        tool=tool,
        arguments=arguments,
        result_reached_model=any(SHELL_MARKER in result for result in results),
        answer_quotes_result=answer.startswith("The tool said:") and SHELL_MARKER in answer,
    )


def test_opencode_runs_a_bash_command_the_model_asked_for(
    model: ScriptedAgentServer, gateway: Gateway, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"  # the provider package, fetched once for both runs
    direct = opencode_round_trip(model.base_url, model, tmp_path / "direct", cache)
    through = opencode_round_trip(gateway.base_url, model, tmp_path / "gateway", cache)
    assert direct == ShellRun(
        tool="bash",
        arguments={"command": f"echo {SHELL_MARKER}", "description": "marker"},
        result_reached_model=True,
        answer_quotes_result=True,
    )
    assert through == direct
