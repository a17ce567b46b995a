"""A real fasta2a server (pydantic's A2A server) over a pydantic-ai ``FunctionModel``.

fasta2a streams the answer as appended chunks of one artifact, then sends the whole artifact
again under the same ``artifactId`` with ``append: false, lastChunk: true``. In A2A,
``append: false`` replaces the artifact: the answer must be shown once, not twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from fasta2a.pydantic_ai import agent_to_a2a
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from nb_agent.conversation.controller import AgentResult
from nb_agent.events import TextDelta, TextReplaced
from nb_agent.protocols.a2a import A2AClient
from tests.conftest import collect, run_cli, text_of
from tests.servers.serve import free_port, serve

pytestmark = pytest.mark.anyio

ANSWER = "The answer is 42."
WORDS = ["The", " answer", " is", " 42."]


def _reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(ANSWER)])


async def _stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    for word in WORDS:
        yield word


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    port = free_port()
    agent = Agent(FunctionModel(_reply, stream_function=_stream), name="answerer")
    app = agent_to_a2a(agent, name="answerer", url=f"http://127.0.0.1:{port}")
    with serve(app, port=port) as base:
        yield base


async def test_the_answer_is_shown_once(url: str) -> None:
    async with A2AClient(url) as client:
        events = await collect(client, "what is the answer?")
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "stop"
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert text_of(events) == ANSWER
    assert len({e.message_id for e in deltas}) == 1  # one message, not the answer and a copy
    assert not [e for e in events if isinstance(e, TextReplaced)]  # the last chunk only confirms it
    result = AgentResult("q")
    result.events.extend(events)
    assert result.text == ANSWER


def test_the_cli_prints_the_answer_once(url: str) -> None:
    proc = run_cli(url, "what is the answer?", "--protocol", "a2a")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("42") == 1, proc.stdout
    assert ANSWER in proc.stdout
