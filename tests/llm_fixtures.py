"""Fixtures for tests against the scripted model: one uvicorn per module, a fresh script per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from starlette.types import Receive, Scope, Send

from tests.servers.scripted_llm import ScriptedModel, Turn
from tests.servers.serve import serve


class Slot:
    """One uvicorn for the module; each test plugs in its own ScriptedModel (a server start costs ~0.3 s)."""

    def __init__(self) -> None:
        self.model: ScriptedModel | None = None
        self.url = ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        assert self.model is not None, "no ScriptedModel plugged in"
        await self.model.app(scope, receive, send)


Running = Callable[..., AbstractContextManager[tuple[ScriptedModel, str]]]


@pytest.fixture(scope="module")
def slot() -> Iterator[Slot]:
    s = Slot()
    with serve(s) as url:
        s.url = url
        yield s


@pytest.fixture
def running(slot: Slot) -> Running:
    @contextmanager
    def start(*turns: Turn, **kw: Any) -> Iterator[tuple[ScriptedModel, str]]:
        model = slot.model = ScriptedModel(turns, **kw)
        try:
            yield model, slot.url
        finally:
            model.release()  # a test that failed mid-hang must not keep the server from stopping

    return start
