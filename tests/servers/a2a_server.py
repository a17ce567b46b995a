"""Real a2a-sdk 1.3.0 loopback server for A2A client tests.

Speaks JSON-RPC 1.0 (header ``A2A-Version: 1.0``) and 0.3 (no header) on one
URL, so the client is tested against the SDK's own serialisation rather than
hand-written fixtures. The first word of the user's text picks a scenario;
see ``ScenarioExecutor``. Captured wire frames live in ``a2a_NOTES.md``.
"""

from __future__ import annotations

import asyncio
import json

from a2a.server.agent_execution.agent_executor import AgentExecutor
from a2a.server.agent_execution.context import RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

SLOW_TICK_S = 0.05
SLOW_LIMIT_S = 20.0


class ScenarioExecutor(AgentExecutor):
    """Picks behaviour from the input text so one server covers every client path.

    Scenarios: default (progress + chunked echo artifact), ``fail``, ``slow``
    (cancellable ticker), ``ask`` (input-required then follow-up), ``raise``
    (executor exception) and ``message`` (direct Message, no Task).
    """

    def __init__(self) -> None:
        # One Event per task id: the framework also cancels the producer task,
        # but the flag lets the slow loop stop cleanly between ticks.
        self._cancel_flags: dict[str, asyncio.Event] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        current = context.current_task
        if current is not None and current.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            # Use the stored contextId: if the follow-up omits contextId the SDK
            # generates a fresh one for the RequestContext.
            await self._answer_followup(TaskUpdater(event_queue, task_id, current.context_id), text)
            return
        if text.startswith("message"):
            await event_queue.enqueue_event(
                Message(
                    message_id=f"reply-{task_id}",
                    role=Role.ROLE_AGENT,
                    context_id=context_id,
                    parts=[Part(text="direct reply")],
                )
            )
            return
        assert context.message is not None
        await event_queue.enqueue_event(
            Task(
                id=task_id,
                context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[context.message],
            )
        )
        up = TaskUpdater(event_queue, task_id, context_id)
        if text.startswith("raise"):
            raise RuntimeError("executor exploded")
        if text.startswith("fail"):
            await up.start_work()
            await up.failed(up.new_agent_message([Part(text="boom: the tool crashed")]))
        elif text.startswith("slow"):
            await self._slow(up, task_id)
        elif text.startswith("ask"):
            await up.requires_input(up.new_agent_message([Part(text="Which city?")]))
        else:
            await self._echo(up, text)

    async def _echo(self, up: TaskUpdater, text: str) -> None:
        """Default flow: progress in status-update metadata, artifact streamed word by word."""
        await up.start_work(up.new_agent_message([Part(text="thinking...")]))
        for i in (1, 2):
            progress = {"current": i, "total": 2, "message": f"step {i}"}
            await up.update_status(TaskState.TASK_STATE_WORKING, metadata={"progress": progress})
        words = text.split()
        await up.add_artifact(
            [Part(text="echo: ")], artifact_id="a1", name="response", append=False, last_chunk=not words
        )
        for n, word in enumerate(words):
            chunk = word if n == 0 else f" {word}"
            await up.add_artifact([Part(text=chunk)], artifact_id="a1", append=True, last_chunk=n == len(words) - 1)
        await up.complete()

    async def _slow(self, up: TaskUpdater, task_id: str) -> None:
        """Ticks until cancelled or SLOW_LIMIT_S elapses; cancel() writes the canceled state."""
        flag = self._cancel_flags.setdefault(task_id, asyncio.Event())
        await up.start_work()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SLOW_LIMIT_S
        n = 0
        try:
            while loop.time() < deadline:
                n += 1
                await up.add_artifact([Part(text=f"tick {n} ")], artifact_id="ticks", name="ticks", append=n > 1)
                try:
                    await asyncio.wait_for(flag.wait(), SLOW_TICK_S)
                    return  # cancelled: cancel() owns the terminal status
                except TimeoutError:
                    pass
            await up.complete()
        finally:
            self._cancel_flags.pop(task_id, None)

    async def _answer_followup(self, up: TaskUpdater, text: str) -> None:
        """Second turn of the ``ask`` flow: the reply text is the city."""
        await up.start_work()
        await up.add_artifact(
            [Part(text=f"Weather in {text or 'Paris'}: sunny")],
            artifact_id="weather",
            name="weather",
            last_chunk=True,
        )
        await up.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        flag = self._cancel_flags.get(task_id)
        if flag is not None:
            flag.set()
        await TaskUpdater(event_queue, task_id, context.context_id or "").cancel()


class ApiKeyMiddleware:
    """Pure-ASGI auth gate (does not buffer SSE); the agent card stays public."""

    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self.api_key = api_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/.well-known/"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if headers.get("x-api-key") == self.api_key or headers.get("authorization") == f"Bearer {self.api_key}":
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "unauthorized"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def make_agent_card(base_url: str) -> AgentCard:
    """Card advertising JSONRPC for both 1.0 and 0.3 at ``base_url + '/'``."""
    url = base_url.rstrip("/") + "/"
    return AgentCard(
        name="Scenario Agent",
        description="Loopback A2A test agent; behaviour chosen by the input text.",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text"],
        default_output_modes=["text"],
        skills=[AgentSkill(id="echo", name="echo", description="Echo with progress", tags=["test"])],
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version=v, url=url) for v in ("1.0", "0.3")
        ],
    )


def make_a2a_app(base_url: str, *, api_key: str | None = None) -> Starlette:
    """Build the Starlette app; ``api_key`` enables the 401 gate on the RPC route."""
    card = make_agent_card(base_url)
    handler = DefaultRequestHandler(agent_executor=ScenarioExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    routes = [
        *create_agent_card_routes(agent_card=card),
        *create_jsonrpc_routes(request_handler=handler, rpc_url="/", enable_v0_3_compat=True),
    ]
    middleware = [Middleware(ApiKeyMiddleware, api_key=api_key)] if api_key else []
    return Starlette(routes=routes, middleware=middleware)
