"""AG-UI payload helpers: tool arguments, usage sums, JSON Patch (via ``jsonpatch``), message content.

Pure functions the mapper uses on single frames; kept apart so the mapper stays one job.
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import jsonpatch  # type: ignore[import-untyped,unused-ignore]
import jsonpointer  # type: ignore[import-untyped,unused-ignore]

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


class PatchError(ValueError):
    """A ``STATE_DELTA`` that does not apply; the state it was meant for is unchanged."""


def apply_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON Patch on a copy of ``doc``, all or nothing (the ``jsonpatch`` library).

    Every operation is supported (``move``, ``copy`` and ``test`` too), and, as RFC 6902 section 5 asks,
    a patch with one operation that fails (a ``test`` that does not match, a path that is not there, an
    unknown op) is not applied at all: ``PatchError`` says why and ``doc`` is untouched. Skipping the
    failing operation instead would leave a state neither side ever had, and the client sends its state
    back to the server on the next run. ``None`` (no ``delta`` at all) is an empty patch.
    """
    if ops is None:
        return copy.deepcopy(doc)
    if not isinstance(ops, list):
        raise PatchError(f"a JSON Patch is a list of operations, got {type(ops).__name__}")
    try:
        return jsonpatch.apply_patch(doc, ops, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        raise PatchError(str(exc)) from exc
    except (TypeError, ValueError, KeyError, IndexError) as exc:  # an op whose fields have the wrong types
        raise PatchError(f"{type(exc).__name__}: {exc}") from exc


def obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def content_text(content: Any) -> str:
    """A message or tool result content: a string, or a list of parts whose text is joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else json.dumps(content, default=str)
