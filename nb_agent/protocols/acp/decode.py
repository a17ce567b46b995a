"""ACP ``session/update`` notifications, stop reasons and permission requests -> unified events.

Pure: no I/O, one ``ACPMapper`` per turn. The SDK (``agent-client-protocol``) has already parsed
each update into its schema models. Session-wide kinds (commands, modes, config options, session
info) are ``session``'s; user message replays are skipped, and so is any kind this version
does not know, never fatal. A tool call's ACP details (kind, status, locations, diffs, terminal
output) follow its ``tool_call`` as ``tool_updated``.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    ContentToolCallContent,
    FileEditToolCallContent,
    PermissionOption,
    PromptResponse,
    TerminalToolCallContent,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UsageUpdate,
)

from nb_agent.event_fast import text_delta, thinking
from nb_agent.event_parts import TerminalOutput
from nb_agent.events import (
    ApprovalOption,
    ApprovalRequested,
    Decision,
    ErrorReported,
    Event,
    FileDiff,
    FinishReason,
    Plan,
    PlanEntry,
    ToolCall,
    ToolCallDelta,
    ToolLocation,
    ToolResult,
    ToolUpdated,
    Usage,
)
from nb_agent.protocols.acp.hints import BUBBLEWRAP_HINT, failed_sandbox

log = logging.getLogger("nb_agent.protocols.acp")

DIFF_TEXT_MAX = 200_000  # characters of each side of a diff kept in an event (the transcript is saved)
TerminalLookup = Callable[[str], TerminalOutput | None]

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "max_tokens": "length",
    "max_turn_requests": "length",
    "refusal": "error",
    "cancelled": "cancel",
}
REFUSAL = "the agent refused to continue this turn (stop reason: refusal)"
# nb-agent's decisions -> the ACP option kinds that express them, best first. An allow is never
# widened (allow_once never picks allow_always); a deny may fall back to reject_always.
_OPTION_KINDS: dict[str, tuple[str, ...]] = {
    "allow_once": ("allow_once",),
    "allow_always": ("allow_always",),
    "deny": ("reject_once", "reject_always"),
}


def _arguments(raw_input: Any) -> dict[str, Any]:
    if raw_input is None:
        return {}
    return raw_input if isinstance(raw_input, dict) else {"input": raw_input}


def _tool_name(title: str | None, kind: str | None) -> str:
    return title or kind or "tool"


NO_OUTPUT = "(the agent sent no output for this call)"
# Where agents put a command's output in ``rawOutput`` (Codex: formatted_output, aggregated_output, stdout),
# best first: what the user would have seen in a terminal.
_OUTPUT_KEYS = ("formatted_output", "aggregated_output", "output", "stdout")


def tool_content_text(update: ToolCallStart | ToolCallUpdate) -> str:
    """What a finished tool call produced, as text: its content blocks, else its raw output (a
    command's output when the raw output is a record of the run), else a note that there is none."""
    parts: list[str] = []
    for item in update.content or []:
        if isinstance(item, ContentToolCallContent):
            block = item.content
            parts.append(block.text if isinstance(block, TextContentBlock) else f"[{block.type}]")
        elif isinstance(item, FileEditToolCallContent):
            parts.append(f"edited {item.path}")
        elif isinstance(item, TerminalToolCallContent):
            parts.append(f"[terminal {item.terminal_id}]")
    text = "\n".join(parts) if parts else _raw_text(update.raw_output)
    if failed_sandbox(text):
        text += f"\n[nb-agent] {BUBBLEWRAP_HINT}"
    return text


def _raw_text(out: Any) -> str:
    if out is None or out == "" or out == {}:
        return NO_OUTPUT
    if isinstance(out, str):
        return out
    if isinstance(out, dict):
        key = next((k for k in _OUTPUT_KEYS if isinstance(out.get(k), str)), None)
        if key is not None:
            shown = str(out[key])
            stderr = out.get("stderr")
            if key == "stdout" and isinstance(stderr, str) and stderr:
                shown += stderr
            code = out.get("exit_code")
            if isinstance(code, int) and not isinstance(code, bool) and code != 0:
                shown += f"\n[exit code {code}]"
            return shown or NO_OUTPUT
    return json.dumps(out, ensure_ascii=False, default=str)


class ACPMapper:
    """Maps one turn's updates; remembers tool calls so updates and results find their names."""

    def __init__(self, terminal: TerminalLookup | None = None) -> None:
        self.terminal = terminal or (lambda _id: None)
        self.terminal_calls: dict[str, set[str]] = {}  # terminal_id -> the tool calls that show it
        self.message_id = uuid.uuid4().hex  # used when the agent sends no messageId
        self._pending: dict[str, list[Any]] = {}  # tool_call_id -> [name, arguments, title] while pending
        self._called: dict[str, ToolCall] = {}  # the complete tool_call, once emitted
        self._finished: set[str] = set()
        self._notes: dict[str, str] = {}  # tool_call_id -> why nb-agent answered it (kept on later titles)
        self.names: dict[str, str] = {}  # tool_call_id -> the tool's programmatic name, when the agent sends it
        self.context: tuple[int, int] | None = None  # the last usage_update: (used, size)
        self.cost: tuple[float, str] | None = None  # and its cost: (amount, currency)

    def update(self, update: Any) -> list[Event]:
        if isinstance(update, AgentMessageChunk):
            block = update.content
            if isinstance(block, TextContentBlock) and block.text:
                return [text_delta(update.message_id or self.message_id, block.text)]
            return []
        if isinstance(update, AgentThoughtChunk):
            block = update.content
            text = block.text if isinstance(block, TextContentBlock) else ""
            return [thinking(text, update.message_id)]
        if isinstance(update, ToolCallStart | ToolCallProgress):
            u = update
            out = self._tool(u.tool_call_id, u.title, u.kind, u.raw_input, u.status)
            return out + self.details(u) + self._result(u)
        if isinstance(update, AgentPlanUpdate):
            entries = [PlanEntry(content=e.content, status=e.status, priority=e.priority) for e in update.entries]
            return [Plan(entries=entries)]
        if isinstance(update, UsageUpdate):
            self.context = (update.used, update.size)
            cost = update.cost
            self.cost = (cost.amount, cost.currency) if cost is not None else self.cost
            amount, currency = self.cost or (None, None)
            return [Usage(context_used=update.used, context_max=update.size, cost=amount, currency=currency)]
        log.debug("skipped ACP update %s", getattr(update, "session_update", type(update).__name__))
        return []

    def _tool(self, call_id: str, title: str | None, kind: str | None, raw: Any, status: str | None) -> list[Event]:
        """ACP's ``pending`` means the input may still be streaming (OpenCode sends ``{cwd}`` first and
        the command later): a ``tool_call_delta`` until the call runs, asks permission or ends; then
        one complete ``tool_call`` with the latest input."""
        pending = self._pending.get(call_id)
        if call_id in self._called:
            return []
        out: list[Event] = []
        named = self.names.get(call_id)  # ACP's tool-call ``name``: the card's label, the title its words
        if pending is None:
            pending = self._pending[call_id] = [named or _tool_name(title, kind), {}, title or None]
            out.append(ToolCallDelta(tool_call_id=call_id, name=pending[0]))
        elif title:
            pending[0], pending[2] = named or title, title
        if raw is not None:
            pending[1] = _arguments(raw)
        if status not in (None, "pending"):
            out.extend(self._call(call_id))
        return out

    def details(self, u: ToolCallStart | ToolCallUpdate) -> list[Event]:
        """``tool_updated``: what ACP says of a call beyond its name and arguments, when it says it."""
        diffs = [diff_of(c) for c in u.content or [] if isinstance(c, FileEditToolCallContent)]
        terminal_ids = [c.terminal_id for c in u.content or [] if isinstance(c, TerminalToolCallContent)]
        for terminal_id in terminal_ids:
            self.terminal_calls.setdefault(terminal_id, set()).add(u.tool_call_id)
        terminals = [t for t in map(self.terminal, terminal_ids) if t is not None]
        locations = [ToolLocation(path=loc.path, line=loc.line) for loc in u.locations or []]
        note = self._notes.get(u.tool_call_id)
        fields: dict[str, Any] = {
            "title": f"{u.title} ({note})" if u.title and note else u.title,
            "kind": u.kind,
            "status": u.status,
            "locations": locations or None,
            "diffs": diffs or None,
            "terminals": terminals or None,
        }
        if all(v is None for v in fields.values()):
            return []
        return [ToolUpdated(tool_call_id=u.tool_call_id, **fields)]

    def terminal_output(self, output: TerminalOutput) -> list[Event]:
        """New output of a client terminal, for every tool call that embeds it."""
        calls = sorted(self.terminal_calls.get(output.terminal_id, ()))
        return [ToolUpdated(tool_call_id=call, terminals=[output]) for call in calls]

    def _call(self, call_id: str) -> list[Event]:
        """The complete ``tool_call``, once: when the call runs, asks permission or ends."""
        if call_id in self._called or call_id not in self._pending:
            return []
        name, arguments, title = self._pending.pop(call_id)
        call = self._called[call_id] = ToolCall(tool_call_id=call_id, name=name, arguments=arguments, title=title)
        return [call]

    def _result(self, update: ToolCallStart | ToolCallUpdate) -> list[Event]:
        if update.status not in ("completed", "failed") or update.tool_call_id in self._finished:
            return []
        self._finished.add(update.tool_call_id)
        return [
            *self._call(update.tool_call_id),
            ToolResult(
                tool_call_id=update.tool_call_id,
                content=tool_content_text(update),
                is_error=update.status == "failed",
            ),
        ]

    def client_call(self, tool_call: ToolCallUpdate) -> list[Event]:
        """The tool card of a call the client itself makes for the agent (a command, a write)."""
        out = self._tool(tool_call.tool_call_id, tool_call.title, tool_call.kind, tool_call.raw_input, None)
        return out + self._call(tool_call.tool_call_id)

    def permission(
        self, tool_call: ToolCallUpdate, options: Sequence[PermissionOption], prompt: str | None = None
    ) -> list[Event]:
        """``session/request_permission`` -> the tool card (the call as the agent described it so far),
        then an approval ``approve()`` answers. The approval is the request alone: its title, input
        and diffs, never what earlier updates said under the same id (an agent could announce a
        harmless call there, then ask for another under its id)."""
        out = self.client_call(tool_call)
        title = tool_call.title or None
        name = _tool_name(title, tool_call.kind)
        choices = ", ".join(f"{o.name} ({o.kind})" for o in options)
        if prompt is None:
            said = title or f"the agent's request does not say what {name} call {tool_call.tool_call_id} does"
            prompt = f"{said}: {choices}" if choices else said
        diffs = [diff_of(c) for c in tool_call.content or [] if isinstance(c, FileEditToolCallContent)]
        ask = ApprovalRequested(
            tool_call_id=tool_call.tool_call_id,
            name=name,
            title=title,
            arguments=_arguments(tool_call.raw_input),
            prompt=prompt,
            options=[ApprovalOption(option_id=o.option_id, name=o.name, kind=o.kind) for o in options],
            diffs=diffs,
        )
        return [*out, ask]

    def noted(self, tool_call: ToolCallUpdate, note: str) -> list[Event]:
        """A call nb-agent answered or let through without asking: its card, with ``note`` saying why."""
        out = self.client_call(tool_call)
        diffs = [diff_of(c) for c in tool_call.content or [] if isinstance(c, FileEditToolCallContent)]
        name = self._called[tool_call.tool_call_id].name
        title = f"{tool_call.title or name} ({note})"
        self._notes[tool_call.tool_call_id] = note  # a later title from the agent keeps saying why
        return [*out, ToolUpdated(tool_call_id=tool_call.tool_call_id, title=title, kind=tool_call.kind,
                                  diffs=diffs or None)]  # fmt: skip

    def usage(self, response: PromptResponse) -> Usage:
        """The turn's usage, as ``run_finished`` keeps it: the tokens (ACP's unstable ``usage`` field,
        else what an agent puts in ``_meta.quota.token_count``, as Gemini CLI does), and the last
        context size and cost its ``usage_update`` updates gave. Always a usage, empty when the agent
        said nothing: the run then says "tokens not reported" rather than nothing."""
        tokens = _tokens(response)
        used, size = self.context or (None, None)
        amount, currency = self.cost or (None, None)
        input_tokens, output_tokens, total = tokens or (None, None, None)
        u = response.usage  # its cache reads and writes, parts of the input priced apart (the usage ledger)
        return Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=total,
            cached_tokens=u.cached_read_tokens if u is not None else None,
            cache_write_tokens=u.cached_write_tokens if u is not None else None,
            context_used=used,
            context_max=size,
            cost=amount,
            currency=currency,
        )

    def finish(self, response: PromptResponse) -> tuple[FinishReason, ErrorReported | None]:
        reason = _FINISH.get(response.stop_reason, "stop")
        if response.stop_reason == "refusal":
            return reason, ErrorReported(message=REFUSAL, code="refusal")
        return reason, None


def _count(counts: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = counts.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _tokens(response: PromptResponse) -> tuple[int | None, int | None, int | None] | None:
    """(input, output, total) tokens of the turn: ACP's ``usage``, else ``_meta.quota.token_count``."""
    u = response.usage
    if u is not None:
        return u.input_tokens, u.output_tokens, u.total_tokens
    quota = (response.field_meta or {}).get("quota")
    counts = quota.get("token_count") if isinstance(quota, dict) else None
    if not isinstance(counts, dict):
        return None
    found = (
        _count(counts, "input_tokens", "inputTokens"),
        _count(counts, "output_tokens", "outputTokens"),
        _count(counts, "total_tokens", "totalTokens"),
    )
    if found == (None, None, None):
        return None
    inp, out, total = found
    if total is None and inp is not None and out is not None:
        total = inp + out
    return inp, out, total


def diff_of(content: FileEditToolCallContent) -> FileDiff:
    """An ACP diff as an event part, each side cut to ``DIFF_TEXT_MAX`` characters."""
    old, new = content.old_text, content.new_text
    cut = len(new) > DIFF_TEXT_MAX or (old is not None and len(old) > DIFF_TEXT_MAX)
    return FileDiff(
        path=content.path,
        old_text=None if old is None else old[:DIFF_TEXT_MAX],
        new_text=new[:DIFF_TEXT_MAX],
        truncated=cut,
    )


def choose_option(options: Sequence[PermissionOption], decision: Decision) -> str | None:
    """The agent's own option id that says ``decision``, or ``None`` when it offers none."""
    for kind in _OPTION_KINDS[decision]:
        for option in options:
            if option.kind == kind:
                return option.option_id
    return None


__all__ = ["DIFF_TEXT_MAX", "REFUSAL", "ACPMapper", "choose_option", "diff_of", "tool_content_text"]
