"""Recorded runs of an agent server (Goose) as a notebook keeps them, N events long, for the replay
size tests and bench/replay_size.py."""

from __future__ import annotations

from typing import Any

from nb_agent.agent.recording import prompt_hash

PROMPT = "tool please"
SOURCE = "%agent --url http://127.0.0.1:9 --protocol goose --approve always tool please"


def mixed(count: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"type": "run_started", "run_id": "r1", "session_id": "s1"}]
    for i in range(count - 2):
        kind = i % 4
        if kind == 0:
            events.append({"type": "text_delta", "message_id": f"m{i}", "delta": f"Step {i}: the files now."})
        elif kind == 1:
            events.append({"type": "tool_call", "tool_call_id": f"c{i}", "name": "developer__shell",
                           "arguments": {"command": f"ls {i}"}})  # fmt: skip
        elif kind == 2:
            events.append({"type": "tool_result", "tool_call_id": f"c{i - 1}", "content": f"file{i}.txt"})
        else:
            events.append({"type": "thinking", "message_id": f"t{i}", "delta": "Next, the other folder."})
    return [*events, {"type": "run_finished", "reason": "stop"}]


def images(count: int) -> list[dict[str, Any]]:
    call = "mcp-0123456789ab"
    head = [
        {"type": "run_started", "run_id": "r1", "session_id": "s1"},
        {"type": "tool_call", "tool_call_id": call, "name": "mcp__notebook__probe", "arguments": {}},
        {"type": "tool_result", "tool_call_id": call, "content": "probed"},
    ]
    tiny = "iVBORw0KGgo="
    return [*head, *({"type": "media", "mime_type": "image/png", "data": tiny} for _ in range(count - 4)),
            {"type": "run_finished", "reason": "stop"}]  # fmt: skip


def notebook(events: list[dict[str, Any]]) -> dict[str, Any]:
    rec = {"version": 1, "kind": "events", "agent": "goose", "prompt": PROMPT, "prompt_hash": prompt_hash(PROMPT),
           "time": "2025-06-01T12:00:00+00:00", "events": events, "approvals": {}}  # fmt: skip
    output = {"output_type": "display_data", "data": {"text/plain": "[nb-agent: recorded]"},
              "metadata": {"nb_agent": {"recording": rec, "replayed": False}}}  # fmt: skip
    cell = {"cell_type": "code", "execution_count": 1, "id": "c1", "metadata": {}, "source": SOURCE,
            "outputs": [output]}  # fmt: skip
    return {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
