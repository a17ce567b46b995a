"""The Jupyter server's endpoint for inline completions: ``POST {base_url}nb-agent/completion``.

Why here, and not in the kernel: the kernel's shell channel runs one request at a time, and a cell
that runs for a minute would hold every completion asked meanwhile, and the kernel's own Python
would compete with the model for the same interpreter. A Jupyter server extension is how Jupyter
packages give a page a service of their own (jupyter-ai's completions, jupyter-lsp, jupyterlab-git
do the same): it runs beside the kernels in the server's process, the page reaches it through the
server's REST API, and it answers whatever the kernel is doing. The kernel's context (its variables,
``nb_agent.kernel.summary``) comes with each request from the page, which the kernel tells after
every execution.

Authentication and authorization are the server's own, as for every server API: the handler is a
``jupyter_server`` :class:`~jupyter_server.base.handlers.APIHandler`, so a request needs the server's
token or login cookie (``@tornado.web.authenticated``), a cookie-authenticated ``POST`` needs the
XSRF token (checked by ``JupyterHandler`` before the method runs; JupyterLab's
``ServerConnection.makeRequest`` sends it), an ``Origin`` other than the server's is refused
(``APIHandler.prepare``), and the server's authorizer decides (``@authorized``, resource
:data:`AUTH_RESOURCE`; JupyterHub's singleuser authorizer included). Model credentials are read
from the server's environment (``nb_agent.completion.models``), never taken from the request.

The answer streams as newline-delimited JSON, one event a line, each flushed as it is made:
``{"type": "model", model, provider, local, where}`` first, then ``{"type": "text", "text"}`` for
each piece of the cleaned completion, then ``{"type": "end", "timings"}``, or ``{"type": "error",
"message"}`` / ``{"type": "off", "message"}`` (a remote model the user has not allowed). A request
from the same page (``session``) cancels the one before it: the user typed on. A page that goes
away cancels its request at the next write. ``GET {base_url}nb-agent/completion/model?model=&remote=``
says which model would complete, for the status item.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado.iostream import StreamClosedError

from nb_agent.completion.engine import Timings, refuse_remote, stream_completion
from nb_agent.completion.models import Choices, CompletionModel, parse_setting
from nb_agent.completion.request import CompletionRequest
from nb_agent.errors import NbAgentError, UsageError

log = logging.getLogger("nb_agent.completion")

AUTH_RESOURCE = "nb_agent"
MAX_BODY = 1024 * 1024  # bytes of one request: the cell, the cells above, the kernel's summary
MAX_SESSIONS = 256  # pages with a request in flight (their newest only)

CHOICES = Choices()
_inflight: dict[str, asyncio.Future[None]] = {}  # each page's request in flight


def _setting(value: object) -> str:
    if not isinstance(value, str) or len(value) > 200:
        raise UsageError("model must be a string such as auto, local, openai:MODEL")
    parse_setting(value)  # a setting no model answers to is the request's fault
    return value or "auto"


async def _choose(setting: str) -> CompletionModel:
    """The model for ``setting``: at once if chosen before, else on a thread (choosing may look for a
    local server or list its models)."""
    known = CHOICES.known(setting)
    return known if known is not None else await asyncio.to_thread(CHOICES.get, setting)


class CompletionHandler(APIHandler):
    """``POST``: one completion, streamed."""

    auth_resource = AUTH_RESOURCE

    def initialize(self) -> None:
        self._closed = False
        self._task: asyncio.Future[None] | None = None

    def on_connection_close(self) -> None:
        self._closed = True
        task = getattr(self, "_task", None)
        if task is not None:
            task.cancel()

    async def _event(self, event: dict[str, Any], *, flush: bool = True) -> None:
        self.write(json.dumps(event, ensure_ascii=False) + "\n")
        if flush:
            await self.flush()

    @tornado.web.authenticated
    @authorized
    async def post(self) -> None:
        if len(self.request.body) > MAX_BODY:
            raise tornado.web.HTTPError(413, f"a completion request is at most {MAX_BODY:,} bytes")
        try:
            body = json.loads(self.request.body)
            request = CompletionRequest.from_json(body)
            setting = _setting(body.get("model", "auto"))
            session = str(body.get("session") or "")[:100]
        except (ValueError, UsageError) as exc:
            raise tornado.web.HTTPError(400, str(exc)) from None
        self.set_header("Content-Type", "application/x-ndjson; charset=utf-8")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")  # a proxy in front (JupyterHub's nginx) must not hold it
        # timed from the request's first byte (tornado's start time): the server's parsing and auth count too
        timings = Timings(received=time.perf_counter() - self.request.request_time())
        task = asyncio.ensure_future(self._answer(request, setting, body.get("remote") is True, timings))
        self._task = task
        previous = _inflight.pop(session, None) if session else None
        if previous is not None:
            previous.cancel()  # the same page asked again: the user typed on
        if session:
            if len(_inflight) >= MAX_SESSIONS:
                _inflight.pop(next(iter(_inflight))).cancel()
            _inflight[session] = task
        try:
            await asyncio.wait([task])
        finally:
            task.cancel()  # this handler itself was cancelled (the server stopping): so is the model
            if session and _inflight.get(session) is task:
                del _inflight[session]
        if task.cancelled():
            if not self._closed:
                await self._event({"type": "end", "cancelled": True})
            return
        if isinstance(task.exception(), StreamClosedError):
            return  # the page went away mid-answer
        task.result()

    async def _answer(self, request: CompletionRequest, setting: str, remote: bool, timings: Timings) -> None:
        try:
            model = await _choose(setting)
        except UsageError as exc:
            await self._event({"type": "error", "message": str(exc)})
            return
        await self._event({"type": "model", **model.describe()}, flush=False)  # goes with the first text
        try:
            refuse_remote(model, remote)
        except UsageError as exc:
            await self._event({"type": "off", "message": str(exc)})
            return
        try:
            async for text in stream_completion(request, model, timings):
                await self._event({"type": "text", "text": text})
        except NbAgentError as exc:
            log.info("completion failed: %s", exc)
            await self._event({"type": "error", "message": str(exc)})
            return
        await self._event({"type": "end", "timings": timings.report()})


class ModelHandler(APIHandler):
    """``GET``: which model would complete, for the status item (it may look for a local server)."""

    auth_resource = AUTH_RESOURCE

    @tornado.web.authenticated
    @authorized
    async def get(self) -> None:
        remote = self.get_argument("remote", "false").lower() == "true"
        try:
            model = await _choose(_setting(self.get_argument("model", "auto")))
        except UsageError as exc:
            self.finish({"model": None, "allowed": False, "message": str(exc)})
            return
        allowed = model.local or remote
        message = "" if allowed else "remote models are not allowed (the setting Allow remote models)"
        self.finish({**model.describe(), "allowed": allowed, "message": message})


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Jupyter server calls this at start (``nb_agent._jupyter_server_extension_points``)."""
    base = serverapp.web_app.settings["base_url"]
    serverapp.web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base, "nb-agent", "completion"), CompletionHandler),
            (url_path_join(base, "nb-agent", "completion", "model"), ModelHandler),
        ],
    )
    serverapp.log.info("nb-agent: inline completions at %s", url_path_join(base, "nb-agent", "completion"))


__all__ = ["AUTH_RESOURCE", "CompletionHandler", "ModelHandler"]
