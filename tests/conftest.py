"""Shared test plumbing: anyio on asyncio, and collecting a run's events."""

from __future__ import annotations

from typing import Any

import hypothesis  # noqa: F401 - imported early: its lazy import at session end trips a CPython 3.11 ast bug
import pytest

from nb_agent.events import Event


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def collect(client: Any, prompt: str) -> list[Event]:
    """All events of one run, in order."""
    return [ev async for ev in client.stream(prompt)]


def text_of(events: list[Event]) -> str:
    return "".join(getattr(e, "delta", "") for e in events if e.type == "text_delta")


def types_of(events: list[Event]) -> list[str]:
    return [e.type for e in events]
