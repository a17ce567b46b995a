"""Tool calls for the embedded model: how they are offered, written and read back.

SmolLM2-135M was not trained to call tools, so nothing it writes freely can be trusted to be a
call. A call turn is decoded in two constrained steps (``local.py`` runs them):

1. **Which tool**, under a grammar whose only sentences are the offered tools' names
   (llama.cpp GBNF, https://github.com/ggml-org/llama.cpp/blob/master/grammars/README.md).
2. **Its arguments**, JSON decoded under a grammar made from the tool's own JSON schema (llama.cpp's
   schema converter), so they validate against it. Strings without a length limit get one
   (``MAX_STRING``), so a call always closes within the token cap.

``run_code`` is the exception (``local.py``): where it is offered, a call turn is the model's code
in a python block, the block being the call. Measured why: asked to write code as a JSON string
(``{"code": "...``), the model wrote names and type words ("float", "compute_median") for every
question tried; in a ```` ```python ```` block it wrote code. Past calls are written back into
the conversation in the same form (the SmolLM2 family's ``<tool_call>`` tags around the others),
and results follow as the next message.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Sequence
from typing import Any

from nb_agent.agent.messages import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from nb_agent.agent.proposals import RUN_CODE
from nb_agent.tool_contract import Tool

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
FENCE_OPEN = "```python\n"
FENCE_CLOSE = "```"
# after a result, the user's side of the conversation asks for the next step (the model otherwise
# writes its call again): try again after a failure, else answer
ANSWER = "With this result, answer my question: {question}"
RETRY = "Fix it."
MAX_STRING = 200  # characters of a string argument without a limit of its own
INSERT_CELLS = "insert_cells"  # nb_agent.kernel.notebook_tools (which the agent layer does not import)
MAX_RESULT_CHARS = 2000  # of a tool result, as the model reads it back: its context is small, its attention shorter


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with local ``#/$defs/...`` references replaced by what they point to.

    pydantic puts a nested model's schema under ``$defs``; llama.cpp's converter resolves
    references against the document's root. A recursive definition is cut at the third level.
    """
    defs = schema.get("$defs") or schema.get("definitions") or {}

    def visit(node: Any, depth: int) -> Any:
        if isinstance(node, list):
            return [visit(x, depth) for x in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
            target = defs.get(ref.rsplit("/", 1)[1])
            if not isinstance(target, dict) or depth > 2:
                return {}
            return visit(copy.deepcopy(target), depth + 1)
        return {k: visit(v, depth) for k, v in node.items() if k not in ("$defs", "definitions", "title")}

    result: dict[str, Any] = visit(schema, 0)
    result.setdefault("type", "object")
    return result


def describe_tools(tools: Sequence[Tool]) -> str:
    """The tools, for the system message: a call's form, what it does."""
    lines = []
    for t in tools:
        props = inline_refs(t.parameters).get("properties") or {}
        lines.append(f"- {t.name}({', '.join(props)}): {t.description}")
    return (
        "You can call these tools:\n" + "\n".join(lines) + f"\nA call is written {CALL_OPEN}name, then the "
        f"arguments as JSON{CALL_CLOSE}. Its result comes back in the next message; then answer the user with it."
    )


def name_grammar(tools: Sequence[Tool]) -> str:
    """GBNF whose sentences are the tools' names, each ended by a newline."""
    names = " | ".join(json.dumps(t.name) for t in tools)
    return f'root ::= ({names}) "\\n"\n'


def arguments_schema(tool: Tool) -> dict[str, Any]:
    """The tool's parameters as a self-contained JSON schema (for the grammar of its arguments),
    every string bounded."""

    def bound(node: Any) -> Any:
        if isinstance(node, list):
            return [bound(x) for x in node]
        if not isinstance(node, dict):
            return node
        out = {k: bound(v) for k, v in node.items()}
        if out.get("type") == "string" and "enum" not in out and "const" not in out:
            out.setdefault("maxLength", MAX_STRING)
        return out

    bounded: dict[str, Any] = bound(inline_refs(tool.parameters or {"type": "object", "properties": {}}))
    return bounded


def call_text(call: ToolCallPart, tools: Sequence[Tool] = ()) -> str:
    """A call as the model writes it (and reads it back): code to run is a python block."""
    if call.name == RUN_CODE and call.arguments is not None and isinstance(call.arguments.get("code"), str):
        return f"{FENCE_OPEN}{call.arguments['code']}\n{FENCE_CLOSE}"
    args = call.arguments
    body = json.dumps(args) if args is not None else (call.raw_arguments or "{}")
    return f"{CALL_OPEN}{call.name}\n{body}{CALL_CLOSE}"


def chat_messages(system: str, messages: list[Message], tools: Sequence[Tool] = ()) -> list[dict[str, str]]:
    """The conversation for the model's chat template (roles system, user, assistant only):
    calls as the model writes them, results as the next user message."""
    out: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []

    def add(role: str, text: str) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"] += "\n\n" + text
        else:
            out.append({"role": role, "content": text})

    names: dict[str, str] = {}
    question = ""
    for msg in messages:
        if msg.role == "user" and msg.text:
            question = msg.text
        texts: list[str] = []
        for part in msg.content:
            if isinstance(part, TextPart) and part.text:
                texts.append(part.text)
            elif isinstance(part, ToolCallPart):
                names[part.id] = part.name
                texts.append(call_text(part, tools))
            elif isinstance(part, ToolResultPart):
                content = part.content
                if len(content) > MAX_RESULT_CHARS:
                    content = content[:MAX_RESULT_CHARS] + " … (cut)"
                what = "The code" if names.get(part.tool_call_id) == RUN_CODE else "The tool"
                texts.append(f"{what} {'failed' if part.is_error else 'returned'}:\n{content}")
                texts.append(RETRY if part.is_error else ANSWER.format(question=question))
            elif isinstance(part, ImagePart):
                texts.append("(an image was returned; this model cannot see images)")
        if texts:
            add("assistant" if msg.role == "assistant" else "user", "\n\n".join(texts))
    return out


def new_call(name: str, arguments: dict[str, Any] | None, raw: str) -> ToolCallPart:
    call_id = f"call_{uuid.uuid4().hex[:24]}"
    return ToolCallPart(id=call_id, name=name, arguments=arguments, raw_arguments=raw)


def code_call(written: str) -> ToolCallPart:
    """The ``run_code`` call that a python block written by the model is."""
    code = written.removesuffix(FENCE_CLOSE).rstrip("\n")
    return new_call(RUN_CODE, {"code": code}, code)


def parse_arguments(tool: Tool, written: str) -> ToolCallPart:
    """The call of ``tool`` from the JSON the model wrote for its arguments; JSON cut off at the
    token cap keeps its raw text, so the loop tells the model it was not valid."""
    try:
        value = json.loads(written)
    except ValueError:
        return new_call(tool.name, None, written)
    return new_call(tool.name, value, written) if isinstance(value, dict) else new_call(tool.name, None, written)


def name_of(written: str, tools: Sequence[Tool]) -> Tool | None:
    name = written.strip()
    return next((t for t in tools if t.name == name), None)


def as_cell(call: ToolCallPart, head: str) -> ToolCallPart:
    """The code turn's call as a proposed cell: its code (without the request's comment) becomes
    the source of one new cell, which the user reads, then runs. Which turns are cells is the
    model's choice (``local_route``); the call is unchanged when there is no code to propose."""
    code = str((call.arguments or {}).get("code", "")).removeprefix(head.rstrip("\n")).strip()
    if not code:  # the request's comment alone (``code_call`` drops the line's end): nothing to propose
        return call
    arguments = {"cells": [{"source": code}]}
    return new_call(INSERT_CELLS, arguments, json.dumps(arguments))
