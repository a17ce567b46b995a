"""The usage ledger: one place where every agent's usage events become one row per turn.

Every protocol already maps its usage onto the unified events (``usage``, the ``usage`` of
``run_finished``, ``model_changed``, ACP's config options); :class:`TurnMeter` watches one run's
events and, when it ends, makes its :class:`~nb_agent.events.TurnUsage`:

- **Tokens** of the turn: where the agent reports session totals (``accumulated_*``) and the meter
  knows them from the turn before (or the agent counts from zero, as the built-in agent does), the
  difference, which includes what the turn spent outside its model calls (compaction summaries,
  subagents); otherwise the turn's own counts as the agent reported them last.
- **Cost**: the agent's own report (ACP ``usage_update`` gives the session's cost so far: the turn
  costs the difference), else the price table (``nb_agent.prices``) for the model, else unknown,
  with the reason. A local model costs nothing.
- **Time**: from the prompt to ``run_finished``.

:class:`Ledger` keeps a notebook's rows: this kernel's, and those a saved notebook brought back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from nb_agent.events import (
    ConfigOptionsChanged,
    Event,
    ModelChanged,
    RunFinished,
    RunStarted,
    TokenUsage,
    TurnUsage,
    Usage,
)
from nb_agent.ledger_rows import KEEP, MAX_GROUPS, MAX_READ, MAX_ROWS, MAX_TURNS, Group, Row, clean, fold, key_of, sane
from nb_agent.prices import Cost, cost_of

LOCAL = "local model (no charge)"
REPLAYED = "replayed from the notebook's recording (no model or agent call)"
PART_REPLAYED = "unknown: part of the turn was replayed from the recording, part ran live"


@dataclass
class Baseline:
    """What the agent had reported for its session when the last turn ended."""

    input: int | None = None
    output: int | None = None
    cost: float | None = None


class TurnMeter:
    """One run of one agent. ``baseline``: the same client's totals after its previous turn; for its
    first turn ``Baseline(0, 0, 0.0)`` when its session starts with it (or it counts from zero, as the
    built-in agent does), ``None`` when it continues a session begun elsewhere."""

    def __init__(
        self, agent: str, *, model: str | None = None, local: bool = False, baseline: Baseline | None = None
    ) -> None:
        self.agent = agent
        self.model = model
        self.local = local
        self.baseline = baseline
        self.replayed: str | None = None  # "all" or "part" of the turn answered from a recording
        self.started = time.monotonic()
        self.run_id: str | None = None
        self.session_id: str | None = None
        self.last: TokenUsage | None = None  # the last usage with token counts
        self.accumulated: tuple[int | None, int | None] = (None, None)
        self.context: tuple[int | None, int | None] = (None, None)
        self.cost: tuple[float, str] | None = None  # the agent's session cost so far
        self.cached = [0, 0]  # cache reads and writes of every usage event (one per model call)

    def see(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.run_id, self.session_id = event.run_id or None, event.session_id
        elif isinstance(event, ModelChanged) and event.model:
            self.model = event.model
        elif isinstance(event, ConfigOptionsChanged):
            for option in event.options:
                if option.category == "model" and isinstance(option.value, str) and option.value:
                    self.model = option.value  # the model's id (what a price table knows), not its label
        elif isinstance(event, Usage):
            self._usage(event)
            self.cached[0] += event.cached_tokens or 0
            self.cached[1] += event.cache_write_tokens or 0
        elif isinstance(event, RunFinished) and event.usage is not None:
            self._usage(event.usage)

    def _usage(self, usage: TokenUsage) -> None:
        if usage.input_tokens is not None or usage.output_tokens is not None:
            self.last = usage
        if usage.accumulated_input_tokens is not None or usage.accumulated_output_tokens is not None:
            self.accumulated = (usage.accumulated_input_tokens, usage.accumulated_output_tokens)
        if usage.context_used is not None:
            self.context = (usage.context_used, usage.context_max)
        if usage.cost is not None:
            self.cost = (usage.cost, usage.currency or "USD")

    def tokens(self) -> tuple[int | None, int | None, int | None, int | None]:
        """(input, output, cache reads, cache writes) of the turn."""
        acc_in, acc_out = self.accumulated
        base = self.baseline
        if base is not None and acc_in is not None and acc_out is not None:
            before_in, before_out = base.input or 0, base.output or 0
            if acc_in >= before_in and acc_out >= before_out:  # the session's totals: every call counted
                return acc_in - before_in, acc_out - before_out, self.cached[0] or None, self.cached[1] or None
        if self.last is None:
            return None, None, None, None
        last = self.last
        return last.input_tokens, last.output_tokens, last.cached_tokens, last.cache_write_tokens

    def finish(self) -> TurnUsage:
        """The turn's row (call when its ``run_finished`` arrives)."""
        input_tokens, output_tokens, cached, written = self.tokens()
        amount: float | None = None
        currency: str | None = None
        if self.replayed == "all":  # nothing was asked of a model or an agent: nothing spent
            input_tokens, output_tokens, cached, written = 0, 0, None, None
            amount, currency, source = 0.0, "USD", REPLAYED
        elif self.replayed == "part":
            source = PART_REPLAYED
        elif self.cost is not None:
            total, currency = self.cost
            before = self.baseline.cost if self.baseline is not None else None
            if before is not None and total >= before:
                amount, source = total - before, "reported by the agent"
            else:  # a session this client did not start: what came before this turn is not known
                amount, source = total, "reported by the agent: its session's total so far"
        elif self.local:
            amount, currency, source = 0.0, "USD", LOCAL
        else:
            found = cost_of(
                self.model,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cached_tokens=cached,
                cache_write_tokens=written,
            )
            if isinstance(found, Cost):
                amount, currency, source = found.amount, found.currency, found.source
            else:
                source = f"unknown: {found}"
        if amount is not None and sane("cost", amount) is None:  # an agent's own report, believed within bounds
            amount, source = None, f"unknown: the reported cost ({amount:g}) is out of range"
        input_tokens, output_tokens = _tokens(input_tokens), _tokens(output_tokens)
        cached = _tokens(cached)
        used, size = self.context
        used, size = _tokens(used), _tokens(size)
        return TurnUsage(
            agent=self.agent,
            model=self.model,
            session_id=self.session_id,
            run_id=self.run_id,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_tokens=cached,
            context_used=used,
            context_max=size,
            seconds=round(time.monotonic() - self.started, 3),
            cost=None if amount is None else round(amount, 9),
            currency=currency,
            cost_source=source,
        )

    def final_usage(self, row: TurnUsage, reported: TokenUsage | None) -> TokenUsage | None:
        """The run's ``run_finished`` usage with the turn's own numbers, ``row``'s: what ``_agent.usage``
        and the widget's meter read then agree with the turn's line and ``%agent_usage``. An agent
        reports its last model call there (the built-in agent) or its turn (a server); the turn is
        counted once, here. The session's totals and the agent's session cost stay as it said them."""
        if reported is None and row.input_tokens is None and row.output_tokens is None and row.context_used is None:
            return None  # nothing reported: nothing to show
        counted = row.input_tokens is not None or row.output_tokens is not None
        return (reported or TokenUsage()).model_copy(
            update={
                "input_tokens": row.input_tokens,
                "output_tokens": row.output_tokens,
                "total_tokens": (row.input_tokens or 0) + (row.output_tokens or 0) if counted else None,
                "cached_tokens": row.cached_tokens,
                "cache_write_tokens": None if self.replayed == "all" else self.tokens()[3],
                "context_used": row.context_used,
                "context_max": row.context_max,
            }
        )

    def after(self) -> Baseline:
        """The totals the next turn of the same client counts from."""
        acc_in, acc_out = self.accumulated
        return Baseline(acc_in, acc_out, self.cost[0] if self.cost is not None else None)


def _tokens(value: int | None) -> int | None:
    return value if value is None or sane("input_tokens", value) is not None else None


class Ledger:
    """A notebook's turns: rows as JSON (``TurnUsage`` dumps), in order, each run once.

    Adding is amortised constant time: past ``MAX_ROWS`` rows a fold leaves at most ``KEEP +
    MAX_GROUPS``, so the next fold is ``MAX_ROWS - KEEP - MAX_GROUPS`` rows away.
    """

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self._runs: set[str] = set()
        self.left_out = 0  # rows of saved notebooks that were not read (past MAX_READ)

    def add(self, usage: TurnUsage | Row) -> bool:
        """Add a row; False if its run is already there (a notebook's rows adopted twice)."""
        added = self._take(usage.model_dump(mode="json") if isinstance(usage, TurnUsage) else usage)
        if len(self.rows) > MAX_ROWS:
            self.rows = fold(self.rows, KEEP)
        return added

    def _take(self, raw: Row) -> bool:
        row = clean(raw)
        run = row.get("run_id")
        if isinstance(run, str) and run:
            if run in self._runs:
                return False
            self._runs.add(run)
        self.rows.append(row)
        return True

    def adopt(self, saved: Any) -> int:
        """Rows a saved notebook holds (``metadata.nb_agent.usage``), before this kernel's; how many.
        Linear in the rows read, and at most ``MAX_READ`` are: older ones are counted in ``left_out``."""
        rows = saved.get("rows") if isinstance(saved, dict) else None
        if not isinstance(rows, list):
            return 0
        skipped = max(0, len(rows) - MAX_READ)
        before = sane("turns", saved.get("left_out"))  # what an earlier adoption already left out
        self.left_out = min(self.left_out + skipped + int(before or 0), MAX_TURNS)
        mine, self.rows = self.rows, []
        added = sum(1 for r in rows[skipped:] if isinstance(r, dict) and self._take(r))
        self.rows += mine
        if len(self.rows) > MAX_ROWS:
            self.rows = fold(self.rows, KEEP)
        return added

    def groups(self) -> list[Group]:
        found: dict[tuple[str, str, str], Group] = {}
        for row in self.rows:
            key = key_of(row)
            group = found.get(key) or found.setdefault(key, Group(*key))
            group.add(row)
        return list(found.values())

    def notes(self) -> list[str]:
        """What the rows do not show, for people."""
        if not self.left_out:
            return []
        return [
            f"{self.left_out:,} older rows of the notebook's saved ledger were not read "
            f"(at most {MAX_READ:,} are): they are in no total"
        ]

    def saved(self) -> dict[str, Any]:
        """What the notebook keeps (``metadata.nb_agent.usage``): the rows and their totals; only finite
        numbers, so the page can always serialise it."""
        total = Group("all", "all", "all")
        for row in self.rows:
            total.add(row)
        out: dict[str, Any] = {
            "version": 1,
            "rows": self.rows,
            "totals": {
                "turns": total.turns,
                "input_tokens": total.input_tokens,
                "output_tokens": total.output_tokens,
                "cached_tokens": total.cached_tokens,
                "seconds": round(total.seconds, 3),
                "cost": round(total.cost, 9),
                "currency": total.currency,
                "turns_cost_unknown": total.unknown,
            },
        }
        if self.left_out:
            out["left_out"] = self.left_out
        return out


__all__ = [
    "KEEP", "LOCAL", "MAX_GROUPS", "MAX_READ", "MAX_ROWS", "PART_REPLAYED", "REPLAYED", "Baseline", "Group",
    "Ledger", "TurnMeter", "clean", "fold", "sane",
]  # fmt: skip
