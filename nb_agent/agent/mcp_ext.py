"""MCP servers as Goose-style extensions: connect with the mcp SDK's client, list tools, call them.

One :class:`McpExtension` per server. Its connection lives in a dedicated background task that
enters (and later exits) the SDK's ``Client`` and transport context managers: they hold anyio task
groups and cancel scopes, which must be entered and exited in one task, and a transport failure
inside them must not cancel whichever agent task happened to open the extension.

Tool calls run in the caller's task, concurrently. That is safe with mcp 2.x: ``Client.call_tool``
ends in ``JSONRPCDispatcher.send_raw_request``, which keeps all per-request state (an id in the
pending map, a private one-slot memory stream, its own timeout cancel scope opened and closed
within the call) and only *sends* on the shared write stream; it never touches the session's task
groups, which stay with the owning task.

Failures during a call (timeout, the server dying, a protocol error) come back as
``ToolOutput(is_error=True)`` so the agent can show them to the model; only a server that cannot
be started or reached raises, as :class:`~nb_agent.errors.AgentConnectError`.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import shlex
import tempfile
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field
from typing import IO, Any, Literal, TextIO, cast

import anyio
import httpx2
from mcp.client import Client, Transport
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    Implementation,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from mcp.types import Tool as McpTool
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from nb_agent.agent.mcp_questions import Ask, callback
from nb_agent.errors import AgentConnectError, UsageError
from nb_agent.tool_contract import Risk, Tool, ToolOutput
from nb_agent.version import __version__

logger = logging.getLogger(__name__)

_STDERR_TAIL = 2000  # characters of a stdio server's stderr quoted in error messages
_CALL_GRACE = 5.0  # the SDK times out the wait for the answer; this bounds the rest (a stuck write)
_MAX_TOOL_PAGES = 100  # a paginator that never ends must not hang the connect
# Connecting may take longer than one call is allowed to (npx downloading a package, a slow
# first import): a short per-call timeout must not fail the start.
_MIN_CONNECT_TIMEOUT = 30.0


@dataclass
class McpServerSpec:
    """One MCP server, as a Goose extension entry describes it (``type`` ``stdio`` or ``streamable_http``)."""

    name: str
    type: Literal["stdio", "streamable_http"]
    cmd: str | None = None
    args: list[str] = field(default_factory=list)
    envs: dict[str, str] = field(default_factory=dict)
    uri: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = 300.0  # seconds for each tool call; connecting gets at least 30

    def connect_timeout(self) -> float:
        return max(self.timeout, _MIN_CONNECT_TIMEOUT)

    def target(self) -> str:
        """What to show in messages: the command line or the URL."""
        if self.type == "stdio":
            return shlex.join([self.cmd or "", *self.args])
        return self.uri or ""


def tool_risk(annotations: ToolAnnotations | None) -> Risk:
    """Map MCP tool annotations to the permission check's risk.

    ``readOnlyHint`` is the only hint that lowers the risk to ``read`` (no confirmation needed).
    An explicit ``destructiveHint`` (true or false) means the server describes the tool as one
    that changes its environment: ``write``. A tool without either could do anything (the spec's
    defaults are destructive and open-world), so it gets the strictest class, ``execute``.
    The hints are the server's word; trusting them is trusting the extension the user configured.
    """
    if annotations is None:
        return "execute"
    if annotations.read_only_hint:
        return "read"
    if annotations.destructive_hint is not None:
        return "write"
    return "execute"


def result_to_output(result: CallToolResult) -> ToolOutput:
    """Turn an MCP tool result into what the model sees: text, images, the error flag.

    Text blocks are joined; images keep their MIME type; structured content becomes JSON text
    only when there is no text (servers usually send both, the text being the same data).
    """
    texts: list[str] = []
    images: list[tuple[str, str]] = []
    for block in result.content:
        if isinstance(block, TextContent):
            texts.append(block.text)
        elif isinstance(block, ImageContent):
            images.append((block.mime_type, block.data))
        elif isinstance(block, AudioContent):
            texts.append(f"[audio ({block.mime_type}) not shown]")
        elif isinstance(block, EmbeddedResource):
            res = block.resource
            if isinstance(res, TextResourceContents):
                texts.append(res.text)
            elif isinstance(res, BlobResourceContents) and (res.mime_type or "").startswith("image/"):
                images.append((res.mime_type or "image/png", res.blob))
            else:
                texts.append(f"[binary resource {res.uri} ({res.mime_type or 'unknown type'}) not shown]")
        elif isinstance(block, ResourceLink):
            texts.append(f"[resource {block.name}: {block.uri}]")
    content = "\n".join(texts)
    if not texts and result.structured_content is not None:
        content = json.dumps(result.structured_content, ensure_ascii=False, default=str)
    if not content and not images and result.is_error:
        content = "the tool failed without a message"
    return ToolOutput(content, is_error=result.is_error, images=images)


class McpExtension:
    """One connected MCP server; an async context manager.

    ``tools`` (filled on entry) are named ``<extension>__<tool>`` like Goose's, carry
    ``extension=spec.name`` and can be run from any task, concurrently, while it is open.
    """

    def __init__(self, spec: McpServerSpec) -> None:
        if spec.type not in ("stdio", "streamable_http"):
            raise UsageError(f"extension {spec.name!r}: unknown type {spec.type!r}")
        if spec.type == "stdio" and not spec.cmd:
            raise UsageError(f"extension {spec.name!r}: a stdio extension needs a cmd")
        if spec.type == "streamable_http" and not spec.uri:
            raise UsageError(f"extension {spec.name!r}: a streamable_http extension needs a uri")
        self.spec = spec
        self.tools: list[Tool] = []
        self.instructions: str | None = None  # the server's advice for the system prompt, if any
        self._client: Client | None = None
        self._runner: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._scope: anyio.CancelScope | None = None
        self._stderr: IO[str] | None = None
        self._failure: str | None = None  # why a once-working connection ended
        self.ask: Ask | None = None  # the running agent's way to ask the user (the server's elicitation)

    async def __aenter__(self) -> McpExtension:
        if self._runner is not None:
            raise UsageError(f"extension {self.spec.name!r} is already open")
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._ready = ready
        self._runner = asyncio.create_task(self._run(ready), name=f"mcp-extension:{self.spec.name}")
        try:
            async with asyncio.timeout(self.spec.connect_timeout()):
                await asyncio.shield(ready)
        except TimeoutError:
            note = self._stderr_note()  # before the shutdown closes the file
            await self._shutdown(abort=True)
            raise AgentConnectError(
                f"extension {self.spec.name!r}: the MCP server ({self.spec.target()}) did not finish "
                f"connecting within {self.spec.connect_timeout():g}s{note}"
            ) from None
        except BaseException:
            # A connect error (already an AgentConnectError) or our own cancellation.
            await self._shutdown(abort=True)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._shutdown(abort=False)

    async def _shutdown(self, *, abort: bool) -> None:
        """Ask the owning task to close the connection and wait for it (shielded: it must finish)."""
        runner = self._runner
        if runner is None:
            return
        self._stop.set()
        if abort and self._scope is not None:
            self._scope.cancel()
        await asyncio.shield(runner)
        ready = self._ready
        if ready is not None and ready.done() and not ready.cancelled():
            ready.exception()  # retrieved, so asyncio does not log it as forgotten

    async def _run(self, ready: asyncio.Future[None]) -> None:
        """Own the connection: enter the client, publish the tools, wait for the stop, exit."""
        # Overlaps the server's start; awaited before the first call can need it.
        warm_up = asyncio.ensure_future(asyncio.to_thread(_import_validator))
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                async with AsyncExitStack() as stack:
                    client = await self._connect(stack)
                    listed = await self._list_tools(client)
                    await asyncio.shield(warm_up)
                    self.instructions = client.instructions
                    self.tools = [self._make_tool(t) for t in listed]
                    self._client = client
                    ready.set_result(None)
                    await self._stop.wait()
                    self._client = None
            if not ready.done():
                ready.set_exception(AgentConnectError(f"extension {self.spec.name!r}: connecting was abandoned"))
        except Exception as exc:
            if not ready.done():
                ready.set_exception(self._connect_error(exc))
            else:
                self._failure = _describe(exc)
                logger.warning("MCP extension %r lost its connection: %s", self.spec.name, self._failure)
        finally:
            self._client = None
            with suppress(Exception):  # a thread cannot be cancelled; do not leave it behind
                await asyncio.shield(warm_up)
            if self._stderr is not None:
                self._stderr.close()

    async def _connect(self, stack: AsyncExitStack) -> Client:
        spec = self.spec
        if spec.type == "stdio":
            # A real file, not a pipe: the child can never block on it, and its tail is there to
            # quote when the server fails. (It grows with the server's logging for the session.)
            # Closed by _run's finally, after the error message has quoted it (not by the stack).
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            params = StdioServerParameters(command=spec.cmd or "", args=spec.args, env=spec.envs or None)
            transport: Transport = stdio_client(params, errlog=cast(TextIO, self._stderr))
        else:
            http = httpx2.AsyncClient(
                headers=spec.headers,
                # The read timeout bounds one SSE read, which may wait for a whole tool call.
                timeout=httpx2.Timeout(30.0, read=max(300.0, spec.timeout + _CALL_GRACE)),
            )
            await stack.enter_async_context(http)
            transport = streamable_http_client(spec.uri or "", http_client=http)
        client = Client(
            transport,
            read_timeout_seconds=spec.connect_timeout(),  # the handshake and listing; calls pass their own
            client_info=Implementation(name="nb-agent", version=__version__),
            elicitation_callback=callback(lambda: self.ask, f"the MCP server {spec.name!r}"),
            cache=None,  # tools are listed once per connection; no response cache to reason about
        )
        return await stack.enter_async_context(client)

    @staticmethod
    async def _list_tools(client: Client) -> list[McpTool]:
        tools: list[McpTool] = []
        cursor: str | None = None
        for _ in range(_MAX_TOOL_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _make_tool(self, mcp_tool: McpTool) -> Tool:
        name = mcp_tool.name

        async def run(arguments: dict[str, Any]) -> ToolOutput:
            return await self.call(name, arguments)

        schema = {k: v for k, v in mcp_tool.input_schema.items() if k != "title"}
        annotations = mcp_tool.annotations
        description = mcp_tool.description or mcp_tool.title or (annotations.title if annotations else None) or name
        return Tool(
            name=f"{self.spec.name}__{name}",
            description=description,
            parameters=schema,
            run=run,
            risk=tool_risk(annotations),
            extension=self.spec.name,
        )

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        """Call the server's tool ``tool`` (its own name, unprefixed); never raises for the server's failures."""
        client = self._client
        label = f"{self.spec.name}__{tool}"
        if client is None:
            why = f": {self._failure}" if self._failure else ""
            return ToolOutput(f"extension {self.spec.name!r} is not connected{why}", is_error=True)
        timeout = self.spec.timeout
        try:
            with anyio.fail_after(timeout + _CALL_GRACE):
                result = await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                return self._timeout_output(label, timeout)
            if exc.code == CONNECTION_CLOSED:
                return ToolOutput(
                    f"{label} failed: the MCP server closed the connection (did it exit or crash?)"
                    f"{self._stderr_note()}",
                    is_error=True,
                )
            return ToolOutput(f"{label} failed: the MCP server answered error {exc.code}: {exc.message}", is_error=True)
        except TimeoutError:
            return self._timeout_output(label, timeout)
        except Exception as exc:  # anything else the SDK raises (bad result shape, transport error)
            return ToolOutput(f"{label} failed: {_describe(exc)}", is_error=True)
        return result_to_output(result)

    @staticmethod
    def _timeout_output(label: str, timeout: float) -> ToolOutput:
        return ToolOutput(f"{label} timed out after {timeout:g}s (the call was cancelled)", is_error=True)

    def _connect_error(self, exc: BaseException) -> AgentConnectError:
        leaf = _leaf(exc)
        spec = self.spec
        if spec.type == "stdio" and isinstance(leaf, OSError):
            cause = f"could not start {spec.target()!r}: {leaf.strerror or leaf}"
        elif isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED:
            cause = f"the MCP server ({spec.target()}) closed the connection during the handshake"
        else:
            cause = f"could not connect to the MCP server ({spec.target()}): {_describe(leaf)}"
        err = AgentConnectError(f"extension {spec.name!r}: {cause}{self._stderr_note()}")
        err.__cause__ = leaf
        return err

    def _stderr_note(self) -> str:
        tail = self.stderr_tail()
        return f"; its stderr ends with:\n{tail}" if tail else ""

    def stderr_tail(self, limit: int = _STDERR_TAIL) -> str:
        """The end of a stdio server's stderr so far ("" for HTTP, or once closed)."""
        f = self._stderr
        if f is None or f.closed:
            return ""
        try:
            f.flush()
            fd = f.fileno()
            size = os.fstat(fd).st_size
            start = max(0, size - limit * 4)  # bytes; up to 4 per character
            data = os.pread(fd, size - start, start)
        except (OSError, ValueError):
            return ""
        return data.decode("utf-8", errors="replace")[-limit:].strip()


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups from the SDK's task groups."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)] or list(exc.exceptions)
        exc = inner[0]
    return exc


def _describe(exc: BaseException) -> str:
    leaf = _leaf(exc)
    text = str(leaf).strip()
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


def _import_validator() -> None:
    """Import jsonschema off the event loop (about a second here).

    The SDK imports it lazily, inside the first call of any tool with an output schema, which
    would stall the event loop (and every concurrent call) in the middle of a run.
    """
    for module in ("jsonschema", "referencing.exceptions"):
        with suppress(ImportError):  # the SDK will say so when it needs it
            importlib.import_module(module)
