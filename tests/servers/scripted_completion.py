"""A scripted model for inline completions: it completes only when the request carries what the
kernel holds.

``CompletionModel(needs=("'region' str", "'revenue' float64"), answer='groupby("region")...')``
answers every chat request (``POST /v1/chat/completions``, ``POST /v1/messages``, rendered by the
scripted family, byte-faithful) with ``answer`` when the request's text has every string of
``needs``, and with nothing otherwise: a test that sees the answer as ghost text knows the kernel's
columns reached the model. A cursor's line that already ends with the start of ``answer`` (a word of it
accepted) gets the rest. Each request is kept (``requests``, ``texts``), so a test can also check
what never reached it (a secret). ``delay`` spaces the answer's chunks (a slow model, for cancel).
It has no ``/v1/completions`` and no ``/infill``: like api.openai.com, a chat API only (the
completion backend finds that out by the 404s).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from nb_agent.completion.prompt import CURSOR
from tests.servers.scripted_llm import ScriptedModel, Turn
from tests.servers.scripted_turns import Json


class CompletionModel(ScriptedModel):
    def __init__(
        self, needs: Iterable[str], answer: str, *, delay: float = 0.0, chunk_size: int = 4, **kwargs: Any
    ) -> None:
        super().__init__([], **kwargs)
        self.needs = tuple(needs)
        self.answer = answer
        self.delay = delay
        self.chunk_size = chunk_size
        self.texts: list[str] = []  # each request's whole text, as the model read it
        self.answered: list[bool] = []  # whether each request carried everything it needs

    def _turn_for(self, body: Json, api: str) -> Turn | None:
        text = "\n".join(_text(m.get("content")) for m in body.get("messages") or []) + _text(body.get("system"))
        self.texts.append(text)
        carried = all(need in text for need in self.needs)
        self.answered.append(carried)
        return Turn(text=self._rest(text) if carried else "", delay=self.delay, chunk_size=self.chunk_size)

    def _rest(self, text: str) -> str:
        """The answer, less what the cursor's line already ends with (a word of it accepted)."""
        before = text.rsplit(CURSOR, 1)[0] if CURSOR in text else ""  # the last mark: the cell's
        line = before.rsplit("\n", 1)[-1]
        for k in range(len(self.answer), 0, -1):
            if line.endswith(self.answer[:k]):
                return self.answer[k:]
        return self.answer


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(c.get("text") if isinstance(c, dict) else c) for c in content)
    return "" if content is None else json.dumps(content)
