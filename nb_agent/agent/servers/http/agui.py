"""AG-UI's route: one run per ``POST /agui`` (https://docs.ag-ui.com/concepts/events).

A run that needs a tool approval ends with an ``interrupt`` outcome; the agent stays suspended until
the next run's ``resume`` answers it. Hanging up mid-run is AG-UI's only cancel.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response

from nb_agent.agent.servers.http.agui_encode import AGUIWriter, _agui_text, _interrupts, _resume_decision, from_agui
from nb_agent.agent.servers.http.common import MALFORMED, Frame, _error, _frames, _json_body, _sse
from nb_agent.agent.servers.http.runs import DECLINED, Session, Sessions, _locked, _StartError
from nb_agent.events import RunFinished


class AGUIRoutes:
    """AG-UI's route handler over the sessions."""

    def __init__(self, sessions: Sessions, *, approval_grace: float) -> None:
        self.sessions = sessions
        self.approval_grace = approval_grace

    async def agui(self, request: Request) -> Response:
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        thread, run_id, messages = body.get("threadId"), body.get("runId"), body.get("messages")
        if not isinstance(thread, str) or not thread or not isinstance(run_id, str) or not isinstance(messages, list):
            return _error(422, "a RunAgentInput needs threadId, runId and messages")
        writer = AGUIWriter(thread, run_id)
        try:
            session = await self.sessions.open(thread)
        except _StartError as exc:
            return EventSourceResponse(_frames([writer.started(), *writer.failed(str(exc), "agent_start")]), sep="\n")
        if not await _locked(session):
            return _error(409, f"thread {thread} already has a run streaming")
        resume = body.get("resume")
        entries = [e for e in resume if isinstance(e, dict)] if isinstance(resume, list) else []
        inbox = [m for m in messages if isinstance(m, dict)]
        return EventSourceResponse(self._agui_stream(session, writer, inbox, entries), sep="\n")

    def _take(self, session: Session, messages: list[Frame]) -> None:
        """New user messages become queued prompts; a thread new to us is seeded with its history."""
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        if not session.user_ids and session.run is None:  # new to us, or evicted and back
            last = users[-1] if users and users[-1] == len(messages) - 1 else len(messages)
            if not session.agent.messages:  # else the stored history, which knows the tool calls, goes on
                session.set_history(from_agui(messages[:last]))
            session.user_ids.update(str(messages[i].get("id")) for i in users)
            if last < len(messages):
                session.prompts.append(_agui_text(messages[last].get("content")))
            return
        for i in users:
            msg_id = str(messages[i].get("id"))
            if msg_id not in session.user_ids:
                session.user_ids.add(msg_id)
                session.prompts.append(_agui_text(messages[i].get("content")))

    async def _resume(self, session: Session, entries: list[Frame]) -> None:
        """Answer the interrupts; any left unanswered are denied (1.0 wants every one answered)."""
        run = session.run
        for entry in entries:
            await session.answer(str(entry.get("interruptId", "")), _resume_decision(entry))
        if run is not None:
            for call_id in list(run.asking):
                await session.answer(call_id, DECLINED)

    async def _agui_stream(
        self, session: Session, writer: AGUIWriter, messages: list[Frame], resume: list[Frame]
    ) -> AsyncIterator[dict[str, str]]:
        async with session.lock:
            yield _sse(writer.started())
            done = False
            try:
                try:
                    self._take(session, messages)
                except MALFORMED as exc:
                    done = True
                    for frame in writer.failed(f"a message of the thread is malformed: {exc}", "bad_request"):
                        yield _sse(frame)
                    return
                await self._resume(session, resume)
                async for frame in self._agui_frames(session, writer):
                    yield _sse(frame)
                done = True
            finally:
                session.touch()
                if not done:  # the client hung up mid-run: that is AG-UI's only cancel
                    session.prompts.clear()
                    await session.stop_run()

    async def _agui_frames(self, session: Session, writer: AGUIWriter) -> AsyncIterator[Frame]:
        while True:
            run = session.run
            if run is None:
                if not session.prompts:
                    for frame in writer.finished({"type": "success"}):
                        yield frame
                    return
                run = session.start(session.prompts.pop(0))
            if run.waiting:  # every open call waits for the user: end here, resume on the next run
                for frame in writer.finished({"type": "interrupt", "interrupts": _interrupts(run)}):
                    yield frame
                return
            try:
                event = await run.next(self.approval_grace if run.asking else None)
            except TimeoutError:  # approvals pending and nothing else moving (a subagent's, say)
                for frame in writer.finished({"type": "interrupt", "interrupts": _interrupts(run)}):
                    yield frame
                return
            if event is not None and not isinstance(event, RunFinished):
                for frame in writer.frames(event):
                    yield frame
                continue
            session.run = None
            await run.reap()
            reason = event.reason if event is not None else "error"
            if reason == "error":
                session.prompts.clear()
                err = writer.error
                message = err.message if err else "the agent run ended without finishing"
                for frame in writer.failed(message, err.code if err else None):
                    yield frame
                return
            if reason == "cancel":
                session.prompts.clear()
                for frame in writer.finished({"type": "cancelled"}):
                    yield frame
                return
