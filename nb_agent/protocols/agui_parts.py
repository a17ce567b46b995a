"""AG-UI payload helpers: tool arguments, usage sums, JSON Patch, message content.

Pure functions the mapper uses on single frames; kept apart so the mapper stays one job.
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

from nb_agent.events import TokenUsage
from nb_agent.wire import jsondecode

log = logging.getLogger("nb_agent.protocols.agui")


def parse_arguments(text: str, call_id: str = "") -> dict[str, Any]:
    """Tool arguments from their JSON text; anything unparsable is kept as ``{"_raw": text}``."""
    if not text.strip():
        return {}
    try:
        value = jsondecode.loads(text)
    except ValueError:
        log.debug("agui: tool call %s has arguments that are not JSON: %.120r", call_id, text)
        return {"_raw": text}
    if not isinstance(value, dict):
        log.debug("agui: tool call %s has arguments that are not a JSON object: %.120r", call_id, text)
        return {"_raw": text}
    return value


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def sum_usage(entries: Any) -> TokenUsage | None:
    """pydantic-ai sends one usage entry per (provider, model); the turn's usage is their sum.

    An entry without ``totalTokens`` counts as input + output, so the sum stays consistent."""
    if isinstance(entries, dict):
        entries = [entries]
    totals: dict[str, int] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        counts = {"input_tokens": _count(entry.get("inputTokens")), "output_tokens": _count(entry.get("outputTokens"))}
        total = _count(entry.get("totalTokens"))
        if total is None and any(v is not None for v in counts.values()):
            total = sum(v or 0 for v in counts.values())
        counts["total_tokens"] = total
        for name, value in counts.items():
            if value is not None:
                totals[name] = totals.get(name, 0) + value
    return TokenUsage.model_validate(totals) if totals else None


def _pointer(path: str) -> list[str]:
    if not path:
        return []
    if not path.startswith("/"):
        raise ValueError(f"bad JSON pointer {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _patch_one(doc: Any, op: dict[str, Any]) -> Any:
    kind, parts = op.get("op"), _pointer(str(op.get("path", "")))
    if kind not in ("add", "replace", "remove"):
        raise ValueError(f"unsupported op {kind!r}")
    if not parts:
        return None if kind == "remove" else copy.deepcopy(op.get("value"))
    parent = doc
    for part in parts[:-1]:
        parent = parent[int(part)] if isinstance(parent, list) else parent[part]
    last = parts[-1]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if kind == "add":
            parent.insert(index, copy.deepcopy(op.get("value")))
        elif kind == "replace":
            parent[index] = copy.deepcopy(op.get("value"))
        else:
            del parent[index]
    elif isinstance(parent, dict):
        if kind == "remove":
            del parent[last]
        elif kind == "replace" and last not in parent:
            raise KeyError(last)
        else:
            parent[last] = copy.deepcopy(op.get("value"))
    else:
        raise TypeError(f"cannot patch into {type(parent).__name__}")
    return doc


def apply_patch(doc: Any, ops: Any) -> Any:
    """Minimal RFC 6902 (add/replace/remove) on a copy; an op that does not apply is skipped."""
    doc = copy.deepcopy(doc)
    for op in ops if isinstance(ops, list) else []:
        try:
            doc = _patch_one(doc, op if isinstance(op, dict) else {})
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            log.debug("agui: skipped JSON Patch op %.120r: %s", op, exc)
    return doc


def obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def content_text(content: Any) -> str:
    """A message or tool result content: a string, or a list of parts whose text is joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else json.dumps(content, default=str)
