"""A scripted model that answers by keyword, for real agents (Claude Code, Codex, Gemini CLI, OpenCode).

A real agent sends requests a test cannot predict one by one (system prompts, tool lists, side
requests, retries), so a script of turns in order does not fit. ``KeywordModel`` reads each request
instead: the last user prompt says what to do, and the tool results after it say how far along it is.

- ``use the shell: CMD``: call the agent's shell tool with CMD, then quote its result.
- ``write a file PATH: CONTENT``: call the agent's write tool (Codex: an ``apply_patch``), then quote.
- ``use the kernel: CODE``: call the kernel's MCP tool ``run_code`` (through Claude Code's
  ``ToolSearch`` first when the tool is deferred), then quote.
- ``ask me: QUESTION? A / B``: Claude Code's ``AskUserQuestion`` tool with those options (the agent
  turns it into an ACP elicitation form), then quote the answer.
- ``take your time``: a long answer, streamed slowly (for cancel).
- anything else: ``Scripted answer: `` and the prompt's first words.

A tool result is always answered with text quoting it (``The tool said: ...``), so a test sees the
result reached the model. The images a request holds (their MIME types, wherever the wire format
puts them) are kept as ``images``. One server serves every wire format the agents call (OpenAI chat
completions and Responses, Anthropic Messages and ``count_tokens``, Gemini), each rendered by its
route of the scripted family; every request is kept in ``exchanges`` (and written to ``log``).
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.servers.scripted_gemini import GeminiRoutes
from tests.servers.scripted_llm import ScriptedModel
from tests.servers.scripted_responses import ResponsesRoutes
from tests.servers.scripted_turns import Json, ToolCallSpec, Turn, compact

API_KEY = "scripted-key"
QUOTE_MAX = 2000  # characters of a tool result quoted back
SLOW_CHUNKS = 240  # "take your time": this many pieces, SLOW_DELAY apart (a minute: cancel ends it sooner)
SLOW_DELAY = 0.25
_WRAPPER = re.compile(r"^\s*<([\w-]+)[^>]*>.*</\1>\s*$", re.S)  # an agent's own context block, not the user's words
_KEYS = ("use the shell:", "write a file ", "use the kernel:", "ask me:", "take your time")


@dataclass
class Exchange:
    """One request as the model sees it, whatever the wire format."""

    api: str
    prompt: str = ""  # the text of the last user prompt
    calls: list[str] = field(default_factory=list)  # tools the model called since, by name
    results: list[str] = field(default_factory=list)  # their results, as text
    tools: list[str] = field(default_factory=list)  # tools offered (a namespaced one as "namespace.name")
    schema: Json | None = None  # a structured answer asked for (Gemini's JSON schema)
    answer: Json = field(default_factory=dict)  # what was answered: {"text": ...} or {"call": name, "arguments": ...}
    images: list[str] = field(default_factory=list)  # the MIME type of every image in the request

    def record(self) -> Json:
        return {"api": self.api, "prompt": self.prompt, "calls": self.calls, "results": self.results,
                "tools": self.tools, "answer": self.answer, "images": self.images}  # fmt: skip


_DATA_URL = re.compile(r"^data:(image/[\w.+-]+);base64,")


def images_in(value: Any) -> list[str]:
    """The MIME types of the image parts anywhere in a request body: Anthropic ``image`` blocks,
    OpenAI ``image_url`` / Responses ``input_image`` data URLs, Gemini ``inlineData``."""
    found: list[str] = []
    if isinstance(value, list):
        for item in value:
            found += images_in(item)
    elif isinstance(value, dict):
        kind = value.get("type")
        source = value.get("source")
        url = value.get("image_url")
        url = url.get("url") if isinstance(url, dict) else url
        if kind == "image" and isinstance(source, dict) and isinstance(source.get("media_type"), str):
            found.append(source["media_type"])
        elif kind in ("image_url", "input_image") and isinstance(url, str) and (m := _DATA_URL.match(url)):
            found.append(m[1])
        elif str((value.get("inlineData") or {}).get("mimeType", "")).startswith("image/"):
            found.append(value["inlineData"]["mimeType"])
        else:
            for item in value.values():
                found += images_in(item)
    return found


def _text(content: Any) -> str:
    """The text of a content value: a string, or blocks with ``text`` / ``input_text`` / ``output_text``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(c) for c in content)
    if isinstance(content, dict):
        if "text" in content and isinstance(content["text"], str):
            return content["text"]
        if "content" in content:
            return _text(content["content"])
        return json.dumps(content, ensure_ascii=False)
    return ""


def _own_words(blocks: list[str]) -> str:
    """The user's words among the text blocks of a message, without the agent's wrapper blocks."""
    return "\n".join(b for b in blocks if b.strip() and not _WRAPPER.match(b)).strip()


def _prompt(ex: Exchange, text: str) -> None:
    if text:
        ex.prompt, ex.calls, ex.results = text, [], []


def read_anthropic(body: Json) -> Exchange:
    ex = Exchange("anthropic", tools=[str(t.get("name")) for t in body.get("tools") or []])
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": _text(content)}]
        if message.get("role") == "assistant":
            ex.calls += [str(b.get("name")) for b in blocks if b.get("type") == "tool_use"]
        elif message.get("role") == "user":
            results = [b for b in blocks if b.get("type") == "tool_result"]
            ex.results += [_text(b.get("content", "")) for b in results]
            if not results:
                _prompt(ex, _own_words([str(b.get("text", "")) for b in blocks if b.get("type") == "text"]))
    return ex


def read_chat(body: Json) -> Exchange:
    tools = [str((t.get("function") or {}).get("name")) for t in body.get("tools") or []]
    ex = Exchange("openai", tools=tools)
    for message in body.get("messages") or []:
        role = message.get("role")
        if role == "user":
            _prompt(ex, _own_words([_text(message.get("content"))]))
        elif role == "assistant":
            ex.calls += [str(c["function"]["name"]) for c in message.get("tool_calls") or []]
        elif role == "tool":
            ex.results.append(_text(message.get("content")))
    return ex


def read_responses(body: Json) -> Exchange:
    tools: list[str] = []
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace":
            tools += [f"{tool.get('name')}.{t.get('name')}" for t in tool.get("tools") or []]
        elif tool.get("name"):
            tools.append(str(tool["name"]))
    ex = Exchange("responses", tools=tools)
    items = body.get("input")
    for item in items if isinstance(items, list) else [{"type": "message", "role": "user", "content": items}]:
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            content = item.get("content")
            blocks = [_text(c) for c in content] if isinstance(content, list) else [_text(content)]
            _prompt(ex, _own_words(blocks))
        elif kind in ("function_call", "custom_tool_call"):
            ns = item.get("namespace")
            ex.calls.append(f"{ns}.{item.get('name')}" if ns else str(item.get("name")))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            ex.results.append(_text(item.get("output")))
    return ex


def read_gemini(body: Json) -> Exchange:
    tools = [str(d.get("name")) for t in body.get("tools") or [] for d in t.get("functionDeclarations") or []]
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    ex = Exchange("gemini", tools=tools, schema=schema if isinstance(schema, dict) else None)
    for content in body.get("contents") or []:
        parts = content.get("parts") or []
        if content.get("role") == "model":
            ex.calls += [str(p["functionCall"].get("name")) for p in parts if "functionCall" in p]
            continue
        answers = [p["functionResponse"] for p in parts if "functionResponse" in p]
        ex.results += [_text((a.get("response") or {}).get("output", a.get("response"))) for a in answers]
        if not answers:
            _prompt(ex, _own_words([str(p.get("text", "")) for p in parts if "text" in p]))
    return ex


READERS = {"anthropic": read_anthropic, "openai": read_chat, "responses": read_responses, "gemini": read_gemini}


def _first(tools: list[str], *names: str) -> str | None:
    return next((n for n in names if n in tools), None)


def _payload(prompt: str, key: str) -> str:
    return prompt[prompt.index(key) + len(key) :].strip()


def _shell(ex: Exchange, command: str) -> ToolCallSpec | None:
    name = _first(ex.tools, "Bash", "exec_command", "run_shell_command", "bash", "shell")
    if name is None:
        return None
    about = "Run the command the user gave"
    args: Json = {"cmd": command} if name == "exec_command" else {"command": command, "description": about}
    if name == "shell":
        args = {"command": ["bash", "-lc", command]}
    return ToolCallSpec(name=name, arguments=compact(args))


def _write(ex: Exchange, spec: str) -> ToolCallSpec | None:
    path, _, content = spec.partition(":")
    path, content = path.strip(), content.strip()
    name = _first(ex.tools, "Write", "write_file", "write", "apply_patch")
    if name == "apply_patch":
        lines = "".join(f"+{line}\n" for line in content.split("\n"))
        return ToolCallSpec(name=name, arguments=f"*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch\n",
                            kind="custom")  # fmt: skip
    if name is None:
        return None
    key = "filePath" if name == "write" else "file_path"
    return ToolCallSpec(name=name, arguments=compact({key: path, "content": content}))


def _kernel(ex: Exchange, code: str) -> ToolCallSpec | None:
    """The kernel's ``run_code``, by the agent's name for it; through ``ToolSearch`` when deferred."""
    offered = [t for t in ex.tools if re.search(r"(^|[._])run_code$", t)]
    searched = "ToolSearch" in ex.calls
    if not offered and "ToolSearch" in ex.tools and not searched:  # Claude Code defers MCP tools
        return ToolCallSpec(name="ToolSearch", arguments=compact({"query": "select:mcp__notebook__run_code",
                                                                  "max_results": 5}))  # fmt: skip
    name = offered[0] if offered else "mcp__notebook__run_code" if searched else None
    if name is None:
        return None
    namespace, _, tool = name.rpartition(".")
    return ToolCallSpec(name=tool, arguments=compact({"code": code}), namespace=namespace or None)


def _ask(ex: Exchange, spec: str) -> ToolCallSpec | None:
    """``ask me: Which colour? red / blue``: Claude Code's AskUserQuestion, one question, its options."""
    if "AskUserQuestion" not in ex.tools:
        return None
    question, _, rest = spec.partition("?")
    options = [{"label": o.strip(), "description": f"the {o.strip()} one"} for o in rest.split("/") if o.strip()]
    asked = {"question": question.strip() + "?", "header": "Choice", "options": options, "multiSelect": False}
    return ToolCallSpec(name="AskUserQuestion", arguments=compact({"questions": [asked]}))


def example_of(schema: Json) -> Any:
    """The smallest value that fits a JSON schema (the agent's side questions: who speaks next, ...)."""
    kind = str(schema.get("type", "object")).lower()
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: example_of(props[k]) for k in schema.get("required", list(props)) if k in props}
    return {"string": "scripted", "boolean": False, "array": [], "integer": 0, "number": 0}.get(kind)


def decide(ex: Exchange) -> Turn:
    """The answer to one request (see the module docstring)."""
    if ex.schema is not None:
        return Turn(text=json.dumps(example_of(ex.schema)))
    prompt = ex.prompt
    key = next((k for k in _KEYS if k in prompt), None)
    call: ToolCallSpec | None = None
    if key == "use the kernel:" and not any(c.endswith("run_code") for c in ex.calls):
        call = _kernel(ex, _payload(prompt, key))
    elif ex.calls or ex.results:
        pass  # the tool ran (or was refused): quote it
    elif key == "use the shell:":
        call = _shell(ex, _payload(prompt, key))
    elif key == "write a file ":
        call = _write(ex, _payload(prompt, key))
    elif key == "ask me:":
        call = _ask(ex, _payload(prompt, key))
    if call is not None:
        return Turn(tool_calls=[call], input_tokens=1200)
    if ex.results:
        return Turn(text=f"The tool said: {ex.results[-1][:QUOTE_MAX]}", input_tokens=1200)
    if key == "take your time":
        return Turn(text="Thinking it over. " * SLOW_CHUNKS, chunk_size=18, delay=SLOW_DELAY, input_tokens=1200)
    if key is not None:
        return Turn(text=f"Scripted answer: I have no tool for {key.strip(': ')!r} here.", input_tokens=1200)
    return Turn(text=f"Scripted answer: {' '.join(prompt.split()[:8])}", input_tokens=1200)


class KeywordModel(ScriptedModel, ResponsesRoutes, GeminiRoutes):
    """Every route of the scripted family, answering by keyword (``decide``) instead of a script."""

    def __init__(self, *, log: Path | None = None, api_key: str | None = API_KEY, model: str = "scripted-model"):
        super().__init__(model=model, api_key=api_key)
        self.log = log
        self.exchanges: list[Json] = []
        self._log_lock = threading.Lock()
        self.app.router.routes += [
            Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
            Route("/v1/responses", self._responses, methods=["POST"]),
            Route("/v1beta/models/{target:path}", self._gemini, methods=["POST"]),
        ]

    def _turn_for(self, body: Json, api: str) -> Turn | None:
        ex = READERS[api](body)
        ex.images = images_in(body)
        turn = decide(ex)
        if turn.tool_calls:
            call = turn.tool_calls[0]
            ex.answer = {"call": call.name, "arguments": call.arguments, "namespace": call.namespace}
        else:
            ex.answer = {"text": turn.text[:200]}
        record = ex.record()
        with self._log_lock:
            self.exchanges.append(record)
            if self.log is not None:
                with self.log.open("a") as f:
                    f.write(json.dumps(record, ensure_ascii=False) + "\n")
        return turn

    def about(self, marker: str) -> list[Json]:
        """The exchanges whose prompt contains ``marker`` (each test gives its prompts a marker of its own)."""
        with self._log_lock:
            return [e for e in self.exchanges if marker in e["prompt"]]

    async def _count_tokens(self, request: Request) -> Response:
        """``POST /v1/messages/count_tokens``: ``{"input_tokens": N}``, about one token per 4 characters."""
        body, _ = await self._record(request)
        size = len(json.dumps((body or {}).get("messages", [])))
        return Response(compact({"input_tokens": max(1, size // 4)}), 200, media_type="application/json")


def main() -> None:
    """``python -m tests.servers.scripted_keyword --port N [--log FILE]``: serve until interrupted."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args()
    uvicorn.run(KeywordModel(log=args.log).app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
