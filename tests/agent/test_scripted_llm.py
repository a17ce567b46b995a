"""The scripted model server, held to the wire by the official openai and anthropic SDKs."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import anyio
import httpx
import openai
import pytest
from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam

from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ToolCallSpec, Turn, thinking_signature

pytestmark = pytest.mark.anyio

USER = [{"role": "user", "content": "hi"}]
CHAT_USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
CLAUDE_USER: list[MessageParam] = [{"role": "user", "content": "hi"}]
OPENAI_AUTH = {"authorization": "Bearer test-key"}
ANTHROPIC_AUTH = {"x-api-key": "test-key", "anthropic-version": "2023-06-01"}
CHAT = {"model": "m", "messages": USER}
MESSAGES = {"model": "m", "max_tokens": 64, "messages": USER}


@asynccontextmanager
async def oai(url: str, key: str = "test-key") -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=5) as client:
        yield client


@asynccontextmanager
async def claude(url: str, key: str = "test-key") -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(base_url=url, api_key=key, max_retries=0, timeout=5) as client:
        yield client


def frames(body: str) -> list[str]:
    """The SSE events of a body; each must end with a blank line."""
    assert body.endswith("\n\n")
    return body[:-2].split("\n\n")


def datas(body: str) -> list[str]:
    return [f.split("data: ", 1)[1] for f in frames(body)]


def is_json(s: str) -> bool:
    try:
        json.loads(s)
    except ValueError:
        return False
    return True


async def drain_chat(client: openai.AsyncOpenAI, into: list[Any] | None = None) -> None:
    stream = await client.chat.completions.create(model="m", messages=CHAT_USER, stream=True)
    async for chunk in stream:
        (into if into is not None else []).append(chunk)


async def drain_messages(client: anthropic.AsyncAnthropic, into: list[str] | None = None) -> None:
    async with client.messages.stream(model="m", max_tokens=8, messages=CLAUDE_USER) as stream:
        async for event in stream:
            (into if into is not None else []).append(event.type)


def function_calls(calls: Sequence[Any] | None) -> list[tuple[str, str]]:
    return [(t.function.name, t.function.arguments) for t in calls or []]


async def eventually(cond: Callable[[], bool]) -> None:
    """Server state changes on the server's thread; poll for it (bounded by the caller's fail_after)."""
    while not cond():  # noqa: ASYNC110 - the condition lives on another thread
        await anyio.sleep(0.01)


# ── OpenAI Chat Completions ────────────────────────────────────────────────


async def test_openai_text_stream_bytes(running: Running) -> None:
    """Frame layout, key order and the [DONE] sentinel as api.openai.com sends them."""
    with running(Turn(text="Hello there!"), padding=False) as (_, url):
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{url}/v1/chat/completions", json={**CHAT, "stream": True}, headers=OPENAI_AUTH)
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert r.headers["x-request-id"].startswith("req_")
    data = datas(r.text)
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    keys = ["id", "object", "created", "model", "service_tier", "system_fingerprint", "choices"]
    assert [list(c) for c in chunks] == [keys] * len(chunks)  # no "usage" key unless include_usage was asked for
    role = {"role": "assistant", "content": "", "refusal": None}
    assert chunks[0]["choices"] == [{"index": 0, "delta": role, "logprobs": None, "finish_reason": None}]
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:-1]] == ["Hell", "o th", "ere!"]
    assert chunks[-1]["choices"] == [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]
    assert {c["id"] for c in chunks} == {chunks[0]["id"]}
    assert chunks[0]["id"].startswith("chatcmpl-")
    assert chunks[0]["system_fingerprint"].startswith("fp_")
    assert data[1] == json.dumps(chunks[1], separators=(",", ":"))  # compact JSON


async def test_openai_sdk_text_and_usage_chunk(running: Running) -> None:
    with running(Turn(text="Olá, mundo!", input_tokens=20, output_tokens=5)) as (_, url):
        async with oai(url) as client:
            stream = await client.chat.completions.create(
                model="m", messages=CHAT_USER, stream=True, stream_options={"include_usage": True}
            )
            chunks = [c async for c in stream]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Olá, mundo!"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert all(c.object == "chat.completion.chunk" and c.model == "scripted-model" for c in chunks)
    usage = chunks[-1].usage
    assert chunks[-1].choices == []
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (20, 5, 25)
    assert all(c.usage is None for c in chunks[:-1])
    assert all(c.obfuscation for c in chunks)  # the live API's length padding, on by default


async def test_openai_sdk_thinking_then_text(running: Running) -> None:
    """Reasoning arrives as delta.reasoning_content (llama.cpp / vLLM / DeepSeek extension)."""
    turn = Turn(thinking="First, think.", text="Answer.", chunk_size=3)
    with running(turn) as (_, url):
        async with oai(url) as client:
            stream = await client.chat.completions.create(model="m", messages=CHAT_USER, stream=True)
            deltas = [c.choices[0].delta async for c in stream]
    reasoning = [(d.model_extra or {}).get("reasoning_content", "") for d in deltas]
    assert "".join(reasoning) == "First, think."
    assert "".join(d.content or "" for d in deltas) == "Answer."
    kinds = "".join("r" if r else "c" if d.content else "-" for r, d in zip(reasoning, deltas, strict=True))
    assert kinds == "-" + "r" * 5 + "c" * 3 + "-"  # role chunk, all reasoning before any content, finish chunk


async def test_openai_sdk_two_tool_calls_accumulate(running: Running) -> None:
    calls = [ToolCallSpec("add", '{"a": 2, "b": 3}'), ToolCallSpec("lookup", '{"q": "ünï \\"q\\""}', id="call_X")]
    with running(Turn(tool_calls=calls, chunk_size=5)) as (_, url):
        async with oai(url) as client, client.chat.completions.stream(model="m", messages=CHAT_USER) as stream:
            final = await stream.get_final_completion()
    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    tool_calls = choice.message.tool_calls or []
    assert function_calls(tool_calls) == [(c.name, c.arguments) for c in calls]
    assert tool_calls[0].id.startswith("call_")
    assert len(tool_calls[0].id) == 29
    assert tool_calls[1].id == "call_X"


async def test_openai_tool_call_wire_shape(running: Running) -> None:
    """First fragment carries id, type and name with empty arguments; later ones only argument text."""
    turn = Turn(tool_calls=[ToolCallSpec("f", '{"k":1}', id="call_1")], chunk_size=4)
    with running(turn, padding=False) as (_, url):
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{url}/v1/chat/completions", json={**CHAT, "stream": True}, headers=OPENAI_AUTH)
    deltas = [json.loads(d)["choices"][0]["delta"] for d in datas(r.text)[:-1]]
    opener = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
    assert deltas == [
        {"role": "assistant", "content": None},
        {"tool_calls": [opener]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"k"'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]},
        {},
    ]


async def test_openai_non_streaming(running: Running) -> None:
    turn = Turn(text="plain", tool_calls=[ToolCallSpec("f", "{}")], input_tokens=3, output_tokens=4)
    with running(turn, turn) as (_, url):
        async with httpx.AsyncClient() as http:
            raw = await http.post(f"{url}/v1/chat/completions", json=CHAT, headers=OPENAI_AUTH)
        async with oai(url) as client:
            done = await client.chat.completions.create(model="m", messages=CHAT_USER)
    assert raw.text.startswith('{\n  "id": "chatcmpl-')  # pretty-printed, like the API
    assert raw.text.endswith("}\n")
    assert done.object == "chat.completion"
    assert done.choices[0].message.content == "plain"
    assert done.choices[0].finish_reason == "tool_calls"
    assert function_calls(done.choices[0].message.tool_calls) == [("f", "{}")]
    assert done.usage is not None
    assert done.usage.total_tokens == 7


async def test_llamacpp_flavor(running: Running) -> None:
    """llama-server's chunks: key order, no arguments key on the opening tool fragment, timings."""
    turn = Turn(thinking="hm", text="ok", tool_calls=[ToolCallSpec("f", '{"a":1}')], chunk_size=8)
    with running(turn, turn, flavor="llama.cpp") as (_, url):
        async with httpx.AsyncClient() as http:
            body = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}
            r = await http.post(f"{url}/v1/chat/completions", json=body, headers=OPENAI_AUTH)
        async with oai(url) as client, client.chat.completions.stream(model="m", messages=CHAT_USER) as stream:
            final = await stream.get_final_completion()
    chunks = [json.loads(d) for d in datas(r.text)[:-1]]
    assert list(chunks[0]) == ["choices", "created", "id", "model", "system_fingerprint", "object"]
    role = {"role": "assistant", "content": None}
    assert chunks[0]["choices"] == [{"finish_reason": None, "index": 0, "delta": role}]
    assert chunks[1]["choices"][0]["delta"] == {"reasoning_content": "hm"}
    opener = chunks[3]["choices"][0]["delta"]["tool_calls"][0]
    assert opener["function"] == {"name": "f"}
    assert len(opener["id"]) == 32
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == []
    assert {"usage", "timings"} <= set(chunks[-1])
    assert function_calls(final.choices[0].message.tool_calls) == [("f", '{"a":1}')]


# ── Anthropic Messages ─────────────────────────────────────────────────────


async def test_anthropic_stream_bytes(running: Running) -> None:
    """Event names, the ping, compact JSON: the shape of the SDK's own recorded fixtures."""
    with running(Turn(text="Hello!", input_tokens=11, output_tokens=6), padding=False) as (_, url):
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{url}/v1/messages", json={**MESSAGES, "stream": True}, headers=ANTHROPIC_AUTH)
    assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert r.headers["request-id"].startswith("req_")
    events = frames(r.text)
    assert [e.split("\n")[0].removeprefix("event: ") for e in events] == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[1] == (
        "event: content_block_start\n"
        'data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'
    )
    assert events[2] == 'event: ping\ndata: {"type": "ping"}'
    assert events[3] == (
        "event: content_block_delta\n"
        'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hell"}}'
    )
    assert events[-2] == (
        "event: message_delta\n"
        'data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},'
        '"usage":{"input_tokens":11,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":6}}'
    )
    assert events[-1] == 'event: message_stop\ndata: {"type":"message_stop"}'
    start = json.loads(events[0].split("data: ")[1])["message"]
    assert start["id"].startswith("msg_01")
    assert (start["content"], start["stop_reason"], start["usage"]["input_tokens"]) == ([], None, 11)


async def test_anthropic_padding_like_live_api(running: Running) -> None:
    with running(Turn(text="Hello!", chunk_size=2)) as (_, url):
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{url}/v1/messages", json={**MESSAGES, "stream": True}, headers=ANTHROPIC_AUTH)
    payloads = datas(r.text)
    assert any(d.endswith(" }") for d in payloads)  # whitespace before the closing brace
    assert all(is_json(d) for d in payloads)


async def test_anthropic_sdk_final_message(running: Running) -> None:
    calls = [ToolCallSpec("get_weather", '{"city": "Paris", "days": [1, 2]}', id="toolu_01A"), ToolCallSpec("noop", "")]
    turn = Turn(thinking="Let me think about the weather.", text="Checking.", tool_calls=calls, chunk_size=6)
    with running(turn) as (model, url):
        async with (
            claude(url) as client,
            client.messages.stream(model="m", max_tokens=64, messages=CLAUDE_USER) as stream,
        ):
            texts = [t async for t in stream.text_stream]
            final = await stream.get_final_message()
    assert "".join(texts) == "Checking."
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use", "tool_use"]
    think, text, tool, noop = final.content
    assert think.type == "thinking"
    assert (think.thinking, think.signature) == (turn.thinking, thinking_signature(turn.thinking))
    assert text.type == "text"
    assert text.text == "Checking."
    assert tool.type == "tool_use"
    assert (tool.id, tool.name, tool.input) == ("toolu_01A", "get_weather", {"city": "Paris", "days": [1, 2]})
    assert noop.type == "tool_use"
    assert noop.input == {}
    assert noop.id.startswith("toolu_01")
    assert final.stop_reason == "tool_use"
    assert (final.usage.input_tokens, final.usage.output_tokens) == (10, turn.completion_tokens())
    assert model.paths == ["/v1/messages"]


async def test_non_streaming_and_stop_reason_translation(running: Running) -> None:
    with running(Turn(text="cut", stop_reason="length"), Turn(text="cut", stop_reason="max_tokens")) as (_, url):
        async with claude(url) as client:
            first = await client.messages.create(model="m", max_tokens=64, messages=CLAUDE_USER)
        async with oai(url) as client:
            second = await client.chat.completions.create(model="m", messages=CHAT_USER)
    assert first.stop_reason == "max_tokens"
    assert [b.type for b in first.content] == ["text"]
    assert second.choices[0].finish_reason == "length"


# ── faults ─────────────────────────────────────────────────────────────────


async def test_status_faults_raise_sdk_errors(running: Running) -> None:
    turns = [Turn(status=429, retry_after=2), Turn(status=500), Turn(status=429, retry_after=0.5), Turn(status=529)]
    with running(*turns) as (model, url):
        async with oai(url) as client:
            with pytest.raises(openai.RateLimitError) as rate:
                await client.chat.completions.create(model="m", messages=CHAT_USER, stream=True)
            with pytest.raises(openai.InternalServerError):
                await client.chat.completions.create(model="m", messages=CHAT_USER)
        async with claude(url) as ac:
            with pytest.raises(anthropic.RateLimitError) as arate:
                await ac.messages.create(model="m", max_tokens=8, messages=CLAUDE_USER, stream=True)
            with pytest.raises(anthropic.OverloadedError):
                await ac.messages.create(model="m", max_tokens=8, messages=CLAUDE_USER)
    assert rate.value.response.headers["retry-after"] == "2"
    assert rate.value.code == "rate_limit_exceeded"
    assert arate.value.response.headers["retry-after"] == "0.5"
    assert arate.value.body == {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "Number of request tokens has exceeded your per-minute rate limit",
        },
        "request_id": arate.value.request_id,
    }
    assert len(model.requests) == 4  # failed requests are recorded too


async def test_auth_failures_consume_no_turn(running: Running) -> None:
    with running(Turn(text="one"), Turn(text="two")) as (model, url):
        async with oai(url, key="wrong-key") as bad:
            with pytest.raises(openai.AuthenticationError) as e:
                await bad.chat.completions.create(model="m", messages=CHAT_USER)
        async with claude(url, key="wrong-key") as bad_claude:
            with pytest.raises(anthropic.AuthenticationError):
                await bad_claude.messages.create(model="m", max_tokens=8, messages=CLAUDE_USER)
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{url}/v1/messages", json=MESSAGES, headers={"x-api-key": "test-key"})
        async with oai(url) as client:
            ok = await client.chat.completions.create(model="m", messages=CHAT_USER)
    assert e.value.code == "invalid_api_key"
    assert r.status_code == 400
    assert r.json()["error"] == {"type": "invalid_request_error", "message": "anthropic-version: header is required"}
    assert ok.choices[0].message.content == "one"
    assert len(model.requests) == 4
    assert model.remaining == 1


async def test_exhausted_script_is_a_clear_500(running: Running) -> None:
    with running() as (_, url):
        async with oai(url) as client:
            with pytest.raises(openai.InternalServerError, match="ran out of turns"):
                await client.chat.completions.create(model="m", messages=CHAT_USER, stream=True)
        async with claude(url) as ac:
            with pytest.raises(anthropic.InternalServerError, match="ran out of turns"):
                await ac.messages.create(model="m", max_tokens=8, messages=CLAUDE_USER)


async def test_drop_after_ends_the_stream_early(running: Running) -> None:
    got: list[Any] = []
    events: list[str] = []
    with running(Turn(text="x" * 40, drop_after=3), Turn(text="y" * 40, drop_after=4)) as (model, url):
        async with oai(url) as client:
            with pytest.raises(openai.APIConnectionError) as e:
                await drain_chat(client, got)
        # anthropic 2.x lets the transport error (httpx2.RemoteProtocolError) through unwrapped
        async with claude(url) as ac:
            with pytest.raises(Exception, match="incomplete chunked read"):
                await drain_messages(ac, events)
    assert len(got) == 3
    assert "incomplete chunked read" in str(e.value.__cause__)
    # 4 frames: message_start, content_block_start, ping (the SDK hides it), one delta (plus the SDK's "text")
    assert events == ["message_start", "content_block_start", "content_block_delta", "text"]
    assert model.disconnected == []  # the server hung up, not the client


async def test_malformed_frame_then_stream_continues(running: Running) -> None:
    # for Anthropic, frame 2 is the ping, whose data the SDK never parses: break the first delta instead
    turns = [Turn(text="abcdefgh", malformed_after=k) for k in (2, 2, 3)]
    with running(*turns) as (_, url):
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{url}/v1/chat/completions", json={**CHAT, "stream": True}, headers=OPENAI_AUTH)
        async with oai(url) as client:
            with pytest.raises(json.JSONDecodeError):
                await drain_chat(client)
        async with claude(url) as ac:
            with pytest.raises(json.JSONDecodeError):
                await drain_messages(ac)
    data = datas(r.text)
    bad = [i for i, d in enumerate(data) if d != "[DONE]" and not is_json(d)]
    assert bad == [2]
    assert data[-1] == "[DONE]"
    good = [json.loads(d) for d in data[:-1] if is_json(d)]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in good) == "abcdefgh"  # nothing lost


async def test_error_after_sends_the_in_stream_error(running: Running) -> None:
    with running(Turn(text="abcdefgh", error_after=2), Turn(text="abcdefgh", error_after=3)) as (_, url):
        async with oai(url) as client:
            with pytest.raises(openai.APIError, match="server had an error"):
                await drain_chat(client)
        async with claude(url) as ac:
            with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
                await drain_messages(ac)


async def test_hang_until_client_disconnects(running: Running) -> None:
    with running(Turn(text="partial", hang=True), Turn(text="partial", hang=True)) as (model, url):
        async with oai(url) as client:
            stream = await client.chat.completions.create(model="m", messages=CHAT_USER, stream=True)
            text = ""
            async for chunk in stream:
                text += chunk.choices[0].delta.content or ""
                if text == "partial":
                    break
            await stream.close()
        with anyio.fail_after(3):
            await eventually(lambda: model.disconnected == [0])
        seen = ""
        async with (
            httpx.AsyncClient() as http,
            http.stream("POST", f"{url}/v1/messages", json={**MESSAGES, "stream": True}, headers=ANTHROPIC_AUTH) as r,
        ):
            async for piece in r.aiter_text():
                seen += piece
                if "content_block_stop" in seen:
                    break
        with anyio.fail_after(3):
            await eventually(lambda: model.disconnected == [0, 1])
    assert "message_delta" not in seen


async def test_release_ends_a_hang_abruptly(running: Running) -> None:
    with running(Turn(text="partial", hang=True)) as (model, url):
        body = {**CHAT, "stream": True}
        async with (
            httpx.AsyncClient() as http,
            http.stream("POST", f"{url}/v1/chat/completions", json=body, headers=OPENAI_AUTH) as r,
        ):
            model.release()
            with pytest.raises(httpx.RemoteProtocolError):
                await r.aread()


async def test_non_streaming_faults(running: Running) -> None:
    """Without a stream: drop cuts the body short, malformed truncates it, error_after is the error."""
    turns = [Turn(text="abc", drop_after=0), Turn(text="abc", malformed_after=0), Turn(text="abc", error_after=0)]
    with running(*turns) as (_, url):
        async with httpx.AsyncClient() as http:
            with pytest.raises(httpx.RemoteProtocolError, match="without sending complete message body"):
                await http.post(f"{url}/v1/chat/completions", json=CHAT, headers=OPENAI_AUTH)
            cut = await http.post(f"{url}/v1/messages", json=MESSAGES, headers=ANTHROPIC_AUTH)
            err = await http.post(f"{url}/v1/messages", json=MESSAGES, headers=ANTHROPIC_AUTH)
    assert cut.status_code == 200
    assert not is_json(cut.text)
    assert err.status_code == 529
    assert err.json()["error"] == {"type": "overloaded_error", "message": "Overloaded"}


async def test_obfuscation_can_be_turned_off(running: Running) -> None:
    with running(Turn(text="abc")) as (_, url):
        async with oai(url) as client:
            stream = await client.chat.completions.create(
                model="m", messages=CHAT_USER, stream=True, stream_options={"include_obfuscation": False}
            )
            chunks = [c async for c in stream]
    assert [c.obfuscation for c in chunks] == [None] * len(chunks)


async def test_delay_spaces_the_frames(running: Running) -> None:
    with running(Turn(text="abcdef", chunk_size=2, delay=0.05)) as (_, url):
        async with oai(url) as client:
            started = time.monotonic()
            stream = await client.chat.completions.create(model="m", messages=CHAT_USER, stream=True)
            stamps = [time.monotonic() - started async for _ in stream]
    assert len(stamps) == 5  # role, 3 pieces, finish
    assert stamps[0] < 0.15
    assert stamps[-1] >= 0.05 * 4 * 0.9


async def test_requests_and_headers_are_recorded(running: Running) -> None:
    with running(Turn(text="a"), Turn(text="b")) as (model, url):
        async with oai(url) as client:
            await client.chat.completions.create(model="gpt-x", messages=CHAT_USER, temperature=0.5)
        async with claude(url) as ac:
            await ac.messages.create(model="claude-x", max_tokens=9, messages=CLAUDE_USER, system="be brief")
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{url}/v1/chat/completions", content=b"{not json", headers=OPENAI_AUTH)
    assert r.status_code == 400
    assert model.paths == ["/v1/chat/completions", "/v1/messages", "/v1/chat/completions"]
    assert model.requests[0] == {"messages": USER, "model": "gpt-x", "temperature": 0.5}
    assert model.requests[1] == {"max_tokens": 9, "messages": USER, "model": "claude-x", "system": "be brief"}
    assert model.requests[2] == {"_unparsed": "{not json"}
    assert model.headers[0]["authorization"] == "Bearer test-key"
    assert "anthropic-version" in model.headers[1]
    assert model.remaining == 0


async def test_models_endpoint(running: Running) -> None:
    with running(model="scripted-x") as (_, url):
        async with oai(url) as client:
            listed = [m.id async for m in client.models.list()]
        async with claude(url) as ac:
            claude_listed = [m.id async for m in ac.models.list()]
    assert listed == claude_listed == ["scripted-x"]


async def test_no_api_key_means_open(running: Running) -> None:
    with running(Turn(text="open"), api_key=None) as (_, url):
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{url}/v1/messages", json=MESSAGES, headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 200
    assert r.json()["content"] == [{"type": "text", "text": "open"}]


def test_turn_rejects_two_faults() -> None:
    with pytest.raises(ValueError, match="at most one fault"):
        Turn(status=500, drop_after=1)
    with pytest.raises(ValueError, match="retry_after needs status"):
        Turn(retry_after=1)
