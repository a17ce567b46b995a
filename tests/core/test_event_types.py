"""``nb_agent/events.py`` and the front end's ``js/src/types.d.ts`` describe the same events.

The kernel sends events as JSON and the widget's reducer reads them through the TypeScript
declarations; a type or field on one side only is a field the widget silently drops, or one it
waits for in vain. Read from both sources, so neither can drift alone.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

from pydantic import BaseModel

from nb_agent import events as ev

TYPES_D_TS = Path(__file__).resolve().parents[2] / "js" / "src" / "types.d.ts"


def _ts_interfaces(source: str) -> dict[str, tuple[list[str], str]]:
    """name -> (what it extends, body), for every ``export interface`` (bodies hold no braces of their own)."""
    pattern = r"export interface (\w+)\s*(?:extends ([\w, ]+))?\{(.*?)\}"
    return {m[1]: (re.findall(r"\w+", m[2] or ""), m[3]) for m in re.finditer(pattern, source, re.S)}


def _all_fields(name: str, interfaces: dict[str, tuple[list[str], str]]) -> set[str]:
    parents, body = interfaces[name]
    return _ts_fields(body).union(*(_all_fields(p, interfaces) for p in parents))


def _ts_fields(body: str) -> set[str]:
    body = re.sub(r"/\*.*?\*/|//[^\n]*", "", body, flags=re.S)
    return {m[1] for m in re.finditer(r"(\w+)\??\s*:", body)}


def ts_events() -> dict[str, set[str]]:
    """event type -> field names, for the interfaces the ``AgentEvent`` union lists."""
    source = TYPES_D_TS.read_text()
    union = re.search(r"export type AgentEvent\s*=(.*?);", source, re.S)
    assert union is not None, "types.d.ts declares no AgentEvent union"
    interfaces = _ts_interfaces(source)
    out: dict[str, set[str]] = {}
    for name in re.findall(r"\w+", union[1]):
        kind = re.search(r'type:\s*"(\w+)"', interfaces[name][1])
        assert kind is not None, f"{name} has no type literal"
        out[kind[1]] = _all_fields(name, interfaces)
    return out


def py_events() -> dict[str, set[str]]:
    """event type -> field names (computed ones included: they are in the JSON), for the ``Event`` union."""
    union = typing.get_args(typing.get_args(ev.Event)[0])
    out: dict[str, set[str]] = {}
    for cls in union:
        assert issubclass(cls, BaseModel)
        fields = set(cls.model_fields) | set(cls.model_computed_fields)
        out[str(cls.model_fields["type"].default)] = fields
    return out


def test_the_same_event_types_on_both_sides() -> None:
    py, ts = py_events(), ts_events()
    assert sorted(set(py) - set(ts)) == [], "in events.py, missing from types.d.ts"
    assert sorted(set(ts) - set(py)) == [], "in types.d.ts, missing from events.py"


def test_the_same_fields_for_every_event() -> None:
    py, ts = py_events(), ts_events()
    drift = {
        kind: {"only in events.py": sorted(py[kind] - ts[kind]), "only in types.d.ts": sorted(ts[kind] - py[kind])}
        for kind in sorted(set(py) & set(ts))
        if py[kind] != ts[kind]
    }
    assert drift == {}


def test_the_reader_sees_a_field_added_on_one_side() -> None:
    """The check itself: a field only the TypeScript side has is found."""
    body = 'type: "status"; state?: string | null; message?: string | null; /** c */ extra: number'
    assert _ts_fields(body) == {"type", "state", "message", "extra"}
