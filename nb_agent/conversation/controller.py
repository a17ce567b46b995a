"""The run controller: one conversation with an agent, its turns run the same way for every front end.

A front end (the widget and ``%agent`` in ``nb_agent.ui``, ``nb-agent stream`` in ``nb_agent.cli``)
asks for a turn with :meth:`Conversation.run` and hands it what only the front end has, as
arguments: where the events go (``push``), who answers approvals (``ask``), the turn's record and
replay (``tape``), the cell a fix run is for (``fix``). What the front end's surroundings lend the
run (a notebook: its kernel) comes once, as the conversation's :class:`Host`. Whatever started the
turn, the controller does the same: the admin's policy checked, the widget's picks and the line's
options brought to the client, the turn metered into the usage ledger, recorded or replayed, and
every approval answered through one function, :meth:`Conversation.answer`, be the answer the
widget's click, the terminal's, ``--approve`` or a recorded one.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from nb_agent.agent.recording import first_line
from nb_agent.connect.clients import open_client
from nb_agent.connect.config import AgentConfig
from nb_agent.conversation import elicitation, history
from nb_agent.conversation.picks import Picks
from nb_agent.conversation.policy_check import enforce
from nb_agent.conversation.replay import CellTape
from nb_agent.conversation.replay_client import ReplayClient
from nb_agent.conversation.result import AgentResult
from nb_agent.conversation.usage import metered
from nb_agent.errors import NbAgentError, UsageError
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
    UserMessage,
)
from nb_agent.kernel.provenance import RunInfo
from nb_agent.pictures import Picture, attaching
from nb_agent.protocols import AgentClient
from nb_agent.run import RunClient
from nb_agent.tool_contract import Tool

Push = Callable[[list[Event]], None]
# an approval's answer now, or None for the user to answer later (the widget); at once or awaited (a terminal's)
Ask = Callable[[ApprovalRequested], Decision | Awaitable[Decision | None] | None]


@contextlib.contextmanager
def _nothing(info: RunInfo) -> Iterator[RunInfo]:
    yield info


def _no_tools() -> list[Tool]:
    return []


@dataclass(frozen=True)
class Host:
    """What a front end's surroundings lend the runs it starts (a notebook: its kernel; a terminal: nothing).

    Args:
        scope: entered for the length of each run with the run's facts (``RunInfo``: the agent, its
            model and run id as they become known, the cell that asked, the cell a fix is for). A
            notebook binds there the page the run's tools act on (``kernel.addressing``) and the run
            the cells it changes name (``kernel.provenance``); the kernel's tools read both.
        tools: the kernel's tools, for a replay that runs an agent's recorded calls into the kernel again.
    """

    scope: Callable[[RunInfo], contextlib.AbstractContextManager[RunInfo]] = _nothing
    tools: Callable[[], list[Tool]] = _no_tools


NO_HOST = Host()


class Conversation:
    """A client bound to one event loop; moving loops keeps the session id, so the talk goes on.

    Args:
        config: the configuration of its next turn (the defaults with a ``%agent`` line's options).
        name: a notebook conversation's name: the built-in agent's stored session to resume.
        fresh: a new stored session even if the name exists.
        session_id: the agent's own session to continue (``nb-agent stream --session``).
        host: what the front end's surroundings lend its runs.
    """

    def __init__(
        self,
        config: AgentConfig,
        name: str | None = None,
        *,
        fresh: bool = False,
        session_id: str | None = None,
        host: Host = NO_HOST,
    ) -> None:
        self.config = config
        self.name = name
        self.fresh = fresh
        self.session_id = session_id
        self.host = host
        self.client: RunClient | None = None  # set by a caller that built its own, or at the first turn
        self.built = False  # the client was built from ``config`` (its line options and picks then apply)
        self.client_config = config
        self._loop: asyncio.AbstractEventLoop | None = None
        self.running: RunClient | None = None  # the client of the run under way (a replay's own, or .client)
        self.answers: dict[str, Decision] = {}  # this run's approvals, as answered (kept in its recording)
        self.picks = Picks()  # the widget's choices for the next turns, and what its pickers offered
        self.reopen: str | None = None  # an ACP agent's past session to continue at the next turn (--resume)
        self.attach: tuple[Picture, ...] = ()  # pictures the next prompt names ({fig}: ``kernel.attach``)

    def configure(self, config: AgentConfig) -> None:
        """New options for the next turn (the caller starts a new conversation for a new server); the
        widget's picks go over them, except those the caller's line gave itself (``Picks.explicit``)."""
        config = self.picks.over(config)
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
            self.client = await open_client(self.config, name=self.name, fresh=self.fresh, session_id=self.session_id)
            self.client_config, self.built = self.config, True
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
        ask: Ask,
        tape: CellTape | None = None,
        fix: str | None = None,
        elicit: elicitation.Decide = elicitation.headless,
    ) -> AgentResult:
        """Stream one turn into ``push`` and ``result``.

        Args:
            prompt: what the agent is asked.
            result: filled in as the turn streams.
            push: where the events go as they come (the widget, the terminal).
            ask: answers an approval now, or returns ``None`` for the user to answer later.
            tape: the turn's record and replay (a notebook cell's, or ``nb-agent stream --recording``'s).
            fix: the id of the cell this turn fixes (``%agent --fix``): an edit of that cell runs it.
            elicit: answers the agent's questions (``conversation.elicitation``) as ``ask`` answers
                approvals; by default they are declined, the run saying so.
        """
        if self.reopen is not None:  # a past session asked for (--resume): its earlier turns come first
            session_id, self.reopen = self.reopen, None
            if not await self.continue_session(session_id, push):  # not sent to another session instead
                result.events.append(RunFinished(reason="error"))
                push(result.events[-1:])
                result.finish()
                return result
        push([UserMessage(text=prompt)])
        self.answers = {}
        client: RunClient | None = None

        def show(events: list[Event]) -> None:
            result.events.extend(events)
            push(events)

        info = self._run_info(prompt, tape, fix)
        info.notify = push  # its checkpoint's state, on its card (kernel/checkpoints.py)
        try:
            with self.host.scope(info):  # the page its tools act on, the provenance of the cells it changes
                enforce(self.config)  # the admin's policy, whoever started the run (nb_agent.policy)
                early = await tape.prepare(self.agent_kind) if tape is not None else []
                show(early)
                if any(isinstance(ev, RunFinished) for ev in early):
                    return result
                client = await self._client_for(tape)
                self.running = client
                async for ev in self._events(client, prompt):
                    show([ev])
                    if isinstance(ev, RunStarted):
                        info.run_id = ev.run_id
                    elif isinstance(ev, ModelChanged):
                        info.model = ev.model
                    elif isinstance(ev, ApprovalRequested) and ev.kind == "approval":
                        decision = (tape.recorded_answer(client, ev) if tape is not None else None) or ask(ev)
                        if inspect.isawaitable(decision):
                            decision = await decision
                        if decision is not None:
                            await self.answer(ev.tool_call_id, decision, push)
                    elif isinstance(ev, ElicitationRequested):
                        show(await elicitation.respond(client, ev, elicit))
        except UsageError as exc:  # nothing was streamed: say what to do, as a run that failed
            show([ErrorReported(message=str(exc), code="usage"), RunFinished(reason="error")])
        finally:
            self.running = None
            if tape is not None:
                tape.finish(client, list(result.events), self.answers)
                result.recording = tape.recording
            result.finish()
        return result

    async def answer(self, call_id: str, decision: Decision, push: Push, option_id: str | None = None) -> None:
        """Answer an approval: the one way every front end does, whoever answered.

        The answer is shown (``approval_answered``) and kept for the turn's recording before it is
        sent: the run may finish before the agent's reply. An answer that does not reach the agent is
        shown as an ``error`` event; the run goes on (the agent ends it, or the user cancels).

        Args:
            call_id: the ``tool_call_id`` of the ``approval_requested`` event.
            decision: ``allow_once``, ``allow_always`` or ``deny``.
            push: where the answer and any failure are shown.
            option_id: the agent's own option the user clicked (ACP), if any.
        """
        client = self.running or self.client  # a replay answers its own approvals
        if client is None:
            return
        push([ApprovalAnswered(tool_call_id=call_id, decision=decision, option_id=option_id)])
        self.answers[call_id] = decision
        try:
            if option_id is not None:
                await client.choose(call_id, option_id, decision)
            else:
                await client.approve(call_id, decision)
        except NbAgentError as exc:
            push([ErrorReported(message=f"the answer did not reach the agent: {exc}", code="approval")])

    async def question_answered(
        self, elicitation_id: str, action: object, content: object, push: Push, note: str | None = None
    ) -> None:
        """Answer an agent's question (elicitation) from the widget: accept with ``content``, decline or
        cancel; a failure (a value that does not fit the form, a run that is over) shown as an error."""
        push(await elicitation.answer(self.running or self.client, elicitation_id, action, content, note))

    async def continue_session(self, session_id: str, push: Push) -> bool:
        """Continue the ACP agent's past ``session_id`` in place of this conversation's session (a
        History pick now, ``--resume`` at the next turn): its earlier turns shown, or why not (False)."""
        try:
            client = await self.ensure_client()
        except NbAgentError as exc:
            push([ErrorReported(message=f"the agent's session {session_id} could not be continued: {exc}",
                                code=getattr(exc, "code", None) or "history")])  # fmt: skip
            return False
        events = await history.reopen(client, session_id)
        push(events)
        return not any(isinstance(ev, ErrorReported) for ev in events)

    def _run_info(self, prompt: str, tape: CellTape | None, fix: str | None) -> RunInfo:
        cfg = self.config
        return RunInfo(
            agent=agent_name(cfg),
            prompt=first_line(prompt),
            cell_id=tape.ref.cell_id if tape is not None and tape.ref is not None else None,
            model=cfg.model,
            kernel_offered=cfg.protocol == "acp" and cfg.kernel,
            fixing=fix,
        )

    @property
    def agent_kind(self) -> str:
        """``builtin``, or the protocol of the configured server or agent (``auto`` until detected)."""
        return "builtin" if not self.config.url else self.config.protocol

    async def _client_for(self, tape: CellTape | None) -> RunClient:
        """The client for this run: the recording's own for a server's or ACP agent's replay, else the
        conversation's (a built-in agent's model calls put on tape)."""
        if tape is not None and tape.replay is not None and tape.replay.kind == "events":
            return ReplayClient(tape.replay, strict=tape.strict, live=self.ensure_client, tools=self.host.tools)
        client = await self.ensure_client()
        if tape is not None:
            tape.begin(client)
        return client

    async def cancel(self) -> None:
        """Stop the run under way (it ends with reason ``cancel``)."""
        client = self.running or self.client
        if client is not None:
            await client.cancel()

    async def close(self) -> None:
        """Let the agent go (a terminal's one turn is over; a notebook's conversation lasts the kernel)."""
        client, self.client = self.client, None
        if client is not None:
            await client.aclose()

    def end_soon(self) -> None:
        """Close the client of a conversation another replaces (``session/close``, its process ended) on
        the loop it lives on, from any thread; one still running is left to finish (the kernel's exit
        closes it)."""
        client, loop = self.client, self._loop
        if client is None or self.running is not None or loop is None or loop.is_closed():
            return
        self.client = None
        done = asyncio.run_coroutine_threadsafe(client.aclose(), loop)
        done.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def _events(self, client: RunClient, prompt: str) -> AsyncIterator[Event]:
        """The run's events: the client brought to the turn's configuration first (the line's options,
        the widget's picks); metered for the usage ledger."""
        await self.picks.apply(client, self.config if self.built else None)
        pictures, self.attach = self.attach, ()
        with attaching(pictures):  # the pictures the prompt names, for the agent to send (nb_agent.pictures)
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


def _connection(config: AgentConfig) -> tuple[object, ...]:
    return (tuple(sorted(config.headers.items())), config.api_key_env)


__all__ = ["NO_HOST", "AgentResult", "Ask", "Conversation", "Host", "Push", "agent_name"]
