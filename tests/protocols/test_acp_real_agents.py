"""Claude Code, Codex and Gemini CLI, the real agents from npm, through ``ACPClient``, offline.

Each runs against the keyword model (``tests/servers/scripted_keyword.py``): its answer streams, a
command asks with the agent's own permission options, allow and deny reach it, cancel ends a turn
and the next one works, usage and cost are kept where the agent reports them, and closing leaves no
process of the agent behind. Setup and versions: ``tests/real_agents.py``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nb_agent.events import ApprovalRequested, Decision, Event, RunFinished, ToolResult
from nb_agent.protocols.acp import ACPClient
from tests.conftest import text_of
from tests.real_agents import make_agent, processes_with
from tests.servers.scripted_keyword import KeywordModel

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("clean_env")]

AGENTS = ["claude", "codex", "gemini"]
Model = tuple[KeywordModel, str]


async def turn(
    client: ACPClient, prompt: str, decide: Callable[[ApprovalRequested], Decision] | Decision = "allow_once"
) -> list[Event]:
    events: list[Event] = []
    async for ev in client.stream(prompt):
        events.append(ev)
        if isinstance(ev, ApprovalRequested):
            await client.approve(ev.tool_call_id, decide(ev) if callable(decide) else decide)
    return events


def finished(events: list[Event]) -> RunFinished:
    last = events[-1]
    assert isinstance(last, RunFinished), events[-3:]
    return last


def client_for(name: str, tmp_path: Path, keyword_model: Model, **kw: Any) -> tuple[ACPClient, Any]:
    agent = make_agent(name, tmp_path, keyword_model[1], **kw)
    return ACPClient(agent.argv, cwd=str(agent.project), env=agent.env, start_timeout=120), agent


@pytest.mark.parametrize("name", AGENTS)
async def test_the_answer_streams_with_the_usage_the_agent_reports(
    name: str, tmp_path: Path, keyword_model: Model
) -> None:
    client, _ = client_for(name, tmp_path, keyword_model)
    async with client:
        events = await turn(client, f"say hello to {name} #stream")
    assert text_of(events) == f"Scripted answer: say hello to {name} #stream"
    assert [e.type for e in events].count("text_delta") > 1  # streamed, not one block
    usage = finished(events).usage
    assert finished(events).reason == "stop"
    assert usage is not None
    if name == "claude":  # tokens and a cost, every turn
        assert usage.input_tokens is not None
        assert usage.input_tokens >= 1200
        assert usage.cost is not None
        assert usage.cost > 0
        assert usage.currency == "USD"
    elif name == "gemini":  # tokens only in PromptResponse._meta.quota.token_count
        assert (usage.input_tokens, usage.cost) == (1200, None)
        assert usage.output_tokens is not None
    else:  # context use only
        assert usage.input_tokens is None
        assert usage.context_used is not None
        assert usage.context_max is not None
    assert keyword_model[0].about(f"say hello to {name} #stream")


@pytest.mark.parametrize("name", AGENTS)
@pytest.mark.parametrize("decision", ["allow_once", "deny"])
async def test_a_command_asks_with_the_agents_options_and_the_answer_reaches_it(
    name: str, decision: Decision, tmp_path: Path, keyword_model: Model
) -> None:
    marker = f"#shell-{name}-{decision}"
    client, agent = client_for(name, tmp_path, keyword_model)
    async with client:
        events = await turn(client, f"use the shell: echo acp-real-42 | tee shell-out.txt {marker}", decision)
    ask = next(e for e in events if isinstance(e, ApprovalRequested))
    assert "echo acp-real-42 | tee shell-out.txt" in str(ask.arguments) + (ask.prompt or "")
    kinds = {o.kind for o in ask.options}
    assert {"allow_once", "reject_once"} <= kinds  # the agent's own options, shown as they are
    ran = (agent.project / "shell-out.txt").exists()
    assert ran is (decision == "allow_once")
    told = keyword_model[0].about(marker)[-1]["results"]
    if name == "codex" and not ran:  # Codex's only reject option is "abort": it ends the turn, the model is not asked
        assert told == []
        assert finished(events).reason == "cancel", events[-4:]
        return
    assert told, "the agent told the model nothing"
    assert ("acp-real-42" in told[-1]) is ran
    result = next((e for e in events if isinstance(e, ToolResult) and e.tool_call_id == ask.tool_call_id), None)
    assert result is not None or not ran  # after a reject Gemini sends no final status for the call
    assert result is None or result.is_error is not ran
    assert finished(events).reason == "stop"


@pytest.mark.parametrize("name", AGENTS)
async def test_cancel_ends_the_turn_and_the_conversation_goes_on(
    name: str, tmp_path: Path, keyword_model: Model
) -> None:
    client, _ = client_for(name, tmp_path, keyword_model)
    async with client:
        events: list[Event] = []
        async for ev in client.stream("take your time #cancel"):
            events.append(ev)
            if ev.type == "text_delta":
                started = time.monotonic()
                await client.cancel()
        took = time.monotonic() - started
        after = await turn(client, f"and now {name} #after-cancel")
    assert finished(events).reason == "cancel"
    assert took < 5
    assert len(text_of(events)) < 1000  # the slow answer did not run to its end
    assert text_of(after).startswith("Scripted answer: ")  # (Claude Code tells its model it was interrupted)
    assert text_of(after).endswith(f"and now {name} #after-cancel")


@pytest.mark.parametrize("name", AGENTS)
async def test_closing_ends_every_process_of_the_agent_quickly(name: str, tmp_path: Path, keyword_model: Model) -> None:
    client, agent = client_for(name, tmp_path, keyword_model)
    await client.__aenter__()
    await turn(client, "hello #close")
    assert processes_with(str(agent.home)), "the agent should be running before the close"
    started = time.monotonic()
    await client.aclose()
    took = time.monotonic() - started
    await asyncio.sleep(0.1)
    assert processes_with(str(agent.home)) == []
    assert took < 1.0, f"closing took {took:.2f} s"


def test_an_exiting_python_ends_the_agents_it_left_open(tmp_path: Path, keyword_model: Model) -> None:
    """A kernel shut down (or a script) with a conversation still open: Codex ignores its stdin's end,
    and it is no longer in the kernel's process group, so nb-agent ends its group at exit."""
    agent = make_agent("codex", tmp_path, keyword_model[1])
    script = (
        "import asyncio, sys\n"
        "from nb_agent.protocols.acp import ACPClient\n"
        "async def main():\n"
        f"    client = ACPClient({agent.argv!r}, cwd={str(agent.project)!r}, env={agent.env!r})\n"
        "    async for ev in client.stream('hello #left-open'):\n"
        "        pass\n"
        "    print('ran', flush=True)\n"
        "asyncio.run(main())\n"  # no aclose(): the process just ends
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.strip() == "ran", done.stderr
    assert processes_with(str(agent.home)) == []
    assert "Exception ignored" not in done.stderr
