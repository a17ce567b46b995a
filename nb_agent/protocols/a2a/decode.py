"""A2A stream frames -> unified events, for 1.0, 0.3 and the older ``{"type":"text"}`` dialect.

Pure mapping (no I/O), so every wire shape is tested without a server. One ``A2AMapper`` lives
for one run: it remembers the task, the context and how much of each artifact was shown (what
makes a resubscribe snapshot safe to replay).

Rules worth knowing:
* **Artifacts.** One message per artifact id. ``append: true`` adds to it. ``append: false`` (or
  absent) *replaces* the artifact, as the spec says: fasta2a, for one, streams the answer as
  appended chunks and then sends the whole artifact again under the same id. A replacement, and
  a task snapshot (first frame after a resubscribe, or a ``GetTask`` result), is compared with
  what was shown: a text that extends it adds only its tail (``TextDelta``); one that differs
  replaces the message's text (``TextReplaced``); the same adds nothing. Other parts: once each.
* **Status messages.** Agents put their answer or their question in the status message of the
  final or interrupting state, so for ``completed``, ``input_required``, ``auth_required``, ``failed``
  and ``rejected`` that text is answer text (``TextDelta``) as well as the ``Status``; while
  ``working`` it is only the status line. Each message id is shown once.
"""

from __future__ import annotations

import logging
from typing import Any

from nb_agent.event_fast import text_delta
from nb_agent.events import (
    ErrorReported,
    Event,
    FinishReason,
    Media,
    Notification,
    Progress,
    RunFinished,
    RunStarted,
    Status,
    TaskState,
    TextReplaced,
)
from nb_agent.protocols.a2a.block import Block as _Block

log = logging.getLogger("nb_agent.protocols.a2a")

_STATES: dict[str, TaskState] = {
    "submitted": "submitted",
    "working": "working",
    "input-required": "input_required",
    "auth-required": "auth_required",
    "completed": "completed",
    "canceled": "canceled",
    "cancelled": "canceled",
    "failed": "failed",
    "rejected": "rejected",
}
_FINISH: dict[TaskState, FinishReason] = {
    "completed": "stop",
    "input_required": "input_required",
    "auth_required": "input_required",
    "failed": "error",
    "rejected": "error",
    "canceled": "cancel",
}
_ANSWER_STATES = frozenset({"completed", "input_required", "auth_required", "failed", "rejected"})
_ERROR_NAMES = {
    -32700: "parse error",
    -32600: "invalid request",
    -32601: "method not found",
    -32602: "invalid params",
    -32603: "internal error",
    -32001: "task not found",
    -32002: "task not cancelable",
    -32003: "push notifications not supported",
    -32004: "unsupported operation",
    -32005: "content type not supported",
    -32006: "invalid agent response",
    -32007: "extended agent card not configured",
    -32008: "extension support required",
    -32009: "version not supported",
}


def task_state(raw: Any) -> TaskState | None:
    """``TASK_STATE_INPUT_REQUIRED`` (1.0) or ``input-required`` (0.3) -> ``input_required``."""
    if not isinstance(raw, str):
        return None
    key = raw.removeprefix("TASK_STATE_").lower().replace("_", "-")
    return _STATES.get(key)  # unknown / unspecified -> None: nothing to show


def rpc_error(data: Any) -> tuple[int | None, str] | None:
    """``(code, message)`` of a JSON-RPC error response, or ``None`` when it is not one."""
    if not isinstance(data, dict) or "error" not in data:
        return None
    err = data["error"]
    if not isinstance(err, dict):
        return None, str(err)
    code = err.get("code")
    return (code if isinstance(code, int) else None), str(err.get("message") or "")


def error_text(code: int | None, message: str) -> str:
    """ "A2A error -32009 (version not supported): ..." - names the code, the way users search for it."""
    name = _ERROR_NAMES.get(code) if code is not None else None
    head = f"A2A error {code}" if code is not None else "A2A error"
    if name:
        head += f" ({name})"
    return f"{head}: {message}" if message else head


def _part_kind(part: dict[str, Any]) -> str:
    kind = part.get("kind") or part.get("type")
    if isinstance(kind, str):
        return kind
    if "text" in part:
        return "text"
    if "raw" in part or "url" in part or "file" in part:
        return "file"
    return "data" if "data" in part else "unknown"


def _parts(obj: Any) -> list[dict[str, Any]]:
    parts = obj.get("parts") if isinstance(obj, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _text(parts: list[dict[str, Any]]) -> str:
    return "".join(str(p.get("text") or "") for p in parts if _part_kind(p) == "text")


def _other_part(part: dict[str, Any], message_id: str) -> Event | None:
    """A file part -> ``Media``, a data part -> ``Notification("a2a/data")``; text is handled elsewhere."""
    kind = _part_kind(part)
    if kind == "file":
        f = part.get("file")
        if isinstance(f, dict):  # 0.3: {"file": {"bytes"|"uri", "mimeType", "name"}}
            data, uri = f.get("bytes") or f.get("data"), f.get("uri")
            mime, name = f.get("mimeType") or f.get("mediaType"), f.get("name")
        else:  # 1.0: {"raw"|"url", "mediaType", "filename"}
            data, uri = part.get("raw"), part.get("url")
            mime, name = part.get("mediaType"), part.get("filename")
        return Media(message_id=message_id, mime_type=mime, data=data, uri=uri, name=name)
    if kind == "data":
        return Notification(method="a2a/data", params=part.get("data"))
    if kind != "text":
        log.debug("skipping unknown A2A part kind %r", kind)
    return None


class A2AMapper:
    """Maps the frames of one run; ``finished`` is set once a ``RunFinished`` was produced."""

    def __init__(self) -> None:
        self.task_id: str | None = None
        self.context_id: str | None = None
        self.received = False  # the server answered this run with at least one frame
        self.started = False
        self.finished = False
        self.finish_reason: FinishReason | None = None
        self._blocks: dict[str, _Block] = {}
        self._last_status: tuple[TaskState, str | None] | None = None
        self._shown_messages: set[str] = set()

    # -- entry points ----------------------------------------------------------------------
    def frame(self, data: dict[str, Any]) -> list[Event]:
        """One decoded SSE ``data:`` object (a JSON-RPC response, or a bare result)."""
        self.received = True
        quick = self.appended_text(data)
        if quick is not None:
            return quick
        err = rpc_error(data)
        if err is not None:
            code, message = err
            return self._finish("error", ErrorReported(message=error_text(code, message), code=str(code)))
        result = data.get("result", data)
        if not isinstance(result, dict):
            log.debug("skipping A2A frame without an object result: %.120r", data)
            return []
        if "kind" not in result:
            for key in ("task", "message", "statusUpdate", "artifactUpdate"):  # 1.0: a oneof by key
                inner = result.get(key)
                if isinstance(inner, dict):
                    return self._dispatch(key, inner, final=False)
        kind = result.get("kind")
        if kind in ("task", "message", "status-update", "artifact-update"):
            return self._dispatch(str(kind), result, final=result.get("final") is True)
        if "status" in result and ("id" in result or "taskId" in result):
            # Pre-0.3 servers (the evo-ai doc): a task-shaped status update with "final".
            return self._dispatch("task", result, final=result.get("final") is True)
        log.debug("skipping unknown A2A frame: %.120r", data)
        return []

    def appended_text(self, data: dict[str, Any]) -> list[Event] | None:
        """A streamed answer's chunk (a 0.3 appended artifact update of one text part, 10^5 of them a
        long answer) mapped as ``frame`` maps it, without its walk; ``None``: not such a chunk (an
        error, not started, not appended, final, no known artifact, a resubscribe snapshot to match,
        other parts), for ``frame``. ``tests/wire/test_wire_batches.py`` holds the two to one answer."""
        update = data.get("result", data)
        if type(update) is not dict or not self.started or "error" in data:
            return None
        try:  # subscripts, not eleven .get calls: a missing key or another type is not such a chunk
            if update["kind"] != "artifact-update" or not update["append"]:
                return None
            if "final" in update and update["final"] is True:
                return None
            artifact = update["artifact"]
            parts = artifact["parts"]
            part = parts[0]
            art_id, kind, text = artifact["artifactId"], part["kind"], part["text"]
        except (KeyError, TypeError, IndexError):
            return None
        if type(artifact) is not dict or type(parts) is not list or len(parts) != 1 or type(part) is not dict:
            return None
        if type(art_id) is not str or not art_id:
            art_id = str(art_id or "artifact")
        block = self._blocks.get(art_id)
        if block is None or kind != "text" or block.replayed is not None:
            return None
        context_id = update.get("contextId")
        if self.task_id is None or (context_id and context_id != self.context_id):
            self._start(update.get("taskId"), context_id)  # started: only the ids it keeps, when they move
        if type(text) is not str:
            text = str(text or "")
        if not text:
            return []
        block.chunks.append(text)  # Block.add, without its call
        return [text_delta(art_id, text)]

    def task(self, task: dict[str, Any]) -> list[Event]:
        """A task snapshot (first frame, resubscribe, ``GetTask``): only what was not shown yet."""
        out = self._start(task.get("id") or task.get("taskId"), task.get("contextId"))
        for artifact in task.get("artifacts") or []:
            if isinstance(artifact, dict):
                out.extend(self._snapshot_artifact(artifact))
        out.extend(self._status(task.get("status"), task.get("metadata")))
        return out

    # -- frame kinds -----------------------------------------------------------------------
    def _dispatch(self, kind: str, obj: dict[str, Any], *, final: bool) -> list[Event]:
        if kind == "task":
            out = self.task(obj)
        elif kind == "message":
            out = self._message(obj)
        elif kind in ("statusUpdate", "status-update"):
            out = self._start(obj.get("taskId"), obj.get("contextId"))
            out.extend(self._status(obj.get("status"), obj.get("metadata")))
        else:
            out = self._start(obj.get("taskId"), obj.get("contextId"))
            out.extend(self._artifact_update(obj))
        if final and not self.finished:  # 0.3 "final: true" on a non-terminal state still ends it
            out.extend(self._finish("stop"))
        return out

    def _start(self, task_id: Any, context_id: Any, fallback_run_id: str = "a2a-run") -> list[Event]:
        if isinstance(task_id, str) and task_id and self.task_id is None:
            self.task_id = task_id
        if isinstance(context_id, str) and context_id:
            self.context_id = context_id
        if self.started:
            return []
        self.started = True
        return [RunStarted(run_id=self.task_id or fallback_run_id, session_id=self.context_id)]

    def _message(self, msg: dict[str, Any]) -> list[Event]:
        """A ``Message`` result: the whole reply when no task runs, otherwise interim agent text."""
        msg_id = str(msg.get("messageId") or "a2a-message")
        out = self._start(msg.get("taskId"), msg.get("contextId"), msg_id)
        if "user" not in str(msg.get("role") or "agent").lower():
            out.extend(self._message_parts(msg, msg_id))
        if self.task_id is None:
            out.extend(self._finish("stop"))
        return out

    def _message_parts(self, msg: dict[str, Any], msg_id: str) -> list[Event]:
        if msg_id in self._shown_messages:
            return []
        self._shown_messages.add(msg_id)
        parts = _parts(msg)
        out: list[Event] = []
        if text := _text(parts):
            out.append(text_delta(msg_id, text))
        out.extend(ev for p in parts if (ev := _other_part(p, msg_id)) is not None)
        return out

    def _status(self, status: Any, metadata: Any) -> list[Event]:
        if not isinstance(status, dict):
            return []
        out: list[Event] = []
        progress = (metadata.get("progress") if isinstance(metadata, dict) else None) or status.get("progress")
        if isinstance(progress, dict):
            out.append(
                Progress(
                    current=_number(progress.get("current")),
                    total=_number(progress.get("total")),
                    message=progress.get("message") if isinstance(progress.get("message"), str) else None,
                )
            )
        state = task_state(status.get("state"))
        if state is None:
            return out
        msg = status.get("message")
        text = _text(_parts(msg)) or None
        if self._last_status != (state, text) and (
            self._last_status is None or self._last_status[0] != state or text is not None
        ):
            self._last_status = (state, text)
            out.append(Status(state=state, message=text))
        if isinstance(msg, dict):
            msg_id = str(msg.get("messageId") or f"{self.task_id or 'a2a'}:{state}")
            if state in _ANSWER_STATES:
                out.extend(self._message_parts(msg, msg_id))
            elif msg_id not in self._shown_messages:  # working: text is the status line; show files/data
                self._shown_messages.add(msg_id)
                out.extend(ev for p in _parts(msg) if (ev := _other_part(p, msg_id)) is not None)
        reason = _FINISH.get(state)
        if reason is None:
            return out
        error = None
        if reason == "error":
            error = ErrorReported(message=text or f"the A2A task {state}", code=f"task_{state}")
        return out + self._finish(reason, error)

    def _artifact_update(self, update: dict[str, Any]) -> list[Event]:
        artifact = update.get("artifact")
        if not isinstance(artifact, dict):
            return []
        art_id = str(artifact.get("artifactId") or "artifact")
        parts = _parts(artifact)
        block = self._blocks.get(art_id)
        if block is None:
            block = self._blocks[art_id] = _Block()
        elif not update.get("append"):
            return self._replace(art_id, block, parts)
        elif block.replayed is not None and block.seen_in_snapshot(_text(parts)):  # no join with no snapshot
            return []
        return self._emit_parts(art_id, block, parts)

    def _snapshot_artifact(self, artifact: dict[str, Any]) -> list[Event]:
        art_id = str(artifact.get("artifactId") or "artifact")
        parts = _parts(artifact)
        block = self._blocks.get(art_id)
        if block is None:
            block = self._blocks[art_id] = _Block()
            out = self._emit_parts(art_id, block, parts)
        else:
            out = self._replace(art_id, block, parts)
        texts = [str(p.get("text") or "") for p in parts if _part_kind(p) == "text"]
        block.replayed, block.matching = texts[-16:], False
        return out

    def _replace(self, art_id: str, block: _Block, parts: list[dict[str, Any]]) -> list[Event]:
        """The whole artifact again: show only what is new (see the module doc)."""
        out: list[Event] = []
        if any(_part_kind(p) == "text" for p in parts):
            text, shown = _text(parts), block.text()
            if text.startswith(shown):
                if tail := text[len(shown) :]:
                    block.add(tail)
                    out.append(text_delta(art_id, tail))
            else:
                block.replace(text)
                out.append(TextReplaced(message_id=art_id, text=text))
        others = [p for p in parts if _part_kind(p) != "text"]
        for part in others[block.others :]:
            block.others += 1
            if (ev := _other_part(part, art_id)) is not None:
                out.append(ev)
        return out

    def _emit_parts(self, art_id: str, block: _Block, parts: list[dict[str, Any]]) -> list[Event]:
        out: list[Event] = []
        for part in parts:
            if _part_kind(part) == "text":
                text = str(part.get("text") or "")
                if text:
                    block.add(text)
                    out.append(text_delta(art_id, text))
            else:
                block.others += 1
                if (ev := _other_part(part, art_id)) is not None:
                    out.append(ev)
        return out

    def _finish(self, reason: FinishReason, error: ErrorReported | None = None) -> list[Event]:
        if self.finished:
            return []
        out: list[Event] = []  # no RunStarted here: the base synthesises one when none came
        self.finished = True
        self.finish_reason = reason
        if error is not None:
            out.append(error)
        out.append(RunFinished(reason=reason))
        return out


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
