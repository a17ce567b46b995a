"""ntrp frames -> unified events, for the frames of one run on a session's shared stream.

ntrp's uppercase events are AG-UI-like with snake_case fields; its own events are snake_case
(``approval_needed``, ``token_usage``, ``run_cancelled``, ``task_*``...). Text of nested task
agents (``depth > 0``) is not mixed into the answer; their lifecycle shows as subtasks.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from nb_agent.event_fast import text_delta, thinking
from nb_agent.events import (
    ApprovalRequested,
    ErrorReported,
    Event,
    Notification,
    RunFinished,
    RunStarted,
    Status,
    Subtask,
    Thinking,
    TokenUsage,
    ToolCall,
    ToolCallDelta,
    ToolResult,
    Usage,
)
from nb_agent.wire import jsondecode

log = logging.getLogger("nb_agent.protocols.ntrp")

SubtaskState = Literal["working", "completed", "failed", "canceled"]
_TASK_STATE: dict[str, SubtaskState] = {"task_started": "working", "task_progress": "working"}
_DONE: dict[str, SubtaskState] = {
    "completed": "completed",
    "failed": "failed",
    "cancelled": "canceled",
    "canceled": "canceled",
}


def _usage(usage: Any, context: Any = None) -> TokenUsage | None:
    if not isinstance(usage, dict):
        return None
    ints = {k: v for k, v in usage.items() if isinstance(v, int)}
    if not ints and context is None:
        return None
    return TokenUsage(
        input_tokens=ints.get("prompt"),
        output_tokens=ints.get("completion"),
        total_tokens=ints.get("total"),
        context_used=context if isinstance(context, int) else None,
    )


class NtrpMapper:
    """Follows one run: frames outside it (older runs, replays) produce nothing."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.run_id: str | None = None
        self.following = False
        self.tool_names: dict[str, str] = {}
        self._args: dict[str, list[str]] = {}
        self._text: dict[str, int] = {}  # chars of each message already shown
        self._usage: TokenUsage | None = None

    def follow(self, run_id: str, *, queued: bool) -> None:
        """Our run id is known; a queued message is answered inside the run already active."""
        self.run_id = run_id
        self.following = self.following or queued

    def frame(self, kind: str, data: dict[str, Any]) -> list[Event]:
        if kind == "RUN_STARTED":
            if data.get("run_id") == self.run_id and self.run_id:
                self.following = True
                return [RunStarted(run_id=self.run_id, session_id=self.session_id)]
            return []
        if not self.following or kind == "stream_keepalive":
            return []
        ours = data.get("run_id") in (None, self.run_id)
        if kind == "RUN_FINISHED" and ours:
            usage = _usage(data.get("usage"), data.get("context_input_tokens")) or self._usage
            return [*([Usage(**usage.model_dump())] if usage else []), RunFinished(reason="stop", usage=usage)]
        if kind == "RUN_ERROR" and ours:
            message = str(data.get("message") or "the ntrp run failed")
            if data.get("debug_id"):
                message += f" (debug id {data['debug_id']})"
            failed = ErrorReported(message=message, code=data.get("code"))
            return [failed, RunFinished(reason="error", usage=self._usage)]
        if kind == "run_cancelled" and ours:
            return [RunFinished(reason="cancel", usage=self._usage)]
        if (data.get("depth") or 0) > 0 and kind.startswith(("TEXT_MESSAGE", "REASONING")):
            return []  # a nested task agent's own text
        return self._content(kind, data)

    def _content(self, kind: str, data: dict[str, Any]) -> list[Event]:
        mid = str(data.get("message_id") or "ntrp")
        if kind == "TEXT_MESSAGE_CONTENT":
            delta = str(data.get("delta") or "")
            self._text[mid] = self._text.get(mid, 0) + len(delta)
            return [text_delta(mid, delta)] if delta else []
        if kind == "TEXT_MESSAGE_END":
            # END carries the whole text: show what deltas did not (stream=false, or a gap).
            content = str(data.get("content") or "")
            shown = self._text.get(mid, 0)
            self._text[mid] = max(shown, len(content))
            return [text_delta(mid, content[shown:])] if len(content) > shown else []
        if kind in ("REASONING_START", "thinking"):
            return [Thinking(delta="")]
        if kind == "REASONING_MESSAGE_CONTENT":
            return [thinking(str(data.get("delta") or ""), mid)]
        if kind.startswith("TOOL_CALL"):
            return self._tool(kind, data)
        if kind == "approval_needed":
            tool_id = str(data.get("tool_id") or "")
            call_args = self._args.get(f"done:{tool_id}")
            prompt = data.get("diff") or data.get("content_preview") or data.get("path")
            return [
                ApprovalRequested(
                    tool_call_id=tool_id,
                    name=str(data.get("name") or self.tool_names.get(tool_id) or "tool"),
                    arguments=_parse("".join(call_args)) if call_args else {},
                    prompt=str(prompt) if prompt else None,
                )
            ]
        if kind == "input_needed":
            return [
                Status(state="input_required", message=data.get("title")),
                Notification(method="ntrp/input_needed", params=data),
            ]
        if kind == "token_usage":
            usage = _usage(data.get("usage"))
            if usage is None:
                return []
            self._usage = usage
            return [Usage(**usage.model_dump())]
        if kind in ("task_started", "task_progress", "task_finished"):
            state = _TASK_STATE.get(kind) or _DONE.get(str(data.get("status")), "completed")
            return [
                Subtask(id=str(data.get("task_id") or ""), state=state, name=data.get("name") or data.get("summary"))
            ]
        if kind in (
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_END",
            "REASONING_END",
            "REASONING_MESSAGE_START",
            "REASONING_MESSAGE_END",
            "message_ingested",
        ):
            return []
        if kind in ("background_task", "run_backgrounded") or kind.startswith(("compaction_", "workflow_", "session_")):
            return [Notification(method=f"ntrp/{kind}", params=data)]
        log.debug("skipping unknown ntrp event %r", kind)
        return []

    def _tool(self, kind: str, data: dict[str, Any]) -> list[Event]:
        call_id = str(data.get("tool_call_id") or "")
        if kind == "TOOL_CALL_START":
            name = str(data.get("tool_call_name") or "tool")
            self.tool_names[call_id] = name
            self._args[call_id] = []
            return [ToolCallDelta(tool_call_id=call_id, name=name)]
        if kind == "TOOL_CALL_ARGS":
            delta = str(data.get("delta") or "")
            self._args.setdefault(call_id, []).append(delta)
            return [ToolCallDelta(tool_call_id=call_id, delta=delta)]
        if kind == "TOOL_CALL_END":
            parts = self._args.pop(call_id, [])
            self._args[f"done:{call_id}"] = parts
            name = self.tool_names.get(call_id, "tool")
            return [ToolCall(tool_call_id=call_id, name=name, arguments=_parse("".join(parts)))]
        if kind == "TOOL_CALL_RESULT":
            return [
                ToolResult(
                    tool_call_id=call_id, content=str(data.get("content") or ""), is_error=bool(data.get("is_error"))
                )
            ]
        return []


def _parse(raw: str) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        value = jsondecode.loads(raw)
    except ValueError:
        log.debug("ntrp tool arguments are not JSON: %.120r", raw)
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"value": value}
