"""Runs in a notebook: one conversation per name, live into a widget or as plain text.

Interactive front ends get the run as a task on the kernel's own event loop, so the cell
returns at once and the shell channel stays free for the widget's Allow / Deny / Cancel clicks.
Headless execution (``jupyter execute``, nbval: the request says ``allow_stdin=False``) and
terminal IPython wait for the run, on a private loop thread, streaming plain text; a kernel
interrupt then cancels the run. ``_agent`` holds the last run's result either way.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any
from urllib.parse import urlsplit

from nb_agent.agent.recording import Recording, first_line
from nb_agent.connect.clients import open_client
from nb_agent.connect.config import AgentConfig
from nb_agent.errors import UsageError
from nb_agent.event_questions import ElicitationRequested
from nb_agent.events import (
    ApprovalAnswered,
    ApprovalRequested,
    Decision,
    ErrorReported,
    Event,
    ModelChanged,
    RunFinished,
    RunStarted,
    TokenUsage,
    ToolCall,
    UserMessage,
)
from nb_agent.gate import automatic
from nb_agent.kernel import addressing
from nb_agent.kernel.failures import Failure
from nb_agent.kernel.main_thread import wait_serving
from nb_agent.kernel.notebook_tools import fixing
from nb_agent.kernel.provenance import RunInfo, running
from nb_agent.pictures import Picture, attaching
from nb_agent.protocols import AgentClient
from nb_agent.render.text import TextRenderer, fold_replacements
from nb_agent.run import RunClient
from nb_agent.secrets import redact
from nb_agent.tool_contract import Tool
from nb_agent.ui import elicitation, history, picks
from nb_agent.ui.log import CompactList
from nb_agent.ui.policy_check import enforce
from nb_agent.ui.replay import CellTape
from nb_agent.ui.replay_client import ReplayClient
from nb_agent.ui.usage import metered

Push = Callable[[list[Event]], None]


class AgentResult:
    """What a run produced; ``await result.wait()`` for one still streaming.

    ``events`` holds the run's events compacted as the widget's log is (``nb_agent.ui.log``): one
    message's consecutive deltas as one event, the last plan, one ``tool_updated`` per call. It is
    appended to as a list; a run of 10^6 deltas or 3,000 plans holds its final state, not every update.
    """

    def __init__(self, prompt: str) -> None:
        self.prompt = prompt
        self.events: CompactList[Event] = CompactList()
        self.recording: Recording | None = None  # what the cell keeps to replay this run (notebook cells)
        self._done = threading.Event()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def text(self) -> str:
        """The answer as shown: streamed text, with any replaced message's text replaced; secrets
        masked in the joined text too (a key the agent streamed in two pieces)."""
        texts = [e.model_dump() for e in self.events if e.type in ("text_delta", "text_replaced")]
        return redact("".join(e["delta"] for e in fold_replacements(texts)))

    @property
    def tool_calls(self) -> list[ToolCall]:
        """One per call: a call shown again (corrected arguments) counts once, as last shown."""
        calls = {e.tool_call_id: e for e in self.events if isinstance(e, ToolCall)}
        return list(calls.values())

    @property
    def errors(self) -> list[str]:
        return [e.message for e in self.events if isinstance(e, ErrorReported)]

    @property
    def finished(self) -> RunFinished | None:
        last = self.events[-1] if self.events else None
        return last if isinstance(last, RunFinished) else None

    @property
    def reason(self) -> str | None:
        return self.finished.reason if self.finished else None

    @property
    def usage(self) -> TokenUsage | None:
        return self.finished.usage if self.finished else None

    async def wait(self) -> AgentResult:
        """For the next cell: ``await _agent.wait()`` (top-level await)."""
        if not self._done.is_set():
            await asyncio.to_thread(self._done.wait)
        return self

    def __repr__(self) -> str:
        state = self.reason or "running"
        text = self.text
        return f"<AgentResult {state}: {text[:60]!r}{'…' if len(text) > 60 else ''}>"


class Conversation:
    """A client bound to one event loop; moving loops keeps the session id, so the talk goes on."""

    def __init__(self, config: AgentConfig, name: str | None = None, *, fresh: bool = False) -> None:
        self.config = config
        self.name = name  # for the built-in agent: the stored session to resume
        self.fresh = fresh  # for the built-in agent: a new stored session even if the name exists
        self.client: RunClient | None = None
        self.client_config = config
        self._loop: asyncio.AbstractEventLoop | None = None
        self.running: RunClient | None = None  # the client of the run under way (a replay's own, or .client)
        self.answers: dict[str, Decision] = {}  # this run's approvals, as answered (kept in its recording)
        self.fix: Failure | None = None  # the next run fixes this failed cell (``%agent --fix``)
        self.picked: dict[str, str] = {}  # the widget's choices for the next turns (``ui.picks``)
        self.offered: dict[str, set[str]] = {}  # what the pickers last offered, per picker
        self.model_option: str | None = None  # an ACP agent's config option that picks its model
        self.listed: dict[tuple[str, str], list[str]] = {}  # the models each provider's server listed
        self.reopen: str | None = None  # an ACP agent's past session to continue at the next run (``ui.history``)
        self.attach: tuple[Picture, ...] = ()  # pictures the next prompt names ({fig}: ``kernel.attach``)

    def configure(self, config: AgentConfig) -> None:
        """New options for the next run (the caller starts a new conversation for a new server); the
        widget's picks go over them (``ui.picks``)."""
        config = picks.over(config, self.picked)
        self.config = config
        if isinstance(self.client, AgentClient) and _connection(config) != _connection(self.client_config):
            self.client.headers = config.request_headers(self.client.protocol)  # a new key or header
            self.client_config = config
        if self.client is not None:  # per-call options such as --follow-card-url, an ACP --mode
            for name, value in config.options_for(type(self.client)).items():
                setattr(self.client, name, value)

    async def ensure_client(self) -> RunClient:
        """The conversation's client, built once (``connect.clients``), moved to this event loop."""
        loop = asyncio.get_running_loop()
        if self.client is None:
            self.client = await open_client(self.config, name=self.name, fresh=self.fresh)
            self.client_config = self.config
        elif self._loop is not loop:  # a live run after a waited one, or back: same conversation
            self.client.rebind()
        self._loop = loop
        return self.client

    async def run(
        self,
        prompt: str,
        result: AgentResult,
        push: Push,
        *,
        ask: Callable[[ApprovalRequested], Decision | None],
        tape: CellTape | None = None,
        elicit: elicitation.Decide = elicitation.headless,
    ) -> AgentResult:
        """Stream one run; ``ask`` answers approvals now, or returns ``None`` to wait for the user;
        ``elicit`` the agent's questions the same way (``ui.elicitation``).

        ``tape``: a notebook cell's run, recorded, or replayed from the cell's recording.
        """
        if self.reopen is not None:  # a past session picked (--resume): its earlier turns come first
            push(await history.reopen_now(self))
        push([UserMessage(text=prompt)])
        self.answers = {}
        client: RunClient | None = None

        def show(events: list[Event]) -> None:
            result.events.extend(events)
            push(events)

        try:
            enforce(self.config)  # the admin's policy, whoever started the run (nb_agent.policy)
            addressing.for_this_task(addressing.capture())  # its workspace tools act on the page it came from
            early = await tape.prepare(self.agent_kind) if tape is not None else []
            show(early)
            if any(isinstance(ev, RunFinished) for ev in early):
                return result
            client = await self._client_for(tape)
            self.running = client
            with running(self._run_info(prompt, tape)) as info:  # the provenance of the cells it changes
                info.notify = push  # its checkpoint's state, on its card (kernel/checkpoints.py)
                async for ev in self._events(client, prompt):
                    show([ev])
                    if isinstance(ev, RunStarted):
                        info.run_id = ev.run_id
                    elif isinstance(ev, ModelChanged):
                        info.model = ev.model
                    elif isinstance(ev, ApprovalRequested) and ev.kind == "approval":
                        decision = (tape.recorded_answer(client, ev) if tape is not None else None) or ask(ev)
                        if decision is not None:
                            self.answers[ev.tool_call_id] = decision
                            await client.approve(ev.tool_call_id, decision)
                            push([ApprovalAnswered(tool_call_id=ev.tool_call_id, decision=decision)])
                    elif isinstance(ev, ElicitationRequested):
                        show(await elicitation.respond(client, ev, elicit))
        except UsageError as exc:  # nothing was streamed: say what to do, as a run that failed
            show([ErrorReported(message=str(exc), code="usage"), RunFinished(reason="error")])
        finally:
            self.running = None
            if tape is not None:
                tape.finish(client, list(result.events), self.answers)
                result.recording = tape.recording
            result._done.set()
        return result

    def _run_info(self, prompt: str, tape: CellTape | None) -> RunInfo:
        cfg = self.config
        acp = cfg.protocol == "acp"
        return RunInfo(
            agent=agent_name(cfg),
            prompt=first_line(prompt),
            cell_id=tape.ref.cell_id if tape is not None and tape.ref is not None else None,
            model=cfg.model,
            kernel_offered=acp and cfg.kernel,
        )

    @property
    def agent_kind(self) -> str:
        """``builtin``, or the protocol of the configured server or agent (``auto`` until detected)."""
        return "builtin" if not self.config.url else self.config.protocol

    async def _client_for(self, tape: CellTape | None) -> RunClient:
        """The client for this run: the recording's own for a server's or ACP agent's replay, else the
        conversation's (a built-in agent's model calls put on tape)."""
        if tape is not None and tape.replay is not None and tape.replay.kind == "events":
            return ReplayClient(tape.replay, strict=tape.strict, live=self.ensure_client, tools=_kernel_tools)
        client = await self.ensure_client()
        if tape is not None:
            tape.begin(client)
        return client

    async def cancel(self) -> None:
        """Stop the run under way (it ends with reason ``cancel``)."""
        client = self.running or self.client
        if client is not None:
            await client.cancel()

    async def _events(self, client: RunClient, prompt: str) -> AsyncIterator[Event]:
        """The run's events: the widget's picks applied first; metered for the usage ledger; a fix run's
        edit of its cell runs the cell."""
        fix, self.fix = self.fix, None
        await picks.apply(self, client)
        pictures, self.attach = self.attach, ()
        with fixing(fix.cell_id if fix is not None else None), attaching(pictures):
            async for event in metered(client, prompt, url=self.config.url, model=self.config.model):
                yield event


def agent_name(config: AgentConfig) -> str:
    """Who an agent is, for people: the built-in agent, an ACP agent's program, a server's protocol and host."""
    if not config.url:
        return "the built-in agent"
    if config.protocol == "acp":
        try:
            command = shlex.split(config.url)
        except ValueError:  # unbalanced quotes: the agent's start will say so
            command = config.url.split()
        words = [w for w in command if "=" not in w and w != "env"] or ["an ACP agent"]
        return os.path.basename(words[0])
    return f"{config.protocol} agent at {urlsplit(config.url).netloc}"


def _kernel_tools() -> list[Tool]:
    from IPython import get_ipython

    from nb_agent.kernel.toolset import kernel_tools

    shell = get_ipython()
    return kernel_tools(shell) if shell is not None else []


def _connection(config: AgentConfig) -> tuple[object, ...]:
    return (tuple(sorted(config.headers.items())), config.api_key_env)


class LoopThread:
    """A private event loop on a daemon thread, for runs the cell must wait for."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="nb-agent", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, AgentResult], on_interrupt: Callable[[], Any]) -> AgentResult:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return wait_serving(future)  # the run's kernel tools need this (the main) thread
        except KeyboardInterrupt:  # the kernel's interrupt: cancel the run, keep what it produced
            asyncio.run_coroutine_threadsafe(on_interrupt(), self.loop).result(10)
            return future.result(10)


_FLUSH_EVERY = 0.1  # seconds: live enough to read, without a message per token or per line
# after these, something else may write to the cell (the approval's answer, the cell's error; the
# agent's code in this kernel writes into its own capture, nb_agent.kernel.capture): what waits is
# written first, so the cell reads in order
_WRITE_BEFORE = (ApprovalRequested, ErrorReported, RunFinished)


def plain_push(quiet: bool) -> Push:
    """The run as plain text on stdout, written in batches: at most every ``_FLUSH_EVERY`` seconds (a
    timer on the run's loop writes what waits), and before anything else may write to the cell.

    In a kernel every write wakes ipykernel's IO thread and every flush waits for it: a replay of
    25,000 events, written and flushed line by line, spent 37 of its 51 seconds there.
    """
    pending: list[str] = []
    timer: list[asyncio.TimerHandle] = []
    # the cell's stream as the run starts: a later write must not follow sys.stdout where something
    # swapped it meanwhile (llama.cpp's loader points it at /dev/null while it loads a model)
    out = sys.stdout

    def write(flush: bool = True) -> None:
        while timer:
            timer.pop().cancel()
        if pending:
            out.write("".join(pending))
            pending.clear()
            if flush:
                out.flush()

    def later() -> None:
        if timer or not pending:
            return
        try:
            timer.append(asyncio.get_running_loop().call_later(_FLUSH_EVERY, write))
        except RuntimeError:  # not on a loop: nothing would write it later
            write()

    renderer = TextRenderer(pending.append)

    def push(events: list[Event]) -> None:
        if quiet:
            return
        for ev in events:
            if isinstance(ev, UserMessage):
                continue
            if isinstance(ev, ApprovalAnswered):
                pending.append(f"  → {ev.decision}\n")
                continue
            renderer.render(ev)
            if isinstance(ev, _WRITE_BEFORE):
                write(flush=isinstance(ev, RunFinished))
        later()

    return push


def headless_ask(mode: str) -> Callable[[ApprovalRequested], Decision | None]:
    def ask(ev: ApprovalRequested) -> Decision:
        decision = automatic(mode)  # the policy's own answer (nb_agent.gate); ask: none to ask, so deny
        if decision == "allow_once":
            sys.stdout.write(f"  (no front end to ask: --approve always allowed {ev.display_name})\n")
        elif decision == "deny":
            sys.stdout.write(f"  (no front end to ask: --approve never denied {ev.display_name})\n")
        else:
            sys.stdout.write(f"  (no front end to ask: denied {ev.display_name}; use --approve always to allow)\n")
        return decision or "deny"

    return ask
