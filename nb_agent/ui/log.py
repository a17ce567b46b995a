"""The widget's event log: raw events in order, and a compacted copy for snapshots and saving.

Compaction merges consecutive text (and thinking) deltas of one message and drops argument
deltas of calls that completed; replaying the compacted log gives the same transcript, in
O(n) bytes, so a late view, a second view or a reopened notebook gets the whole conversation
without the kernel re-sending every delta.
"""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]


def compact(events: list[Json]) -> list[Json]:
    out: list[Json] = []
    completed = {e.get("tool_call_id") for e in events if e.get("type") == "tool_call"}
    for ev in events:
        kind = ev.get("type")
        if kind == "tool_call_delta" and ev.get("tool_call_id") in completed:
            continue
        last = out[-1] if out else None
        if (
            last is not None
            and kind in ("text_delta", "thinking")
            and last.get("type") == kind
            and last.get("message_id") == ev.get("message_id")
            and (kind == "text_delta" or ev.get("delta"))
        ):
            out[-1] = {**last, "delta": last.get("delta", "") + ev.get("delta", "")}
            continue
        out.append(ev)
    return out


class EventLog:
    """Append-only; ``since(k)`` gives the events a view has not seen."""

    def __init__(self) -> None:
        self.events: list[Json] = []

    def __len__(self) -> int:
        return len(self.events)

    def extend(self, events: list[Json]) -> int:
        start = len(self.events)
        self.events.extend(events)
        return start

    def compacted(self) -> list[Json]:
        return compact(self.events)
