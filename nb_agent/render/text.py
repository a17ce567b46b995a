"""A readable live plain-text view of a run: the CLI and headless notebooks share it.

Text streams as it arrives; every other event gets one short line, so a terminal (or
``jupyter execute`` output) shows what the agent does without a widget.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from nb_agent.event_parts import FileDiff
from nb_agent.event_questions import ElicitationAnswered, ElicitationRequested
from nb_agent.events import (
    ApprovalRequested,
    Checkpoint,
    CommandsChanged,
    ConversationReplaced,
    ErrorReported,
    Event,
    ModelChanged,
    ModesChanged,
    Plan,
    Progress,
    RunFinished,
    Status,
    StreamReset,
    Subtask,
    TextDelta,
    TextReplaced,
    Thinking,
    TitleChanged,
    TokenUsage,
    ToolCall,
    ToolResult,
    ToolUpdated,
    TurnUsage,
    UserMessage,
)
from nb_agent.render.args import classify
from nb_agent.render.diff import DIFF_LINES, diff_drawn
from nb_agent.render.terminal import strip_controls, strip_sequences
from nb_agent.render.unseen import BINARY, CUT, FLAG, SHOWN_LIMIT, escaped, inline, plain_lines, shown

_MAX_RESULT = 200
CHECKPOINT_NOTICEABLE = 0.1  # seconds of checkpointing worth a line (kernel/checkpoints.py)


def _short(value: Any, limit: int = _MAX_RESULT, *, card: bool = False) -> str:
    """``value`` on one short line. Outside a card (results, statuses) control sequences go whole, as
    the terminal's writer takes them; on a card (arguments) every character stays, escaped."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(escaped(text if card else strip_controls(text)).split())  # escaped first: none read as a space
    return text if len(text) <= limit else text[:limit] + "…"


_CODE_LINES = 40  # lines of code shown for a tool call; an approval shows all (up to SHOWN_LIMIT characters)


def _block(text: str, lang: str, limit: int | None) -> tuple[list[str], bool, bool, bool]:
    """``text``'s lines as ``lang`` reads them (render.unseen), at most ``limit`` of them: (lines, hidden
    characters, not plain text, cut)."""
    drawn = shown(text[:SHOWN_LIMIT], lang)
    lines, cut = drawn.plain, len(text) > SHOWN_LIMIT
    if limit is not None and len(lines) > limit:
        lines, cut = [*lines[:limit], f"… {len(lines) - limit} more lines"], True
    if len(text) > SHOWN_LIMIT:
        lines.append(f"… {len(text) - SHOWN_LIMIT:,} more characters, not shown")
    return lines, drawn.unseen, drawn.binary, cut


def _asked(
    name: str, arguments: dict[str, Any], *, diffs: Sequence[FileDiff] = (), whole: bool = False
) -> tuple[str, list[str], list[str]]:
    """A call's arguments as what they ask for (``render.args``): what goes on its line (the other
    arguments, a one-line command), and the lines below it (code, a long command, a diff), each line as
    its language reads it with hidden characters escaped (``render.unseen``), then what the reader must
    be told about them (``⚠`` lines). ``diffs``: the approval's own; ``whole``: an approval's, shown whole."""
    shown_args = classify(name, arguments, diffs_shown=bool(diffs))
    head = (
        f" {_short(shown_args.rest, card=True)}"
        if shown_args.rest or (shown_args.code is None and shown_args.command is None and not shown_args.diff)
        else ""
    )
    body: list[str] = []
    unseen, binary, cut = shown_args.command_unseen, False, False
    if shown_args.command is not None:
        lines, hidden, odd, short = _block(shown_args.command, "bash", None)
        unseen, binary, cut = unseen or hidden, binary or odd, cut or short
        if len(lines) > 1:
            body += [f"{'$ ' if i == 0 else '  '}{line}" for i, line in enumerate(lines)]
        else:
            head += f" $ {lines[0]}"
    if shown_args.code is not None:
        lines, hidden, odd, short = _block(shown_args.code[1], shown_args.code[0], None if whole else _CODE_LINES)
        body += lines
        unseen, binary, cut = unseen or hidden, binary or odd, cut or short
    for diff in [*([shown_args.diff] if shown_args.diff else []), *diffs]:
        drawn = diff_drawn(diff, None if whole else DIFF_LINES)
        body += drawn.lines
        unseen, binary, cut = unseen or drawn.unseen, binary or drawn.binary, cut or drawn.cut
    warnings = [f"⚠ {said}" for said, on in ((FLAG, unseen), (BINARY, binary), (CUT, cut)) if on]
    return head, body, warnings


def label(text: str) -> str:
    """A name or a title on one line: terminal control sequences removed whole (``render.terminal``: an
    agent's title is no place for them), then every hidden character escaped (``render.unseen``)."""
    return inline(strip_controls(text))


def _indented(lines: list[str]) -> str:
    return "".join(f"    {line}\n" for line in lines)


def _with_names(warnings: list[str], ev: ApprovalRequested) -> list[str]:
    """``warnings``, with the flag also when the question or the tool's name holds a hidden character."""
    hidden = (ev.prompt is not None and shown(ev.prompt).unseen) or label(ev.display_name) != ev.display_name
    return [f"⚠ {FLAG}", *warnings] if hidden and f"⚠ {FLAG}" not in warnings else warnings


def approval_warnings(ev: ApprovalRequested) -> list[str]:
    """What an approval's reader must be told about what it shows (hidden characters, a text that is
    not text or is cut), in the words the terminal's card uses: the CLI's question repeats it."""
    return _with_names(_asked(ev.name, ev.arguments, diffs=ev.diffs, whole=True)[2], ev)


def _context(used: int | None, size: int | None) -> str | None:
    """``context 1,200/200,000 (0.6%)``, warned past 80%: how full the model's window was at the end."""
    if used is None or not size:
        return None
    pct = 100 * used / size
    return f"context {used:,}/{size:,} ({pct:.1f}%){' ⚠' if pct > 80 else ''}"


def usage_line(usage: TokenUsage) -> str:
    """``tokens 12 in / 30 out / 42 total (session 100) · context 1,200/200,000 (0.6%)``.

    A usage without token counts says ``tokens not reported``: some agents give only their context
    (Codex) or nothing at all, and an empty line read as if nothing had been used."""
    parts: list[str] = []
    if usage.total_tokens is not None or usage.input_tokens is not None:
        parts.append(
            f"tokens {usage.input_tokens or 0} in / {usage.output_tokens or 0} out / {usage.total_tokens or 0} total"
            + (f" (session {usage.accumulated_total_tokens})" if usage.accumulated_total_tokens is not None else "")
        )
    elif usage.output_tokens is None and usage.accumulated_total_tokens is None:
        parts.append("tokens not reported")
    if (context := _context(usage.context_used, usage.context_max)) is not None:
        parts.append(context)
    if usage.cost is not None:
        parts.append(f"cost {usage.cost:.4g} {usage.currency or ''}".rstrip())
    return " · ".join(parts)


_ACTED = {"accept": "answered", "decline": "declined", "cancel": "cancelled"}


def question_line(ev: ElicitationRequested | ElicitationAnswered) -> str:
    """An agent's question, or how it was answered, in one or two lines."""
    if isinstance(ev, ElicitationAnswered):
        return f"  → {_ACTED[ev.action]}" + (f" ({ev.note})" if ev.note else "")
    # the agent's words as a card draws them (render.unseen): a hidden character shows as its escape
    who = inline(ev.source) if ev.source else "the agent"
    asks = f"? {who} asks: {_short(ev.message, card=True)}"
    if ev.mode == "url":
        return f"{asks}\n  it offers a link to {inline(ev.host or '')}: {inline(ev.url or '')}"
    fields = ", ".join((f.title or f.name) + ("*" if f.required else "") for f in ev.fields)
    return asks + (f"\n  fields: {_short(fields, card=True)}" if fields else "")


def turn_line(turn: TurnUsage) -> str:
    """``this turn: 1,200 in (1,000 cached) / 30 out · context 1,200/200,000 (0.6%) · 2.4 s · $0.0011
    (price table 2025-11-25)``: a turn's one usage line, its row in the ledger (``nb_agent.ledger``)."""
    tokens = "tokens not reported"
    if turn.input_tokens is not None or turn.output_tokens is not None:
        cached = f" ({turn.cached_tokens:,} cached)" if turn.cached_tokens else ""
        tokens = f"{turn.input_tokens or 0:,} in{cached} / {turn.output_tokens or 0:,} out"
    if turn.cost is None:
        cost = f"cost {turn.cost_source or 'unknown'}"
    else:
        money = f"${turn.cost:.4f}" if turn.currency in (None, "USD") else f"{turn.cost:.4f} {turn.currency}"
        cost = f"{money} ({turn.cost_source})"
    context = _context(turn.context_used, turn.context_max)
    return f"this turn: {tokens}{f' · {context}' if context else ''} · {turn.seconds:.1f} s · {cost}"


def fold_replacements(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Event dicts with every ``text_replaced`` applied: the message's first ``text_delta`` carries
    the new text, its other deltas go. For views built after the fact (answer text, Markdown)."""
    out: list[dict[str, Any]] = []
    where: dict[str, list[int]] = {}  # message id -> its text_delta positions in out
    dropped: set[int] = set()
    for ev in events:
        kind, message_id = ev.get("type"), str(ev.get("message_id"))
        if kind == "text_replaced" and message_id in where:
            first, *rest = where[message_id]
            out[first] = {**out[first], "delta": str(ev.get("text", ""))}
            dropped.update(rest)
            where[message_id] = [first]
            continue
        if kind == "text_replaced":  # nothing shown yet: it is the message's text
            ev = {"type": "text_delta", "message_id": message_id, "delta": str(ev.get("text", ""))}
        if ev.get("type") == "text_delta":
            where.setdefault(message_id, []).append(len(out))
        out.append(dict(ev))
    return [ev for i, ev in enumerate(out) if i not in dropped]


class TextRenderer:
    """Feed events to ``render``; output goes through ``write`` (no newline added)."""

    def __init__(self, write: Callable[[str], object], *, show_thinking: bool = True) -> None:
        self.write = write
        self.show_thinking = show_thinking
        self._mid_line = False
        self._thinking = False
        self._calls: dict[str, dict[str, Any]] = {}  # arguments shown per call: shown again if corrected
        self._metered = False  # this run's turn_usage was shown: its run_finished shows no second line

    def _line(self, text: str) -> None:
        if self._mid_line:
            self.write("\n")
        self.write(text + "\n")
        self._mid_line = False
        self._thinking = False

    def render(self, ev: Event) -> None:
        match ev:
            case TextDelta():
                if self._thinking and self._mid_line:
                    self.write("\n")  # reasoning text ends; the answer starts on its own line
                self.write(ev.delta)
                self._mid_line = not ev.delta.endswith("\n")
                self._thinking = False
            case TextReplaced():  # a terminal cannot take text back: say so, then the new text
                self._line("[the agent replaced this answer; it now reads:]")
                self.write(ev.text)
                self._mid_line = bool(ev.text) and not ev.text.endswith("\n")
            case Thinking():
                if not self.show_thinking:
                    return
                if not self._thinking:
                    self._line("… thinking")
                    self._thinking = True
                if ev.delta:  # reasoning text streams as it arrives
                    self.write(ev.delta)
                    self._mid_line = not ev.delta.endswith("\n")
            case ToolCall():
                shown = self._calls.get(ev.tool_call_id)
                if shown == ev.arguments:
                    return
                self._calls[ev.tool_call_id] = ev.arguments
                again = "" if shown is None else " (arguments corrected)"
                head, body, _ = _asked(ev.name, ev.arguments)
                self._line(f"⚙ {label(ev.display_name)}{head}{again}")
                self.write(_indented(body))
            case Plan():
                marks = {"pending": "☐", "in_progress": "◐", "completed": "☑"}
                self._line("plan: " + "; ".join(f"{marks[e.status]} {_short(e.content)}" for e in ev.entries))
            case ToolResult():
                self._line(f"  {'✗' if ev.is_error else '✓'} {_short(ev.content)}")
            case ApprovalRequested():
                what = "wants to run" if ev.kind == "approval" else "asks the client to run"
                # the question may quote cells' sources: its lines as code is read, hidden characters escaped
                note = " — " + "\n".join(plain_lines(strip_sequences(ev.prompt))) if ev.prompt else ""
                head, body, warnings = _asked(ev.name, ev.arguments, diffs=ev.diffs, whole=True)  # the edit, whole
                self._line(f"? the agent {what} {label(ev.display_name)}{head}{note}")
                self.write(_indented(body + _with_names(warnings, ev)))
            case Status(message=str() as message):
                self._line(f"[{ev.state}] {_short(message)}")
            case Progress():
                frac = f"{ev.current:g}/{ev.total:g}" if ev.current is not None and ev.total else ""
                self._line(f"[progress {frac}] {ev.message or ''}".rstrip())
            case ModelChanged():
                self._line(f"[model: {ev.model}{f' ({ev.mode})' if ev.mode else ''}]")
            case ToolUpdated(terminals=list() as terminals):  # a command's output, once it has ended
                for t in terminals:
                    if t.exit_code is not None or t.signal is not None:
                        ended = f"killed ({t.signal})" if t.signal else f"exit {t.exit_code}"
                        tail = t.output.rstrip().splitlines()[-3:]
                        self._line(f"  $ {ended}" + "".join(f"\n    {line}" for line in tail))
            case ModesChanged(current=str() as current):
                others = ", ".join(m.id for m in ev.available)
                self._line(f"[mode: {current}{f' (modes: {others})' if others else ''}]")
            case CommandsChanged(commands=commands) if commands:
                self._line("[commands: " + ", ".join(f"/{c.name}" for c in commands) + "]")
            case TitleChanged():
                self._line(f"[title: {ev.title}]")
            case Subtask():
                self._line(f"[{ev.name or ev.id}: {ev.state}]")
            case StreamReset():
                self._line(f"[stream reset: {ev.reason}; history reloaded]")
            case UserMessage():  # an earlier turn of a session opened again (its replay)
                self._line(f"» {_short(ev.text)}")
            case ConversationReplaced():
                self._line(f"[conversation replaced: {len(ev.messages)} messages]")
            case ErrorReported():
                self._line(f"error: {ev.message}")
            case TurnUsage():
                self._line(turn_line(ev))
                self._metered = True
            case Checkpoint(state="undoable") if ev.seconds >= CHECKPOINT_NOTICEABLE:
                self._line(f"[checkpoint: {ev.seconds:.1f} s]")
            case Checkpoint(state="dropped" | "undone", message=str() as message):
                self._line(f"[an agent run ({ev.run}): {message}]")
            case ElicitationRequested() | ElicitationAnswered():
                self._line(question_line(ev))
            case RunFinished():
                if self._mid_line:
                    self.write("\n")
                    self._mid_line = False
                if not self._metered and ev.usage is not None and (line := usage_line(ev.usage)):
                    self.write(line + "\n")  # a stream no ledger metered (nb-agent stream): the agent's report
                self._metered = False
            case _:
                pass
