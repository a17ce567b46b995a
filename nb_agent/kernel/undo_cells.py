"""Reverting the cells a run inserted, edited, deleted or moved: one step of the notebook's undo.

The workspace extension answers each change with what it replaced (an edit: the cell's source and
metadata before it; a delete: each cell whole, and where it was; a move: where the cell came from),
so the kernel keeps, per run, the operations that revert it (:func:`reverting`). An undo sends them,
latest first, in one ``revert`` request: the page applies them as one step of the notebook's undo
history, so Ctrl+Z (Z in command mode) brings the agent's cells back. A cell that
is gone since, or already back, is skipped and said.
"""

from __future__ import annotations

from typing import Any

from nb_agent.kernel.addressing import link
from nb_agent.kernel.workspace import FrontEndError, NoFrontEnd

_WORDS = {"delete": "inserted", "source": "edited", "insert": "deleted", "move": "moved"}


def reverting(kind: str, reply: Any) -> list[dict[str, Any]]:
    """The operations that revert the change ``kind`` whose answer from the page was ``reply``."""
    if not isinstance(reply, dict):
        return []
    ids = [str(i) for i in reply.get("cell_ids") or []]
    if kind == "insert":
        return [{"op": "delete", "cell_id": i} for i in ids]
    before = reply.get("before")
    if kind == "edit" and isinstance(before, dict) and ids:
        return [{"op": "source", "cell_id": ids[0], "source": before.get("source"), "metadata": before.get("metadata")}]
    if kind == "delete" and isinstance(before, list):
        cells = [b for b in before if isinstance(b, dict) and isinstance(b.get("cell"), dict)]
        cells.sort(key=lambda b: -int(b.get("index") or 0))  # applied latest first: put back top to bottom
        return [{"op": "insert", "cell": b["cell"], "index": int(b.get("index") or 0)} for b in cells]
    if kind == "move" and isinstance(reply.get("from"), int) and ids:
        return [{"op": "move", "cell_id": ids[0], "position": reply["from"]}]
    return []


def describe(operations: list[dict[str, Any]]) -> str:
    """``2 inserted cells removed, 1 edit reverted``: what reverting ``operations`` does."""
    counts: dict[str, int] = dict.fromkeys(_WORDS, 0)
    for operation in operations:
        kind = str(operation.get("op", ""))
        counts[kind] = counts.get(kind, 0) + 1
    parts = []
    for kind, n in counts.items():
        if not n:
            continue
        what = _WORDS.get(kind, kind)
        verb = {"inserted": "removed", "edited": "reverted", "deleted": "put back", "moved": "moved back"}.get(what, "")
        parts.append(f"{n} {what} cell{'s' if n != 1 else ''} {verb}")
    return ", ".join(parts)


async def revert(operations: list[dict[str, Any]]) -> str:
    """Ask the run's page to revert ``operations`` (latest first); what it did, or why not."""
    if not operations:
        return ""
    try:
        page = await link()
        reply = await page.request("revert", {"operations": operations})
    except (NoFrontEnd, FrontEndError) as exc:
        return f"the cells were not reverted: {exc}"
    done = reply.get("done", 0) if isinstance(reply, dict) else 0
    skipped = [str(s) for s in (reply.get("skipped") or [])] if isinstance(reply, dict) else []
    text = f"cells reverted ({describe(operations)})" if done else "no cell was reverted"
    return text + (f"; skipped: {'; '.join(skipped[:10])}" if skipped else "")
