"""The keyword model the real agents talk to: what it answers, and its new wire formats (OpenAI
Responses, Gemini, Anthropic ``count_tokens``) held to the official SDKs where one is installed.
The real Claude Code, Codex and Gemini CLI reading it are in ``tests/protocols/test_acp_real_*.py``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from tests.servers.scripted_keyword import API_KEY, KeywordModel, decide, read_anthropic, read_gemini, read_responses
from tests.servers.serve import serve


@pytest.fixture(scope="module")
def model() -> Iterator[tuple[KeywordModel, str]]:
    keyword = KeywordModel()
    with serve(keyword.app) as url:
        yield keyword, url


def ask(text: str) -> dict[str, object]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_a_prompt_becomes_the_agents_own_tool_call_then_the_result_is_quoted() -> None:
    tools = [{"name": "Bash"}, {"name": "Write"}, {"name": "ToolSearch"}]
    claude = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "<system-reminder>x</system-reminder>"},
                                         {"type": "text", "text": "use the shell: echo hi"}]},
        ],
        "tools": tools,
    }  # fmt: skip
    first = decide(read_anthropic(claude))
    assert [(c.name, json.loads(c.arguments)["command"]) for c in first.tool_calls] == [("Bash", "echo hi")]
    claude["messages"] += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "hi\n"}]},
    ]
    assert decide(read_anthropic(claude)).text == "The tool said: hi\n"


def test_the_kernel_is_found_by_each_agents_name_for_it() -> None:
    deferred = read_anthropic({"messages": [{"role": "user", "content": "use the kernel: 1+1"}],
                               "tools": [{"name": "ToolSearch"}]})  # fmt: skip
    assert decide(deferred).tool_calls[0].name == "ToolSearch"  # Claude Code loads MCP tools first
    codex = read_responses({"input": [ask("use the kernel: 1+1")],
                            "tools": [{"type": "namespace", "name": "mcp__notebook",
                                       "tools": [{"type": "function", "name": "run_code"}]}]})  # fmt: skip
    call = decide(codex).tool_calls[0]
    assert (call.namespace, call.name, json.loads(call.arguments)) == ("mcp__notebook", "run_code", {"code": "1+1"})
    gemini = read_gemini({"contents": [{"role": "user", "parts": [{"text": "use the kernel: 1+1"}]}],
                          "tools": [{"functionDeclarations": [{"name": "mcp_notebook_run_code"}]}]})  # fmt: skip
    assert decide(gemini).tool_calls[0].name == "mcp_notebook_run_code"


def test_codex_writes_with_a_freeform_patch() -> None:
    ex = read_responses(
        {"input": [ask("write a file /w/a.txt: one\ntwo")], "tools": [{"type": "custom", "name": "apply_patch"}]}
    )
    call = decide(ex).tool_calls[0]
    assert call.kind == "custom"
    assert call.arguments == "*** Begin Patch\n*** Add File: /w/a.txt\n+one\n+two\n*** End Patch\n"


def test_openai_sdk_reads_a_streamed_response_with_a_namespaced_call(model: tuple[KeywordModel, str]) -> None:
    keyword, url = model
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0, timeout=10)
    tools = [{"type": "namespace", "name": "mcp__notebook", "tools": [{"type": "function", "name": "run_code"}]}]
    with client.responses.stream(
        model="m", input=[ask("use the kernel: x = 1 #kw-sdk")],  # type: ignore[list-item]
        extra_body={"tools": tools},
    ) as stream:  # fmt: skip
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds
    item = final.output[0]
    assert item.type == "function_call"
    assert json.loads(item.arguments) == {"code": "x = 1 #kw-sdk"}
    assert item.namespace == "mcp__notebook"  # the SDK's own field: how Codex's MCP tools come back
    assert final.usage is not None
    assert final.usage.input_tokens == 1200
    assert keyword.about("#kw-sdk")[0]["answer"]["namespace"] == "mcp__notebook"
    text = client.responses.create(model="m", input=[ask("hello there")])  # type: ignore[list-item]
    assert text.output_text == "Scripted answer: hello there"


def test_the_responses_stream_is_framed_as_the_api_frames_it(model: tuple[KeywordModel, str]) -> None:
    _, url = model
    body = {"model": "m", "stream": True, "input": [ask("hello")]}
    raw = httpx.post(f"{url}/v1/responses", json=body, headers={"authorization": f"Bearer {API_KEY}"}).text
    frames = raw[:-2].split("\n\n")
    for n, frame in enumerate(frames):
        event, data = frame.split("\n")
        payload = json.loads(data.removeprefix("data: "))
        assert event == f"event: {payload['type']}"
        assert payload["sequence_number"] == n
    deltas = [json.loads(f.split("\n")[1][6:]) for f in frames if "output_text.delta" in f]
    assert all(d["obfuscation"] and d["logprobs"] == [] for d in deltas)
    assert "".join(d["delta"] for d in deltas) == "Scripted answer: hello"


def test_anthropic_sdk_counts_tokens(model: tuple[KeywordModel, str]) -> None:
    _, url = model
    client = anthropic.Anthropic(base_url=url, api_key=API_KEY, max_retries=0, timeout=10)
    count = client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hello " * 40}])
    assert count.input_tokens > 10


def test_gemini_streams_sse_with_crlf_frames_and_a_finish_on_the_last(model: tuple[KeywordModel, str]) -> None:
    _, url = model
    body = {"contents": [{"role": "user", "parts": [{"text": "use the shell: ls"}]}],
            "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]}  # fmt: skip
    headers = {"x-goog-api-key": API_KEY}
    path = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    raw = httpx.post(f"{url}{path}?alt=sse", json=body, headers=headers).text
    assert raw.endswith("\r\n\r\n")
    chunks = [json.loads(f.removeprefix("data: ")) for f in raw[:-4].split("\r\n\r\n")]
    assert '{"candidates": [{"content": {"parts": [' in raw  # Google's spacing
    last = chunks[-1]["candidates"][0]
    assert last["finishReason"] == "STOP"
    assert last["content"]["parts"][0]["functionCall"] == {
        "name": "run_shell_command",
        "args": {"command": "ls", "description": "Run the command the user gave"},
    }
    assert "thoughtSignature" in last["content"]["parts"][0]
    assert chunks[-1]["usageMetadata"]["promptTokenCount"] == 1200
    whole = httpx.post(f"{url}{path.replace('streamGenerateContent', 'generateContent')}", json=body,
                       headers=headers).json()  # fmt: skip
    assert whole["candidates"][0]["content"]["parts"][0]["functionCall"]["name"] == "run_shell_command"
    array = httpx.post(f"{url}{path}", json=body, headers=headers).json()  # no alt=sse: one JSON array
    assert array[-1]["candidates"][0]["finishReason"] == "STOP"
    bad = httpx.post(f"{url}{path}?alt=sse", json=body, headers={"x-goog-api-key": "wrong"})
    assert bad.status_code == 400
    assert bad.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_a_structured_question_gets_json_that_fits_its_schema(model: tuple[KeywordModel, str]) -> None:
    _, url = model
    schema = {"type": "object", "properties": {"reasoning": {"type": "string"},
                                               "next_speaker": {"type": "string", "enum": ["user", "model"]}},
              "required": ["reasoning", "next_speaker"]}  # fmt: skip
    body = {"contents": [{"role": "user", "parts": [{"text": "who speaks next?"}]}],
            "generationConfig": {"responseJsonSchema": schema}}  # fmt: skip
    answer = httpx.post(f"{url}/v1beta/models/m:generateContent", json=body, headers={"x-goog-api-key": API_KEY})
    text = answer.json()["candidates"][0]["content"]["parts"][0]["text"]
    assert json.loads(text) == {"reasoning": "scripted", "next_speaker": "user"}
