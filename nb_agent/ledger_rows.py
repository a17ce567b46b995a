"""A ledger's rows as data: the bounds a row's numbers must keep, a row cleaned to them, and the
older rows folded into groups.

Why a module of its own: a saved notebook's ledger is a file anyone may have written and an agent
reports its own cost, so every row is read through :func:`clean` before it is counted; what the
bounds are, and how old rows are summed so a notebook's ledger stays small, is one job apart from
metering a turn (``nb_agent.ledger``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Row = dict[str, Any]

# Bounds on what a row may hold: a saved notebook is a file anyone may have written, and an agent
# reports its own cost. A value outside them is not believed (the field is left out: a cost unknown).
# They are far above any real turn, and a folded row sums many turns, so sums saturate at them too:
# a total stays a finite number the page can save (JSON has no Infinity) and never overflows.
MAX_TOKENS = 10**15  # tokens in one row (a folded row sums many turns)
MAX_COST = 1e9  # in the row's currency
MAX_SECONDS = 1e9  # about 31 years
MAX_TURNS = 10**9
_BOUNDS: dict[str, float] = {
    "input_tokens": MAX_TOKENS, "output_tokens": MAX_TOKENS, "cached_tokens": MAX_TOKENS,
    "context_used": MAX_TOKENS, "context_max": MAX_TOKENS, "seconds": MAX_SECONDS, "cost": MAX_COST,
    "turns": MAX_TURNS, "unknown": MAX_TURNS,
}  # fmt: skip
_TEXTS = {"type", "agent", "model", "session_id", "run_id", "currency", "cost_source"}

# Rows and groups: the newest KEEP rows stay as they are; past MAX_ROWS the older ones are summed into
# at most MAX_GROUPS rows (per agent, model and session; coarser where that makes more). Adopting a
# saved notebook reads its newest MAX_READ rows; older ones are left out, and the ledger says how many.
MAX_ROWS = 2_000
KEEP = 1_000
MAX_GROUPS = 200
MAX_READ = 20_000
SEVERAL = "(several)"


def sane(field: str, value: Any) -> float | int | None:
    """``value`` if it is a number in ``field``'s range (non-negative, finite, within its bound), else None."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    if not (0 <= value <= _BOUNDS[field]):  # NaN fails both comparisons
        return None
    return value


def key_of(row: Row) -> tuple[str, str, str]:
    return (str(row.get("agent") or "?"), str(row.get("model") or "?"), str(row.get("session_id") or "?"))


@dataclass
class Group:
    agent: str
    model: str
    session: str
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    seconds: float = 0.0
    cost: float = 0.0
    unknown: int = 0  # turns whose cost is unknown
    currency: str = "USD"

    def add(self, row: Row) -> None:
        """Add a clean row (``clean``); every sum saturates at its field's bound."""
        turns = int(row.get("turns") or 1)
        self.turns = min(self.turns + turns, MAX_TURNS)
        self.input_tokens = min(self.input_tokens + int(row.get("input_tokens") or 0), MAX_TOKENS)
        self.output_tokens = min(self.output_tokens + int(row.get("output_tokens") or 0), MAX_TOKENS)
        self.cached_tokens = min(self.cached_tokens + int(row.get("cached_tokens") or 0), MAX_TOKENS)
        self.seconds = min(self.seconds + float(row.get("seconds") or 0.0), MAX_SECONDS)
        if row.get("cost") is None:
            self.unknown = min(self.unknown + turns, MAX_TURNS)
        else:  # a folded row may hold turns of unknown cost beside those it sums
            self.cost = min(self.cost + float(row["cost"]), MAX_COST)
            self.currency = str(row.get("currency") or self.currency)
            self.unknown = min(self.unknown + int(row.get("unknown") or 0), MAX_TURNS)


def clean(row: dict[str, Any]) -> Row:
    """A row as data: known fields only, numbers in their ranges (``sane``) and short strings (a
    notebook is a file anyone may have written; an agent reports its own cost)."""
    out: Row = {}
    for key, value in row.items():
        if key in _BOUNDS:
            if (number := sane(key, value)) is not None:
                out[key] = number
        elif key in _TEXTS and isinstance(value, str):
            out[key] = value[:200]
    out.setdefault("agent", "?")
    return out


def fold(rows: list[Row], keep: int) -> list[Row]:
    """The newest ``keep`` rows as they are, the older ones summed into at most ``MAX_GROUPS`` rows: per
    agent, model and session, else per agent and model, else per agent, else one (linear: the keys are
    counted, stopping past ``MAX_GROUPS``, before any sum is made)."""
    old, new = (rows[:-keep], rows[-keep:]) if keep > 0 else (rows, [])
    keys = [key_of(row) for row in old]
    level = next((n for n in range(3) if _fits(keys, n)), 3)
    groups: dict[tuple[str, str, str], Group] = {}
    for key, row in zip(keys, old, strict=True):
        key = _coarse(key, level)
        (groups.get(key) or groups.setdefault(key, Group(*key))).add(row)
    folded: list[Row] = [
        {
            "type": "turn_usage",
            "agent": g.agent,
            "model": g.model,
            "session_id": g.session,
            "turns": g.turns,
            "input_tokens": g.input_tokens,
            "output_tokens": g.output_tokens,
            "cached_tokens": g.cached_tokens,
            "seconds": round(g.seconds, 3),
            "cost": round(g.cost, 9) if g.turns > g.unknown else None,
            "unknown": g.unknown if g.turns > g.unknown else 0,
            "currency": g.currency,
            "cost_source": "earlier turns, summed",
        }
        for g in groups.values()
    ]
    return folded + new


def _coarse(key: tuple[str, str, str], level: int) -> tuple[str, str, str]:
    """``key`` at ``level``: 0 as it is, 1 without the session, 2 nor the model, 3 one for every row."""
    agent, model, session = key
    return (agent if level < 3 else SEVERAL, model if level < 2 else SEVERAL, session if level < 1 else SEVERAL)


def _fits(keys: list[tuple[str, str, str]], level: int) -> bool:
    seen: set[tuple[str, str, str]] = set()
    for key in keys:
        seen.add(_coarse(key, level))
        if len(seen) > MAX_GROUPS:
            return False
    return True


__all__ = ["KEEP", "MAX_GROUPS", "MAX_READ", "MAX_ROWS", "MAX_TURNS", "Group", "Row", "clean", "fold", "key_of", "sane"]
