"""nb-agent's ACP client against an agent on the official TypeScript SDK (``tests/servers/acp_ts_agent.mjs``),
for what the real agents do not do: a URL question, ``$/cancel_request`` both ways, ``additionalDirectories``,
``session/close``, images in a prompt, and a form question answered, declined and refused when it does not fit.

The SDK is installed by ``.ci/run`` into ``tests/.acp-ts`` (as for ``test_acp_serve_clients``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nb_agent.errors import UsageError
from nb_agent.event_questions import ElicitationAnswered, ElicitationRequested
from nb_agent.events import ApprovalRequested, Event, RunFinished, ToolUpdated
from nb_agent.pictures import attaching, picture
from nb_agent.protocols.acp import ACPClient
from tests.conftest import text_of

pytestmark = pytest.mark.anyio

TS_PREFIX = Path(__file__).parents[1] / ".acp-ts"
AGENT = Path(__file__).parents[1] / "servers" / "acp_ts_agent.mjs"
PNG = (  # a 3x2 PNG, as a plot's output is
    "iVBORw0KGgoAAAANSUhEUgAAAAMAAAACCAIAAAASFvFNAAAAEElEQVR4nGP4z8DAwMDAAAAe+AH/LSpJSQAAAABJRU5ErkJggg=="
)


@pytest.fixture
def ts_agent(tmp_path: Path) -> tuple[list[str], Path]:
    if not (TS_PREFIX / "node_modules" / "@agentclientprotocol" / "sdk").is_dir() or shutil.which("node") is None:
        if os.environ.get("CI"):
            pytest.fail("CI installs the TypeScript ACP SDK into tests/.acp-ts", pytrace=False)
        pytest.skip("the TypeScript ACP SDK: npm install --prefix tests/.acp-ts @agentclientprotocol/sdk")
    log = tmp_path / "agent.log"
    return ["node", str(AGENT), str(TS_PREFIX), str(log)], log


def logged(log: Path, what: str) -> list[Any]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [e["data"] for e in map(json.loads, lines) if e["what"] == what]


Answer = Callable[[ACPClient, Event], Any]


async def turn(client: ACPClient, prompt: str, on: Answer | None = None) -> list[Event]:
    events: list[Event] = []
    async for ev in client.stream(prompt):
        events.append(ev)
        if on is not None:
            await on(client, ev)
    return events


def answering(action: str, content: dict[str, Any] | None = None) -> Answer:
    async def on(client: ACPClient, ev: Event) -> None:
        if isinstance(ev, ElicitationRequested):
            await client.answer_question(ev.elicitation_id, action, content)  # type: ignore[arg-type]

    return on


async def test_a_form_question_is_shown_with_its_fields_and_the_answer_reaches_the_agent(
    ts_agent: tuple[list[str], Path], tmp_path: Path
) -> None:
    argv, _ = ts_agent
    async with ACPClient(argv, cwd=str(tmp_path)) as client:
        accepted = await turn(client, "ask me", answering("accept", {"colour": "blue", "count": 3, "note": "soon"}))
        declined = await turn(client, "ask me again", answering("decline"))
        cancelled = await turn(client, "ask me once more", answering("cancel"))
    (asked,) = [e for e in accepted if isinstance(e, ElicitationRequested)]
    assert asked.message == "Which colour, and how many?"
    assert asked.source == "TS agent"
    assert [(f.name, f.kind, f.required) for f in asked.fields] == [
        ("colour", "choice", True), ("count", "integer", False), ("urgent", "boolean", False),
        ("note", "string", False),
    ]  # fmt: skip
    assert [c.value for c in asked.fields[0].choices] == ["red", "blue"]
    assert asked.fields[1].default == 2
    assert text_of(accepted) == 'you said: accept {"colour":"blue","count":3,"note":"soon"}'
    (shown,) = [e for e in accepted if isinstance(e, ElicitationAnswered)]
    assert (shown.action, shown.content) == ("accept", {"colour": "blue", "count": 3, "note": "soon"})
    assert text_of(declined) == "you said: decline null"
    assert text_of(cancelled) == "you said: cancel null"


async def test_an_answer_that_does_not_fit_the_form_is_refused_and_the_question_still_waits(
    ts_agent: tuple[list[str], Path], tmp_path: Path
) -> None:
    argv, _ = ts_agent
    refused: list[str] = []

    async def on(client: ACPClient, ev: Event) -> None:
        if isinstance(ev, ElicitationRequested):
            for bad in (
                {"count": 2},
                {"colour": "green"},
                {"colour": "red", "count": 9},
                {"colour": "red", "note": "x" * 41},
            ):
                with pytest.raises(UsageError) as caught:
                    await client.answer_question(ev.elicitation_id, "accept", bad)
                refused.append(str(caught.value))
            await client.answer_question(ev.elicitation_id, "accept", {"colour": "red"})

    async with ACPClient(argv, cwd=str(tmp_path)) as client:
        events = await turn(client, "ask me", on)
    assert "Colour is required" in refused[0]
    assert "one of the offered choices" in refused[1]
    assert "between 1.0 and 5.0" in refused[2]
    assert "0 to 40 characters" in refused[3]
    assert text_of(events) == 'you said: accept {"colour":"red"}'


async def test_a_url_question_offers_the_link_and_its_host_and_accept_sends_no_content(
    ts_agent: tuple[list[str], Path], tmp_path: Path
) -> None:
    argv, _ = ts_agent
    async with ACPClient(argv, cwd=str(tmp_path)) as client:
        events = await turn(client, "open a link", answering("accept", {"ignored": True}))
    (asked,) = [e for e in events if isinstance(e, ElicitationRequested)]
    assert (asked.mode, asked.url, asked.host) == ("url", "https://example.org/connect?state=xyz", "example.org")
    assert asked.elicitation_id == "link-1"
    assert text_of(events) == "link: accept"


async def test_the_agents_cancel_request_withdraws_its_permission_request_and_its_question(
    ts_agent: tuple[list[str], Path], tmp_path: Path
) -> None:
    """ACP's ``$/cancel_request`` from the agent: both are answered as cancelled (a valid response) and
    their cards close; nobody answered them."""
    argv, _ = ts_agent
    async with ACPClient(argv, cwd=str(tmp_path)) as client:
        events = await turn(client, "withdraw")
    assert text_of(events) == "withdrawn: cancelled / cancel"
    assert any(isinstance(e, ApprovalRequested) and e.tool_call_id == "perm-1" for e in events)
    assert any(isinstance(e, ToolUpdated) and e.tool_call_id == "perm-1" and e.status == "incomplete" for e in events)
    (gone,) = [e for e in events if isinstance(e, ElicitationAnswered)]
    assert (gone.action, gone.note) == ("cancel", "the agent withdrew the question")


async def test_a_prompt_the_agent_keeps_after_session_cancel_is_given_up_with_cancel_request(
    ts_agent: tuple[list[str], Path], tmp_path: Path
) -> None:
    argv, log = ts_agent
    async with ACPClient(argv, cwd=str(tmp_path)) as client:
        events: list[Event] = []
        async for ev in client.stream("stubborn"):
            events.append(ev)
            if ev.type == "text_delta":
                started = time.monotonic()
                await client.cancel()
        took = time.monotonic() - started
    assert isinstance(events[-1], RunFinished)
    assert events[-1].reason == "cancel"
    assert logged(log, "session/cancel")  # asked first, as ACP says
    assert logged(log, "prompt_aborted") == [
        {"sessionId": logged(log, "session/new")[0] and "ts-1", "by": "$/cancel_request"}
    ]
    assert took < 10


async def test_sessions_are_listed_and_one_reopened_with_its_earlier_turns_the_current_one_closed(
    ts_agent: tuple[list[str], Path], tmp_path: Path
) -> None:
    argv, log = ts_agent
    async with ACPClient(argv, cwd=str(tmp_path)) as client:
        await turn(client, "first conversation")
        first = client.session_id
        client._process.session_id = None  # a second session in the same agent, as a --new would make
        await turn(client, "second conversation")
        second = client.session_id
        past = await client.past_sessions()
        earlier = await client.reopen(str(first))
        after = await turn(client, "back in the first")
    assert [p.session_id for p in past] == [second, first]  # newest first
    assert past[1].title == "first conversation"
    assert past[1].first_prompt == "first conversation"  # the agent's _meta
    assert [(e.type, getattr(e, "text", getattr(e, "delta", ""))) for e in earlier] == [
        ("user_message", "first conversation"), ("text_delta", "TS agent: first conversation"),
    ]  # fmt: skip
    assert logged(log, "session/list")[0]["cwd"] == str(tmp_path)
    assert logged(log, "session/close")[0] == {"sessionId": second}
    assert text_of(after) == "TS agent: back in the first"
    assert logged(log, "session/close")[-1] == {"sessionId": first}  # closing the conversation closes its session


async def test_extra_folders_go_as_additional_directories_and_pictures_as_images(
    ts_agent: tuple[list[str], Path], tmp_path: Path
) -> None:
    argv, log = ts_agent
    extra = tmp_path / "data"
    extra.mkdir()
    async with ACPClient(argv, cwd=str(tmp_path), directories=[str(extra)]) as client:
        with attaching([picture("image/png", PNG)]):
            events = await turn(client, "look at this")
    assert logged(log, "session/new")[0]["additionalDirectories"] == [str(extra)]
    assert text_of(events) == "images: 1 image/png"


async def test_closing_mid_question_leaves_nothing_waiting(ts_agent: tuple[list[str], Path], tmp_path: Path) -> None:
    argv, _ = ts_agent
    client = ACPClient(argv, cwd=str(tmp_path))
    async for ev in client.stream("ask me"):
        if isinstance(ev, ElicitationRequested):
            await asyncio.wait_for(client.cancel(), 10)
    await client.aclose()
    with pytest.raises(UsageError):
        await client.answer_question("acp-gone", "decline")


def test_a_python_that_exits_with_the_conversation_open_closes_its_session(
    ts_agent: tuple[list[str], Path], tmp_path: Path
) -> None:
    """A kernel shut down with a conversation still open: its session gets session/close before the
    agent's process group is ended (``lifecycle._close_at_exit``)."""
    import subprocess
    import sys

    argv, log = ts_agent
    script = (
        "import asyncio\n"
        "from nb_agent.protocols.acp import ACPClient\n"
        "async def main():\n"
        f"    client = ACPClient({argv!r}, cwd={str(tmp_path)!r})\n"
        "    async for ev in client.stream('hello'):\n"
        "        pass\n"
        "    print(client.session_id, flush=True)\n"
        "asyncio.run(main())\n"  # no aclose(): the process just ends
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert logged(log, "session/close") == [{"sessionId": done.stdout.strip()}]


def test_a_new_conversation_closes_the_session_it_replaces(
    ts_agent: tuple[list[str], Path], tmp_path: Path, ipython: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import shlex

    argv, log = ts_agent
    acp = json.dumps(shlex.join(argv))
    ipython.run_line_magic("agent", f"--acp {acp} --no-kernel --wait hello there")
    ipython.run_line_magic("agent", f"--acp {acp} --no-kernel --new --wait hello again")
    out = capsys.readouterr().out
    assert "TS agent: hello there" in out
    assert "TS agent: hello again" in out
    for _ in range(50):
        if logged(log, "session/close"):
            break
        time.sleep(0.1)
    assert logged(log, "session/close")[0]["sessionId"] == logged(log, "prompt_done")[0]["sessionId"]
    ipython.run_line_magic("agent", f"--acp {acp} --no-kernel --sessions")
    listed = capsys.readouterr().out
    assert "ts-1  hello again" in listed  # --sessions: this agent process knows its own sessions
    assert "--resume ID" in listed
    # --resume ID: that session is asked for before the prompt; one the agent does not have is said,
    # and the prompt is not sent to another session instead (this agent process never had ts-9)
    ipython.run_line_magic("agent", f"--acp {acp} --no-kernel --resume ts-9 --wait hello once more")
    resumed = capsys.readouterr().out
    assert "the agent's session ts-9 could not be continued" in resumed
    assert "hello once more" not in resumed
    assert [p["reply"] for p in logged(log, "prompt_done")] == ["TS agent: hello there", "TS agent: hello again"]
    ipython.run_line_magic("agent", f"--acp {acp} --no-kernel --wait and now")  # the next turn: a session of its own
    assert "TS agent: and now" in capsys.readouterr().out


async def test_an_agents_own_cost_per_turn_is_counted_within_the_session_it_was_spent_in(
    ts_agent: tuple[list[str], Path], tmp_path: Path
) -> None:
    """ACP's ``usage_update`` cost is the session's total so far, and the prompt's response has the turn's
    tokens: a turn costs the difference from the same session's total after its last turn here, also
    when the conversation went to another of the agent's sessions and came back (the History picker)."""
    import shlex

    from nb_agent.conversation import usage
    from nb_agent.events import TurnUsage

    argv, _ = ts_agent

    async def spend(client: ACPClient, amount: str) -> TurnUsage:
        events = [e async for e in usage.metered(client, f"spend {amount}", url=shlex.join(argv), model=None)]
        (row,) = [e for e in events if isinstance(e, TurnUsage)]
        return row

    async with ACPClient(argv, cwd=str(tmp_path)) as client:
        first = await spend(client, "0.5")
        one = client.session_id
        client._process.session_id = client.session_id = None  # a second session in the same agent
        second = await spend(client, "0.25")
        await client.reopen(str(one))  # back to the first (0.5 spent there, 0.25 in the other)
        third = await spend(client, "0.125")
    assert [(r.cost, r.cost_source) for r in (first, second, third)] == [(0.5, "reported by the agent"),
        (0.25, "reported by the agent"), (0.125, "reported by the agent")]  # fmt: skip
    assert third.session_id == one
    assert [(r.input_tokens, r.output_tokens) for r in (first, second, third)] == [(300, 20)] * 3
