"""Record and replay for one ``%agent`` call: which recording, whether to answer from it, and the new one.

Every ``%agent`` run in a notebook cell is recorded into the metadata of an output of its cell (see
``nb_agent.conversation.recordings`` for where and why); re-executing the cell answers it from that recording:

- ``auto`` (the default: ``%agent --replay``, ``%agent_config --replay``, ``NB_AGENT_REPLAY``): a
  cell with a recording is replayed. Where the run diverges from it (the prompt changed, a tool's
  result differs so the next model request is another) the cell says where and what differed, then
  goes on live (a server's or an ACP agent's run, which cannot resume mid-way, stops instead). A cell
  without a recording runs live.
- ``strict``: replay only. No recording, or a divergence, stops the run with the reason and fails the
  cell (so ``nbconvert --execute`` and nbval report it); nothing is ever sent to a model or an agent.
- ``off``: always live.

Why ``auto``: a notebook is re-run by people who did not write it (a teammate, CI, a published
tutorial), usually without the author's key, model or agent, and the cells below an ``%agent`` cell
use what its run defined. Replaying by default is what makes such a notebook re-run the same; a
prompt someone edits on purpose runs live, after saying so. Each replay is labelled as one.

Approvals are asked again in a replay; ``--replay-approvals`` (``NB_AGENT_REPLAY_APPROVALS=1``)
answers them as they were answered when recorded: each recorded answer answers the replayed call it
was recorded for and nothing else (an "always" allows that call once; no gate remembers it, so the
reader's own next calls are asked), see :meth:`CellTape.recorded_answer`. A run is recorded up to
``NB_AGENT_RECORD_LIMIT`` bytes (2,000,000; 0 records nothing); past that the recording is cut and
says where, and a replay stops there. Under ``%agent_verify`` (``NB_AGENT_VERIFYING``) agent cells
only replay, and a cell without a recording is skipped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from nb_agent.agent.recording import DEFAULT_LIMIT, Recording, first_line, now, prompt_hash
from nb_agent.agent.tape import TapeProvider
from nb_agent.conversation.log import compact
from nb_agent.conversation.recordings import KEY, CellRef, Found, find
from nb_agent.conversation.replay_client import DIVERGED, ReplayClient
from nb_agent.event_parts import DECISIONS
from nb_agent.events import ApprovalRequested, Decision, ErrorReported, Event, RunFinished, RunStarted, Status
from nb_agent.kernel.verify import inside
from nb_agent.run import RunClient

LIMIT_ENV = "NB_AGENT_RECORD_LIMIT"
# The bounds of a recording read from a notebook, whatever wrote it: larger is refused, and the cell
# says so. A replay costs time and memory per event, linearly (bench/replay_size.py: about 0.1 ms and
# 2 kB an event on a busy 2-core machine, the events kept as _agent.events): 50,000 events replay in
# a few seconds and about 100 MB, which a laptop bears. A run recorded under the default record limit
# (2 MB, about 100 bytes an event) holds some 20,000. The size bound keeps the parse (JSON to Python
# objects, some 5x its text) near that too.
MAX_RECORDING = 16 * 1024 * 1024  # characters of its JSON text
MAX_EVENTS = 50_000  # events, or model calls


def record_limit() -> int:
    """``NB_AGENT_RECORD_LIMIT`` (bytes of one run's recording); a value that is not a number is said
    once and the default is kept (a typo must not stop every agent cell)."""
    value = os.environ.get(LIMIT_ENV, "")
    try:
        return max(0, int(value)) if value.strip() else DEFAULT_LIMIT
    except ValueError:
        if value not in _warned:
            _warned.add(value)
            print(f"nb-agent: {LIMIT_ENV} must be a number of bytes, got {value!r}; recording up to {DEFAULT_LIMIT:,}")
        return DEFAULT_LIMIT


_warned: set[str] = set()


def verifying() -> bool:
    """Inside ``%agent_verify``'s fresh kernel: agent cells only replay (``nb_agent.kernel.verify``)."""
    return inside()


@dataclass
class CellTape:
    """Record and replay for one ``%agent`` call of a cell; see the module docstring."""

    ref: CellRef | None
    prompt: str
    mode: str
    approvals: bool
    shell: Any
    limit: int = DEFAULT_LIMIT
    replay: Recording | None = None
    where: str | None = None
    problem: str | None = None  # why a strict replay could not start
    recording: Recording | None = None  # what the cell keeps after the run
    replayed: bool = False  # answered wholly from the recording
    diverged: str | None = None
    skipped: bool = False

    @property
    def strict(self) -> bool:
        return self.mode == "strict" or verifying()

    @property
    def failed(self) -> bool:
        """A strict replay that could not answer: the cell fails."""
        return self.strict and not self.skipped and (self.problem is not None or self.diverged is not None)

    # -- before the run --------------------------------------------------------------------------
    async def prepare(self, agent: str) -> list[Event]:
        """Find the cell's recording for ``agent`` ("builtin" or a protocol); events to show first.

        A run that must not start (strict without a recording; a verification's agent cell without
        one) gets its whole run here: the caller then shows these and stops.
        """
        if self.ref is None or (self.mode == "off" and not verifying()):
            return []
        found = await self.locate()
        raw = found.pick(self.ref.call) if found is not None else None
        ambiguous = found.ambiguous if found is not None else None
        if raw is None:
            if verifying():
                self.skipped = True
                message = "skipped: this agent cell has no recording (a verification replays agent cells only)"
                return [Status(state="completed", message=message), RunFinished(reason="stop")]
            if self.strict:
                self.problem = ambiguous or (
                    "no recording of this cell was found (asked: the page, the notebook file, its folder)"
                )
            elif ambiguous is not None:
                return [ErrorReported(message=f"replay: {ambiguous}; running live", code=DIVERGED)]
            return self._refused()
        try:
            text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)  # a file's is text
            if len(text) > MAX_RECORDING:
                raise ValueError(f"it is larger than {MAX_RECORDING:,} characters, the bound of a replay")
            data = json.loads(text) if isinstance(raw, str) else raw
            del text, raw
            steps = [data.get(k) for k in ("events", "calls")] if isinstance(data, dict) else []
            count = sum(len(v) for v in steps if isinstance(v, list))
            if count > MAX_EVENTS:
                raise ValueError(f"it holds {count:,} events or model calls; a replay takes at most {MAX_EVENTS:,}")
            recording = Recording.parse(data)
            del data
        except ValueError as exc:
            self.problem = f"the cell's recording cannot be read ({exc})"
            return (
                self._refused()
                if self.strict
                else [ErrorReported(message=self.problem + "; running live", code=DIVERGED)]
            )
        expected = "model" if agent == "builtin" else "events"
        if recording.kind != expected or (expected == "events" and agent not in ("auto", recording.agent)):
            self.problem = f"the cell was recorded with another agent ({recording.agent}; now {agent})"
            return (
                self._refused()
                if self.strict
                else [ErrorReported(message=self.problem + "; running live", code=DIVERGED)]
            )
        self.replay, self.where = recording, found.where if found is not None else None
        return []

    async def locate(self) -> Found | None:
        """Where this call's recording is: the cell's page or notebook file (``recordings``)."""
        assert self.ref is not None
        return await find(self.ref, self.shell)

    def recorded_answer(self, client: RunClient | None, request: ApprovalRequested) -> Decision | None:
        """The one place a replay answers an approval: the answer recorded for it, where the user opted
        in (``--replay-approvals``), and only for a call the recording itself made in this replay (not
        one of a live run after a divergence, whatever its id). The answer is the author's, for that
        call: "always" answers it once, and no gate remembers it (the reader's own calls are asked)."""
        if not self.approvals or self.replay is None or client is None:
            return None
        source = client if isinstance(client, ReplayClient) else getattr(client, "provider", None)
        if not isinstance(source, ReplayClient | TapeProvider) or not source.from_recording(request.tool_call_id):
            return None
        recorded = self.replay.approvals.get(request.tool_call_id)
        if recorded is None:
            return None
        return "deny" if recorded == "deny" else "allow_once"

    def _refused(self) -> list[Event]:
        if not self.strict:
            return []
        message = f"replay: {self.problem}. Nothing was run (--replay strict); `--replay auto` runs it live."
        return [ErrorReported(message=message, code=DIVERGED), RunFinished(reason="error")]

    def begin(self, client: RunClient) -> None:
        """Put a built-in agent's model calls on tape (replaying the recording's model answers)."""
        provider = getattr(client, "provider", None)
        if isinstance(provider, TapeProvider) and (self.limit > 0 or self.replay is not None):
            model = self.replay if self.replay is not None and self.replay.kind == "model" else None
            provider.begin(model, strict=self.strict, limit=self.limit)

    # -- after the run ---------------------------------------------------------------------------
    def finish(self, client: RunClient | None, events: list[Event], answers: dict[str, Any]) -> None:
        """Decide what the cell keeps: the recording it had (a replay that went nowhere live), or the new run."""
        if isinstance(client, ReplayClient):
            self.diverged = client.diverged
            if client.live is None:
                self.recording, self.replayed = self.replay, client.diverged is None
                return
            self._record_events(client.live.protocol, events, answers)
            return
        provider = getattr(client, "provider", None)
        tape = provider.end() if isinstance(provider, TapeProvider) else None
        if tape is not None:
            self.diverged = tape.diverged
            if tape.replay is not None and not tape.live:  # nothing ran live: the recording still stands
                self.recording, self.replayed = tape.replay, tape.diverged is None
                return
            live = provider.chosen() if isinstance(provider, TapeProvider) else None
            if self.limit > 0 and live is not None and (tape.calls or tape.cut is not None):
                self.recording = Recording(
                    kind="model",
                    agent="builtin",
                    model=live.model,
                    label=provider.label if isinstance(provider, TapeProvider) else None,
                    context_limit=live.context_limit,
                    context_source=live.context_source,
                    native_tools=live.native_tools,
                    context=tape.context,
                    calls=tape.calls,
                    cut=tape.cut,
                    limit=self.limit if tape.cut is not None else None,
                    **self._common(events, answers),
                )
            return
        if client is not None and self.limit > 0 and self.ref is not None and not self.skipped:
            self._record_events(client.protocol, events, answers)

    def _common(self, events: list[Event], answers: dict[str, Any]) -> dict[str, Any]:
        started = next((e for e in events if isinstance(e, RunStarted)), None)
        return {
            "prompt": first_line(self.prompt),
            "prompt_hash": prompt_hash(self.prompt),
            "run_id": started.run_id if started is not None else None,
            "time": now(),
            "approvals": {k: v for k, v in answers.items() if v in DECISIONS},
        }

    def _record_events(self, agent: str, events: list[Event], answers: dict[str, Any]) -> None:
        if self.limit <= 0 or self.ref is None:
            return
        kept = [  # as the transcript keeps them, without empty fields
            e.model_dump(mode="json", exclude_none=True)
            for e in events
            if not (isinstance(e, ErrorReported) and e.code == DIVERGED)
        ]
        raws: list[dict[str, Any]] = []
        size, cut = 0, None
        for raw in compact(kept):
            size += len(json.dumps(raw, ensure_ascii=False)) + 1
            if size > self.limit:
                cut = len(raws)
                break
            raws.append(raw)
        common = self._common(events, answers)
        self.recording = Recording(
            kind="events", agent=agent, events=raws, cut=cut, limit=self.limit if cut is not None else None, **common
        )

    # -- what the cell shows ---------------------------------------------------------------------
    def summary(self) -> str | None:
        """One line for the cell's recording output (``None``: the cell keeps nothing)."""
        rec = self.recording
        if rec is None:
            return None
        what = f"{len(rec.calls)} model calls" if rec.kind == "model" else f"{len(rec.events)} events"
        if self.replayed:
            nobody = "no model was called" if rec.kind == "model" else "no agent was contacted"
            source = f", from {self.where}" if self.where else ""
            return f"[nb-agent: replayed the run recorded {rec.recorded_at()} ({what}{source}): {nobody}]"
        if rec is self.replay:
            return (
                f"[nb-agent: not replayed (see the error above); the cell keeps its recording of {rec.recorded_at()}]"
            )
        line = f"[nb-agent: recorded for replay: {what}, {rec.size() / 1000:.1f} kB"
        if self.diverged:
            line += "; the replay diverged (see above) and the run went on live"
        if rec.cut is not None:
            line += f"; cut at the size bound ({rec.limit or 0:,} bytes) after {rec.cut}: a replay stops there"
        return line + "]"

    def metadata(self) -> dict[str, Any]:
        """The output metadata that carries the recording."""
        if self.recording is None:
            return {}
        return {KEY: {"recording": self.recording.dump(), "replayed": self.replayed}}


def cell_tape(shell: Any, prompt: str, config: Any, interactive: bool) -> CellTape:
    """The tape of a ``%agent`` call made now, in the cell that is running (no cell: records nothing)."""
    from nb_agent.conversation.recordings import cell_ref

    return CellTape(
        cell_ref(shell, interactive),
        prompt,
        config.replay,
        config.replay_approvals,
        shell,
        limit=record_limit(),
    )


def publish(tape: CellTape) -> None:
    """The cell's recording as an output of its own: one line for people, the recording in its metadata."""
    line = tape.summary()
    if line is None:
        return
    from IPython.display import display

    display({"text/plain": line}, raw=True, metadata=tape.metadata())  # type: ignore[no-untyped-call]


def check(tape: CellTape) -> None:
    """A strict replay that could not answer fails its cell (nbconvert --execute, nbval and Run All stop there)."""
    if tape.failed:
        from IPython.core.error import UsageError as CellError

        reason = tape.problem or tape.diverged or "the replay failed"
        raise CellError(f"nb-agent replay (strict): {reason}")
