"""A scripted model whose next turn may depend on the conversation so far (scripted_llm's server).

The workspace tests need a turn that names a cell the agent itself inserted: its id is only known
from the tool's result. A step is a :class:`Turn`, or a function from the request's messages to one.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from tests.servers.scripted_llm import ScriptedModel, Turn

Step = Turn | Callable[[list[dict[str, Any]]], Turn]


class ReactiveModel(ScriptedModel):
    def __init__(self, steps: Iterable[Step], **kwargs: Any) -> None:
        super().__init__([], **kwargs)
        self._steps: deque[Step] = deque(steps)

    def _next_turn(self) -> Turn | None:
        with self._lock:
            step = self._steps.popleft() if self._steps else None
        if step is None or isinstance(step, Turn):
            return step
        last = self.requests[-1] if self.requests else {}
        return step(list(last.get("messages") or []))

    @property
    def remaining(self) -> int:
        return len(self._steps)


def tool_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The text of each tool result in ``messages``, in order."""
    out = []
    for m in messages:
        if m.get("role") != "tool":
            continue
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        out.append(str(content or ""))
    return out


def args(**kw: Any) -> str:
    return json.dumps(kw)
