"""What ACP v1 added since the client was written, with the real agents (offline, on the keyword model):
their past sessions listed and one continued with its earlier turns, a question (Claude Code's
AskUserQuestion, an ACP elicitation form) answered, and declined where nobody can answer, the
tool's own name on its card, a picture sent as an image, and a slash command run from a prompt.

Each test asks what the agent declares and checks what it does; an agent that lacks a feature
(Gemini CLI lists no sessions) is checked to be told so clearly. Setup: ``tests/real_agents.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nb_agent.errors import AgentError
from nb_agent.event_questions import ElicitationAnswered, ElicitationRequested
from nb_agent.events import ApprovalRequested, Event, ToolCall, UserMessage
from nb_agent.pictures import attaching, picture
from nb_agent.protocols.acp import ACPClient
from tests.conftest import text_of
from tests.protocols.test_acp_real_agents import Model
from tests.protocols.test_acp_ts_agent import PNG
from tests.real_agents import Agent, make_agent

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("clean_env")]


def client_for(agent: Agent) -> ACPClient:
    return ACPClient(agent.argv, cwd=str(agent.project), env=agent.env, start_timeout=120)


async def turn(client: ACPClient, prompt: str, on: Any = None) -> list[Event]:
    events: list[Event] = []
    async for ev in client.stream(prompt):
        events.append(ev)
        if isinstance(ev, ApprovalRequested):
            await client.approve(ev.tool_call_id, "allow_once")
        if on is not None:
            await on(client, ev)
    return events


@pytest.mark.parametrize("name", ["claude", "codex", "opencode"])
async def test_past_sessions_are_listed_and_one_continues_with_its_earlier_turns(
    name: str, tmp_path: Path, keyword_model: Model
) -> None:
    agent = make_agent(name, tmp_path, keyword_model[1])
    async with client_for(agent) as client:
        await turn(client, f"remember the word tangerine #hist-{name}")
        first = client.session_id
    async with client_for(agent) as client:  # a new process, as after a kernel restart
        past = await client.past_sessions()
        earlier = await client.reopen(str(first))
        after = await turn(client, f"what was the word #hist2-{name}")
    assert first in [p.session_id for p in past]
    assert all(p.cwd == str(agent.project) for p in past)
    users = [e.text for e in earlier if isinstance(e, UserMessage)]
    assert any(f"tangerine #hist-{name}" in u for u in users), earlier  # session/load replayed the turn
    assert f"tangerine #hist-{name}" in text_of(earlier)  # and the agent's answer to it
    assert text_of(after).endswith(f"what was the word #hist2-{name}")
    assert client.session_id == first


async def test_gemini_lists_no_sessions_and_says_so(tmp_path: Path, keyword_model: Model) -> None:
    agent = make_agent("gemini", tmp_path, keyword_model[1])
    async with client_for(agent) as client:
        with pytest.raises(AgentError) as caught:
            await client.past_sessions()
    assert caught.value.code == "cannot_list"
    assert "does not list its sessions" in str(caught.value)


async def test_claude_codes_question_is_a_form_and_the_answer_reaches_its_model(
    tmp_path: Path, keyword_model: Model
) -> None:
    agent = make_agent("claude", tmp_path, keyword_model[1])

    async def on(client: ACPClient, ev: Event) -> None:
        if isinstance(ev, ElicitationRequested):
            await client.answer_question(ev.elicitation_id, "accept", {ev.fields[0].name: "blue"})

    async with client_for(agent) as client:
        events = await turn(client, "#ask ask me: Which colour? red / blue", on)
    (asked,) = [e for e in events if isinstance(e, ElicitationRequested)]
    assert asked.message == "Which colour?"
    assert [c.value for c in asked.fields[0].choices] == ["red", "blue"]
    assert any(isinstance(e, ElicitationAnswered) and e.action == "accept" for e in events)
    told = keyword_model[0].about("#ask")[-1]["results"]
    assert '"Which colour?"="blue"' in told[-1]


def test_claude_codes_question_is_declined_where_nobody_can_answer(tmp_path: Path, keyword_model: Model) -> None:
    """``nb-agent stream`` without a terminal: the question is declined at once, and the output says so."""
    agent = make_agent("claude", tmp_path, keyword_model[1])
    done = subprocess.run(
        [sys.executable, "-m", "nb_agent.cli", "stream", "--agent", agent.command,
         "#headless ask me: Which colour? red / blue"],
        capture_output=True, text=True, timeout=180, env={**os.environ, **agent.env}, cwd=agent.project,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert "? Claude Agent asks: Which colour?" in done.stdout, done.stdout + done.stderr
    assert "→ declined (no one is there to answer it here)" in done.stdout
    told = keyword_model[0].about("#headless")[-1]["results"]
    assert told, "the model heard nothing back"
    assert "blue" not in told[-1]


async def test_claude_codes_tool_names_its_call(tmp_path: Path, keyword_model: Model) -> None:
    agent = make_agent("claude", tmp_path, keyword_model[1])
    async with client_for(agent) as client:
        events = await turn(client, "use the shell: echo named-call #name")
    (call,) = [e for e in events if isinstance(e, ToolCall)]
    assert call.name == "Bash"  # ACP's tool-call name, not the title
    assert call.title == "echo named-call #name"


@pytest.mark.parametrize("name", ["claude", "codex", "gemini", "opencode"])
async def test_a_picture_attached_to_the_prompt_reaches_the_model_as_an_image(
    name: str, tmp_path: Path, keyword_model: Model
) -> None:
    agent = make_agent(name, tmp_path, keyword_model[1])
    async with client_for(agent) as client:
        assert client.agent_info == {}  # not started: what it takes is read at its start
        with attaching([picture("image/png", PNG)]):
            await turn(client, f"what is in this picture #img-{name}")
    seen = [e["images"] for e in keyword_model[0].exchanges if f"#img-{name}" in e["prompt"] or e["images"]]
    assert any("image/png" in images for images in seen), seen


@pytest.mark.parametrize(("name", "command", "said"), [("gemini", "/memory show", "Memory is currently empty")])
async def test_a_slash_command_in_the_prompt_runs_the_agents_command(
    name: str, command: str, said: str, tmp_path: Path, keyword_model: Model
) -> None:
    agent = make_agent(name, tmp_path, keyword_model[1])
    async with client_for(agent) as client:
        await turn(client, "hello #cmds")
        names = [c.name for c in client.session_state.commands.commands] if client.session_state.commands else []
        events = await turn(client, command)
    assert command.split()[0][1:] in " ".join(names)
    assert said in text_of(events)
