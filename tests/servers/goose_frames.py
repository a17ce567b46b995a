"""goosed wire shapes and the scripted agent turns the fake server plays.

Every builder returns a plain dict whose key order is the serde field order of
the Rust struct, so ``dumps`` reproduces serde_json's compact bytes. Sources are
listed in tests/servers/goose_NOTES.md.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

Json = dict[str, Any]

#: Marker a script yields once "the agent has started"; the /reply transport starts its Pings there.
STARTED: Json = {"type": "__started__"}

OLD_CONFIRM_PROMPT = "Goose would like to call the above tool. Allow? (y/n):"
DECLINED_RESPONSE = (
    "The user has declined to run this tool. DO NOT attempt to call this tool again. "
    "If there are no alternative methods to proceed, clearly explain the situation and STOP."
)
ALLOW_ACTIONS = frozenset({"allow_once", "always_allow"})
USER_ONLY = {"userVisible": True, "agentVisible": False}


def dumps(obj: Any) -> str:
    """serde_json::to_string: compact, raw UTF-8 (no \\u escapes for non-ASCII)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def data_frame(obj: Json) -> bytes:
    """A /reply frame: ``data: <json>\\n\\n`` (reply.rs ``stream_event``)."""
    return f"data: {dumps(obj)}\n\n".encode()


def id_frame(seq: int, obj: Json) -> bytes:
    """A /sessions/{id}/events frame (session_events.rs ``format_sse_event``)."""
    return f"id: {seq}\ndata: {dumps(obj)}\n\n".encode()


def ping_comment(n: int) -> bytes:
    """The events-API keepalive: an SSE comment, never a data frame."""
    return f": ping {n}\n\n".encode()


def now_s() -> int:
    return int(time.time())


def new_msg_id() -> str:
    return f"msg_{uuid.uuid4()}"


# ── content items (MessageContent, tag="type", camelCase) ──────────────────


def text(t: str) -> Json:
    return {"type": "text", "text": t}


def image(data: str, mime: str) -> Json:
    return {"type": "image", "data": data, "mimeType": mime}


def _call(name: str, args: Json) -> Json:
    return {"status": "success", "value": {"name": name, "arguments": args}}


def tool_request(call_id: str, name: str, args: Json) -> Json:
    return {"type": "toolRequest", "id": call_id, "toolCall": _call(name, args)}


def tool_request_error(call_id: str, error: str) -> Json:
    return {"type": "toolRequest", "id": call_id, "toolCall": {"status": "error", "error": error}}


def tool_response(call_id: str, texts: list[str], *, is_error: bool = False) -> Json:
    value = {"content": [text(t) for t in texts], "isError": is_error}
    return {"type": "toolResponse", "id": call_id, "toolResult": {"status": "success", "value": value}}


def tool_response_legacy(call_id: str, texts: list[str]) -> Json:
    """Pre-CallToolResult form: ``value`` is a bare ``Content[]`` (tool_result_serde.rs still reads it)."""
    value = [text(t) for t in texts]
    return {"type": "toolResponse", "id": call_id, "toolResult": {"status": "success", "value": value}}


def tool_confirmation_request(call_id: str, name: str, args: Json, prompt: str | None) -> Json:
    return {"type": "toolConfirmationRequest", "id": call_id, "toolName": name, "arguments": args, "prompt": prompt}


def action_required(call_id: str, name: str, args: Json, prompt: str | None = None) -> Json:
    data = {"actionType": "toolConfirmation", "id": call_id, "toolName": name, "arguments": args, "prompt": prompt}
    return {"type": "actionRequired", "data": data}


def frontend_tool_request(call_id: str, name: str, args: Json) -> Json:
    return {"type": "frontendToolRequest", "id": call_id, "toolCall": _call(name, args)}


def thinking(t: str, signature: str) -> Json:
    return {"type": "thinking", "thinking": t, "signature": signature}


def redacted_thinking(data: str) -> Json:
    return {"type": "redactedThinking", "data": data}


def reasoning(t: str) -> Json:
    return {"type": "reasoning", "text": t}


_ABSENT: Any = object()


def system_notification(kind: str, msg: str, data: Any = _ABSENT) -> Json:
    """``data`` is ``skip_serializing_if = "Option::is_none"`` in the source: absent unless given."""
    out: Json = {"type": "systemNotification", "notificationType": kind, "msg": msg}
    if data is not _ABSENT:
        out["data"] = data
    return out


def message(
    role: str,
    content: list[Json],
    *,
    msg_id: str | None = None,
    created: int | None = None,
    metadata: Json | None = None,
) -> Json:
    """Message: ``id`` is serialized even when null (plain ``Option``, no skip)."""
    return {
        "id": msg_id,
        "role": role,
        "created": now_s() if created is None else created,
        "content": content,
        "metadata": dict(metadata or {"userVisible": True, "agentVisible": True}),
    }


# ── MessageEvent (tag="type", snake_case envelope keys) ────────────────────


def ev_message(msg: Json, token_state: Json) -> Json:
    return {"type": "Message", "message": msg, "token_state": token_state}


def ev_error(error: str) -> Json:
    return {"type": "Error", "error": error}


def ev_finish(reason: str, token_state: Json) -> Json:
    return {"type": "Finish", "reason": reason, "token_state": token_state}


def ev_ping() -> Json:
    return {"type": "Ping"}


def ev_active_requests(ids: list[str]) -> Json:
    return {"type": "ActiveRequests", "request_ids": ids}


# ── session state ─────────────────────────────────────────────────────────


@dataclass
class Tokens:
    """Session token counters; ``wire`` is TokenState (camelCase) or the seed's snake_case."""

    input: int = 0
    output: int = 0
    total: int = 0
    acc_input: int = 0
    acc_output: int = 0
    acc_total: int = 0

    def wire(self, *, snake: bool = False) -> Json:
        vals = (self.input, self.output, self.total, self.acc_input, self.acc_output, self.acc_total)
        keys = SNAKE_KEYS if snake else CAMEL_KEYS
        return dict(zip(keys, vals, strict=True))

    def add_turn(self, inp: int, out: int) -> None:
        self.input, self.output, self.total = inp, out, inp + out
        self.acc_input += inp
        self.acc_output += out
        self.acc_total += inp + out


CAMEL_KEYS = (
    "inputTokens",
    "outputTokens",
    "totalTokens",
    "accumulatedInputTokens",
    "accumulatedOutputTokens",
    "accumulatedTotalTokens",
)
SNAKE_KEYS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "accumulated_input_tokens",
    "accumulated_output_tokens",
    "accumulated_total_tokens",
)


def _iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class SessionState:
    """One goose session: what ``GET /sessions/{id}`` returns plus its token counters."""

    id: str
    working_dir: str
    name: str = ""
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    updated_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    conversation: list[Json] = field(default_factory=list)
    tokens: Tokens = field(default_factory=Tokens)

    def add(self, msg: Json) -> None:
        """Store a message; streamed text chunks sharing an id merge into one, as goose persists them."""
        self.updated_at = datetime.now(UTC)
        last = self.conversation[-1] if self.conversation else None
        if (
            last is not None
            and msg["id"] is not None
            and last["id"] == msg["id"]
            and all(c["type"] == "text" for c in last["content"] + msg["content"])
        ):
            joined = "".join(c["text"] for c in last["content"] + msg["content"])
            last["content"] = [text(joined)]
            return
        self.conversation.append(json.loads(dumps(msg)))

    def wire(self, *, with_conversation: bool = True) -> Json:
        """Session (session_manager.rs field order)."""
        t = self.tokens
        started = t.acc_total > 0
        return {
            "id": self.id,
            "working_dir": self.working_dir,
            "name": self.name,
            "user_set_name": False,
            "session_type": "user",
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
            "extension_data": {},
            "total_tokens": t.total if started else None,
            "input_tokens": t.input if started else None,
            "output_tokens": t.output if started else None,
            "accumulated_total_tokens": t.acc_total if started else None,
            "accumulated_input_tokens": t.acc_input if started else None,
            "accumulated_output_tokens": t.acc_output if started else None,
            "schedule_id": None,
            "recipe": None,
            "user_recipe_values": None,
            "conversation": [json.loads(dumps(m)) for m in self.conversation] if with_conversation else None,
            "message_count": len(self.conversation),
        }


@dataclass
class Turn:
    """What a script needs: the session, the user's text and a way to wait for an approval."""

    session: SessionState
    user_text: str
    expect_confirmation: Callable[[str], Awaitable[str]]
    snake: bool = False

    def msg(self, m: Json) -> Json:
        """Record ``m`` and wrap it; token_state is the session's value *before* this turn ends (reply.rs)."""
        self.session.add(m)
        return ev_message(m, self.session.tokens.wire(snake=self.snake))

    def finish(self, reason: str, out_tokens: int) -> Json:
        inp = 100 + 10 * len(self.session.conversation)
        self.session.tokens.add_turn(inp, out_tokens)
        return ev_finish(reason, self.session.tokens.wire(snake=self.snake))


Script = Callable[[Turn, str], AsyncIterator[Json]]


def _assistant(content: list[Json], msg_id: str | None = None, created: int | None = None) -> Json:
    return message("assistant", content, msg_id=msg_id or new_msg_id(), created=created)


async def _hello(t: Turn, rest: str) -> AsyncIterator[Json]:
    mid, created = new_msg_id(), now_s()
    chunks = ["Hello", "!", " You said", ": ", rest or "nothing", "."]
    for c in chunks:
        yield t.msg(_assistant([text(c)], mid, created))
        await asyncio.sleep(0.005)
    yield t.finish("stop", 3 * len(chunks))


async def _tool(t: Turn, rest: str, *, old_form: bool = False) -> AsyncIterator[Json]:
    yield t.msg(_assistant([text("I'll list the files.")]))
    call_id = f"toolu_{uuid.uuid4().hex[:24]}"
    args = {"command": "ls"}
    yield t.msg(_assistant([tool_request(call_id, "developer__shell", args)]))
    answer = t.expect_confirmation(call_id)  # registered before the prompt leaves the server
    if old_form:
        prompt = message("user", [tool_confirmation_request(call_id, "developer__shell", args, OLD_CONFIRM_PROMPT)])
    else:
        prompt = message("assistant", [action_required(call_id, "developer__shell", args)], metadata=USER_ONLY)
    yield t.msg(prompt)
    action = await answer
    if action in ALLOW_ACTIONS:
        yield t.msg(message("user", [tool_response(call_id, ["a.txt\nb.txt"])], msg_id=new_msg_id()))
        yield t.msg(_assistant([text("Done.")]))
    else:
        denied = tool_response(call_id, [DECLINED_RESPONSE], is_error=True)
        yield t.msg(message("user", [denied], msg_id=new_msg_id()))
        yield t.msg(_assistant([text("Tool call denied.")]))
    yield t.finish("stop", 40)


async def _tool_old(t: Turn, rest: str) -> AsyncIterator[Json]:
    async for ev in _tool(t, rest, old_form=True):
        yield ev


async def _kinds(t: Turn, rest: str) -> AsyncIterator[Json]:
    call = "call_kinds_1"
    items: list[tuple[str, Json]] = [
        ("assistant", text("plain text")),
        ("assistant", image("iVBORw0KGgo=", "image/png")),
        ("assistant", tool_request(call, "developer__text_editor", {"command": "view", "path": "/tmp/a.txt"})),
        ("assistant", tool_request_error("call_kinds_2", "-32603: Something went wrong")),
        ("user", tool_response(call, ["a.txt"])),
        ("user", tool_response_legacy(call, ["legacy a.txt"])),
        ("assistant", thinking("Let me think.", "sig-abc")),
        ("assistant", redacted_thinking("cmVkYWN0ZWQ=")),
        ("assistant", reasoning("Because the user asked.")),
        ("assistant", system_notification("thinkingMessage", "Thinking...")),
        ("assistant", system_notification("inlineMessage", "Compacting conversation", None)),
        ("assistant", frontend_tool_request("call_kinds_3", "frontend__pick", {"choices": ["a", "b"]})),
    ]
    for role, item in items:
        yield t.msg(message(role, [item], msg_id=new_msg_id()))
    yield {"type": "ModelChange", "model": "gpt-4o", "mode": "auto"}
    note = {"method": "notifications/message", "params": {"level": "info", "data": "indexing 3 files"}}
    yield {"type": "Notification", "request_id": call, "message": note}
    yield {"type": "UpdateConversation", "conversation": [json.loads(dumps(m)) for m in t.session.conversation]}
    yield {
        "type": "RoutingDecision",
        "agent_name": "goose",
        "mode_slug": "assistant",
        "confidence": 0.9,
        "reasoning": "default route",
    }
    yield t.finish("stop", 60)


async def _snake(t: Turn, rest: str) -> AsyncIterator[Json]:
    t.snake = True
    yield t.msg(_assistant([text("snake_case token_state, cut short")]))
    yield t.finish("length", 4096)


async def _error(t: Turn, rest: str) -> AsyncIterator[Json]:
    yield t.msg(_assistant([text("Reading the file...")]))
    yield ev_error("Failed to execute tool: File not found")
    yield t.finish("error", 7)


async def _slow(t: Turn, rest: str) -> AsyncIterator[Json]:
    mid, created = new_msg_id(), now_s()
    deadline = time.monotonic() + 20
    i = 0
    while time.monotonic() < deadline:
        yield t.msg(_assistant([text(f"tick {i} ")], mid, created))
        i += 1
        await asyncio.sleep(0.05)
    yield t.finish("stop", i)


async def _long(t: Turn, rest: str) -> AsyncIterator[Json]:
    try:
        n = int(rest.split()[0]) if rest.split() else 100
    except ValueError:
        n = 100
    mid, created = new_msg_id(), now_s()
    for i in range(n):
        yield t.msg(_assistant([text(f"chunk {i} ")], mid, created))
        if i % 16 == 15:
            await asyncio.sleep(0)
    yield t.finish("stop", n)


async def _echo(t: Turn, rest: str) -> AsyncIterator[Json]:
    yield t.msg(_assistant([text(f"You said: {t.user_text}")]))
    yield t.finish("stop", 5)


SCRIPTS: dict[str, Script] = {
    "hello": _hello,
    "tool": _tool,
    "toololdconfirm": _tool_old,
    "kinds": _kinds,
    "snake": _snake,
    "error": _error,
    "slow": _slow,
    "long": _long,
}


def user_text_of(msg: Json) -> str:
    parts = [c for c in msg.get("content", []) if isinstance(c, dict) and c.get("type") == "text"]
    return " ".join(str(c.get("text", "")) for c in parts)


async def run_turn(t: Turn) -> AsyncIterator[Json]:
    """Pick the script by the first word; ``startfail`` fails before the agent exists (no STARTED, no Finish)."""
    word, _, rest = t.user_text.strip().partition(" ")
    if word.lower() == "startfail":
        yield ev_error("Failed to get session agent: no provider configured")
        return
    yield STARTED
    async for ev in SCRIPTS.get(word.lower(), _echo)(t, rest.strip()):
        yield ev
