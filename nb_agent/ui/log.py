"""The widget's event log: raw events in order, and a compacted copy for batches, snapshots and saving.

Compaction merges consecutive text (and thinking) deltas of one message, drops argument
deltas of calls that completed and terminal output a later report of the same terminal replaces
(each report holds the whole bounded tail); replaying the compacted log gives the same transcript. It is
used three ways: on each batch sent to the views (so a batch of 60 one-word deltas travels as
one event, not 60 envelopes), on the snapshot a late or second view asks for, and on the
transcript saved with the notebook. Merged text is joined once per run of deltas, so compaction
is O(n) in the bytes of the log, not O(n²) as repeated concatenation would be.
"""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]
_MERGED = ("text_delta", "thinking")


def _mergeable(last: Json, ev: Json) -> bool:
    kind = ev.get("type")
    return (
        kind in _MERGED
        and last.get("type") == kind
        and last.get("message_id") == ev.get("message_id")
        and (kind == "text_delta" or bool(ev.get("delta")))
    )


def compact(events: list[Json]) -> list[Json]:
    out: list[Json] = []
    parts: list[str] = []  # deltas of out[-1] still to be joined, when it is a merged run
    completed = {e.get("tool_call_id") for e in events if e.get("type") == "tool_call"}
    last_report = {  # (tool call, terminal) -> the index of its last output report
        (e.get("tool_call_id"), t.get("terminal_id")): i
        for i, e in enumerate(events)
        if e.get("type") == "tool_updated"
        for t in e.get("terminals") or ()
    }

    def close_run() -> None:
        if len(parts) > 1:
            out[-1] = {**out[-1], "delta": "".join(parts)}
        parts.clear()

    for i, ev in enumerate(events):
        if ev.get("type") == "tool_call_delta" and ev.get("tool_call_id") in completed:
            continue
        if ev.get("type") == "tool_updated" and ev.get("terminals"):
            call = ev.get("tool_call_id")
            kept = [t for t in ev["terminals"] if last_report.get((call, t.get("terminal_id"))) == i]
            rest = {k: v for k, v in ev.items() if k not in ("type", "tool_call_id", "terminals") and v is not None}
            if not kept and not rest:
                continue
            ev = {**ev, "terminals": kept or None}
        if out and parts and _mergeable(out[-1], ev):
            parts.append(ev.get("delta", ""))
            continue
        close_run()
        out.append(ev)
        if ev.get("type") in _MERGED:
            parts.append(ev.get("delta", ""))
    close_run()
    return out


class EventLog:
    """Append-only: the views get ``events[k:]`` (compacted) from the raw index they have reached."""

    def __init__(self) -> None:
        self.events: list[Json] = []

    def __len__(self) -> int:
        return len(self.events)

    def extend(self, events: list[Json]) -> int:
        start = len(self.events)
        self.events.extend(events)
        return start

    def compacted(self, start: int = 0) -> list[Json]:
        return compact(self.events[start:] if start else self.events)
