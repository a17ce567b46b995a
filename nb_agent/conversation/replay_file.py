"""Record and replay for ``nb-agent stream --recording FILE``: a file holds the run, as a cell's output does.

The terminal has no cell, so the run's recording goes to the file the user names, in the very form a
notebook cell's output carries it (``{"nb_agent": {"recording": ..., "replayed": ...}}``,
``conversation.recordings``), and ``--replay`` means what it means for ``%agent`` (``conversation.replay``):

- ``auto`` (the default): a file with a recording of this prompt is replayed, with no agent
  contacted; a changed prompt, or no file yet, runs live and (re)writes the file.
- ``strict``: replay only; no recording, or a divergence, ends the run with an error and exit status 1.
- ``off``: always live, the file rewritten.

A file that cannot be read as a recording is refused with the reason (larger than the notebook bound,
not JSON, not a recording), never half-read; it is written whole or not at all (a temporary file
renamed over it).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nb_agent.connect.config import AgentConfig
from nb_agent.conversation.recordings import KEY, CellRef, Found
from nb_agent.conversation.replay import MAX_RECORDING, CellTape, record_limit
from nb_agent.conversation.replay_client import DIVERGED
from nb_agent.events import ErrorReported, Event


@dataclass
class FileTape(CellTape):
    """The tape of one ``nb-agent stream`` run whose recording lives in ``path``."""

    path: Path = field(default_factory=Path)
    _found: Any = field(default=None, init=False, repr=False)  # the recording the file holds, read at prepare

    async def prepare(self, agent: str) -> list[Event]:
        if self.mode == "off":
            return []
        try:
            self._found = self._read()
        except (OSError, ValueError) as exc:  # said in the file's words, not a cell's
            self.problem = f"the recording in {self.path} cannot be read ({exc})"
            live: list[Event] = [ErrorReported(message=self.problem + "; running live", code=DIVERGED)]
            return self._refused() if self.strict else live
        if self._found is None:
            if self.strict:
                self.problem = f"there is no recording at {self.path}"
            return self._refused()
        return await super().prepare(agent)

    def _read(self) -> Any:
        """The recording in the file (None: no file, or none in it); a file that is not one raises."""
        if not self.path.exists():
            return None
        if self.path.stat().st_size > MAX_RECORDING:
            raise ValueError(f"it is larger than {MAX_RECORDING:,} bytes")
        data = json.loads(self.path.read_bytes())
        ours = data.get(KEY) if isinstance(data, dict) else None
        if not isinstance(ours, dict) or "recording" not in ours:
            raise ValueError(f"it holds no {KEY!r} recording")
        return ours["recording"]

    async def locate(self) -> Found | None:
        return Found([self._found], str(self.path)) if self._found is not None else None

    def summary(self) -> str | None:
        line = super().summary()  # in the file's words where a cell's are
        return line.replace("the cell keeps its recording", f"{self.path.name} keeps its recording") if line else None

    def save(self) -> bool:
        """Write the run's new recording (nothing when the file's own was replayed); True if written."""
        if self.recording is None or self.recording is self.replay:
            return False
        text = json.dumps(self.metadata(), ensure_ascii=False, indent=1)
        handle, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.resolve().parent)
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text + "\n")
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return True


def file_tape(path: str, prompt: str, config: AgentConfig) -> FileTape:
    """The tape of ``nb-agent stream``'s run, kept in ``path`` (``--recording``), replayed as ``config.replay`` says."""
    ref = CellRef(cell_id=None, code=prompt, call=0, occurrence=1, interactive=False)
    return FileTape(ref, prompt, config.replay, config.replay_approvals, None, limit=record_limit(), path=Path(path))


__all__ = ["FileTape", "file_tape"]
