"""Replay benchmark: a recorded 50-turn session replayed, against the same session live.

The scripted model (tests/servers/scripted_llm.py, OpenAI wire format) runs in its own process on
loopback. A conversation of ``--turns`` prompts (every fifth asks for a tool call, then gets an
answer; the others get a ``--deltas``-delta answer) is run three ways at once, turn by turn, in the
same process (so a slower moment of a shared machine hits all three alike):

  (a) live: the built-in ``Agent`` on ``OpenAIProvider``, nothing recorded (the baseline);
  (b) live and recorded: the same ``Agent`` on a ``TapeProvider`` whose tape keeps each model call;
  (c) replayed: a third ``Agent`` on a ``TapeProvider`` with no model at all, each prompt answered
      from (b)'s recording of it, through JSON as a cell keeps it (strict: a divergence would fail
      the benchmark).

Prints per-turn wall time (p50, mean) and this process's CPU time for each, what recording and
replaying add per turn over (a) (goal: replay adds under 5 ms a turn), and the recording's bytes per
turn against the transcript's (the widget's saved, compacted event log of the same run; goal: at
most 2x). A warm-up session of 5 turns is not counted.

    python bench/replay.py [--turns 50] [--deltas 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/replay.py` puts bench/ first, not the repo
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from model_process import model_process  # noqa: E402 (bench/, the script's folder)

from nb_agent.agent.loop import Agent  # noqa: E402
from nb_agent.agent.permissions import Permissions  # noqa: E402
from nb_agent.agent.providers.base import Provider  # noqa: E402
from nb_agent.agent.providers.openai import OpenAIProvider  # noqa: E402
from nb_agent.agent.recording import Recording, prompt_hash  # noqa: E402
from nb_agent.agent.retry import RetryPolicy  # noqa: E402
from nb_agent.agent.settings import AgentSettings  # noqa: E402
from nb_agent.agent.tape import TapeProvider  # noqa: E402
from nb_agent.conversation.log import compact  # noqa: E402
from nb_agent.errors import UsageError  # noqa: E402
from nb_agent.events import Event, UserMessage  # noqa: E402
from nb_agent.tool_contract import tool  # noqa: E402
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn  # noqa: E402
from tests.servers.serve import free_port  # noqa: E402

KEY = "bench-key"
MODEL = "scripted-model"
SETTINGS = AgentSettings(retry=RetryPolicy(retries=0))


@tool
def lookup(key: str) -> str:
    """Look a value up (the tool the session calls every fifth turn)."""
    return f"{key} = {len(key) * 7}"


class SessionModel(ScriptedModel):
    """Answers from the conversation, so it can run in another process: a prompt ending in "?" gets a
    tool call, a tool result a short answer, anything else the long answer."""

    def __init__(self, deltas: int) -> None:
        super().__init__(api_key=KEY, model=MODEL)
        text = ("The figures for this quarter look steady across regions. " * (deltas * 4 // 57 + 1))[: deltas * 4]
        self.long_turn = Turn(text=text, chunk_size=4, input_tokens=100, output_tokens=deltas)
        self.tool_turn = Turn(tool_calls=[ToolCallSpec("lookup", '{"key": "revenue"}')], input_tokens=100)
        self.after_tool = Turn(text="Revenue is 49.", input_tokens=120, output_tokens=4)

    def _next_turn(self) -> Turn | None:
        last = self.requests[-1]["messages"][-1]
        if last["role"] == "tool":
            return self.after_tool
        return self.tool_turn if str(last["content"]).endswith("?") else self.long_turn


def prompts(turns: int) -> list[str]:
    return [f"What is the revenue, take {i}?" if i % 5 == 4 else f"Summarise part {i}." for i in range(turns)]


def transcript_bytes(prompt: str, events: list[Event]) -> int:
    """What the widget saves of the run: the compacted event log, the prompt included."""
    log = [UserMessage(text=prompt).model_dump(mode="json"), *(e.model_dump(mode="json") for e in events)]
    return len(json.dumps(compact(log), ensure_ascii=False))


async def turn(agent: Agent, text: str) -> tuple[float, float, list[Event]]:
    """One prompt's run: wall time, this process's CPU time, its events."""
    wall, cpu = time.perf_counter(), time.process_time()
    events = [ev async for ev in agent.stream(text)]
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if events[-1].type != "run_finished" or events[-1].reason != "stop":
        raise RuntimeError(f"{text!r} failed: {[e for e in events if e.type == 'error']}")
    return wall, cpu, events


def recorded(tape: TapeProvider, text: str) -> Recording:
    """The turn's recording as a cell keeps it, through JSON and back."""
    used, live = tape.end(), tape.chosen()
    assert used is not None
    assert live is not None
    rec = Recording(
        kind="model", agent="builtin", model=live.model, prompt=text, prompt_hash=prompt_hash(text), calls=used.calls,
        context=used.context, context_limit=live.context_limit, context_source=live.context_source,
        time="2025-06-01T12:00:00+00:00",
    )  # fmt: skip
    return Recording.parse(json.loads(json.dumps(rec.dump())))


def no_model() -> tuple[Provider, str]:
    raise UsageError("the replay asked for a model")


async def rounds(url: str, http: httpx.AsyncClient, texts: list[str], count: int) -> dict[str, Any]:
    """``count`` sessions; in each, every turn is run live, then live and recorded, then replayed, in
    turn: the three conversations advance together, so a slower moment of the machine hits all three."""
    out: dict[str, Any] = {"live": [], "taped": [], "replay": [], "rec_bytes": [], "transcript": []}
    for _ in range(count):
        plain = OpenAIProvider(MODEL, base_url=f"{url}/v1", api_key=KEY, http_client=http)
        tape = TapeProvider(lambda plain=plain: (plain, "openai"))  # type: ignore[misc]
        replayer = TapeProvider(no_model)
        agents = [Agent(p, tools=[lookup], permissions=Permissions(mode="auto"), settings=SETTINGS)
                  for p in (plain, tape, replayer)]  # fmt: skip
        for text in texts:
            out["live"].append((await turn(agents[0], text))[:2])
            tape.begin(None, strict=False, limit=2_000_000)
            wall, cpu, events = await turn(agents[1], text)
            out["taped"].append((wall, cpu))
            rec = recorded(tape, text)
            replayer.begin(rec, strict=True, limit=2_000_000)
            out["replay"].append((await turn(agents[2], text))[:2])
            used = replayer.end()
            assert used is not None
            if used.diverged or used.replayed != used.answered:
                raise RuntimeError(f"{text!r} did not replay: {used.diverged}")
            out["rec_bytes"].append(rec.size())
            out["transcript"].append(transcript_bytes(text, events))
    return out


async def main(args: argparse.Namespace) -> None:
    port = free_port()
    cmd = [sys.executable, __file__, "--serve-port", str(port), "--deltas", str(args.deltas)]
    texts = prompts(args.turns)
    with model_process(cmd, port, KEY) as url:
        async with httpx.AsyncClient(timeout=60) as http:
            await rounds(url, http, texts[:5], 1)  # warm-up: connections, imports, caches
            found = await rounds(url, http, texts, args.rounds)

    def row(name: str, pairs: list[tuple[float, float]]) -> str:
        wall = [w * 1000 for w, _ in pairs]
        cpu = [c * 1000 for _, c in pairs]
        return (
            f"{name:<26} wall p50 {statistics.median(wall):7.2f} ms  mean {statistics.fmean(wall):7.2f} ms"
            f"   client CPU p50 {statistics.median(cpu):6.2f} ms"
        )

    print(
        f"{args.turns} turns x {args.rounds} sessions, {args.deltas} deltas a long answer, every fifth turn a tool call"
    )
    print(row("(a) live", found["live"]))
    print(row("(b) live + recorded", found["taped"]))
    print(row("(c) replayed (no model)", found["replay"]))

    def p50(key: str, i: int) -> float:
        return statistics.median(x[i] for x in found[key]) * 1000

    wall, cpu = p50("taped", 0) - p50("live", 0), p50("taped", 1) - p50("live", 1)
    print(f"recording adds {wall:+7.2f} ms wall, {cpu:+6.2f} ms CPU a turn (p50)")
    print(
        f"replay adds    {p50('replay', 0) - p50('live', 0):+7.2f} ms wall a turn over the live loop (p50; goal < 5 ms)"
    )
    rec, seen = found["rec_bytes"], found["transcript"]
    print(
        f"recording {statistics.fmean(rec):6.0f} B a turn, transcript {statistics.fmean(seen):6.0f} B a turn: "
        f"{sum(rec) / sum(seen):.2f}x (goal at most 2x)"
    )


def run_server(port: int, deltas: int) -> None:
    import uvicorn

    uvicorn.run(SessionModel(deltas).app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--deltas", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3, help="sessions of --turns turns each")
    parser.add_argument("--serve-port", type=int, help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.serve_port:
        run_server(parsed.serve_port, parsed.deltas)
    else:
        asyncio.run(main(parsed))
