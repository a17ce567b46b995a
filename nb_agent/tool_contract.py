"""Tools the built-in agent can call: Python callables described by a JSON schema.

The schema comes from the callable's type hints through pydantic, so arguments are validated
(and coerced) the same way they are described to the model. ``risk`` feeds the permission
check: in ``approve`` mode anything that writes or executes needs the user's confirmation.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

Risk = Literal["read", "write", "execute"]

# The id of the tool call a tool is running for, set by the approval gate around the call: a tool
# that marks what it changed (a notebook cell's provenance) can name the call that did it.
CURRENT_CALL: ContextVar[str | None] = ContextVar("nb_agent_tool_call", default=None)


@dataclass
class ToolOutput:
    """What a tool returns to the model (text; images as base64 parts)."""

    content: str
    is_error: bool = False
    images: list[tuple[str, str]] = field(default_factory=list)  # (mime_type, base64 data)


@dataclass(frozen=True)
class Preview:
    """What an approval shows of a call beyond its arguments: a question, and the edits at stake as
    ``{"path", "old_text", "new_text", "truncated"}`` (``old_text`` ``None`` for a new file)."""

    text: str
    diffs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any]], Awaitable[ToolOutput]]
    risk: Risk = "read"
    extension: str | None = None  # where it came from (an MCP server's name)
    # the approval's text for these arguments (e.g. a diff of what an edit changes); None: the default
    preview: Callable[[dict[str, Any]], Awaitable[str | Preview | None]] | None = None
    # why these arguments cannot work, seen without running anything (code reading a name nothing
    # defines); None: nothing seen. Advice for a provider that samples calls (the embedded model
    # draws again), never a gate: a proposed call still goes through the approval.
    check: Callable[[dict[str, Any]], str | None] | None = None
    # the names its code can use, as plain data (``kernel.code_check.code_vocabulary``), for a
    # provider that constrains the code it samples to them (the embedded model); None: unknown
    vocabulary: Callable[[], dict[str, Any]] | None = None
    # whether it can work here now: one that needs what only some front ends have (the notebook page)
    # is offered to the model only where it can; None: always. The built-in agent asks before each
    # model call; a tool list fetched once (MCP's tools/list) keeps it, and its call says why it failed
    available: Callable[[], bool] | None = None

    def usable(self) -> bool:
        """Whether to offer it now (``available``: what the front end can do)."""
        return self.available is None or self.available()

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


class ToolArgumentsError(ValueError):
    """The model's arguments do not fit the tool's schema; the message goes back to the model."""


def _to_output(value: Any) -> ToolOutput:
    if isinstance(value, ToolOutput):
        return value
    if isinstance(value, str):
        return ToolOutput(value)
    if isinstance(value, BaseModel):
        return ToolOutput(value.model_dump_json())
    try:
        return ToolOutput(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return ToolOutput(repr(value))


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    risk: Risk = "read",
) -> Any:
    """Make a :class:`Tool` of a function (sync or async); usable as ``@tool`` or ``@tool(risk=...)``."""

    def wrap(f: Callable[..., Any]) -> Tool:
        return function_tool(f, name=name, description=description, risk=risk)

    return wrap(fn) if fn is not None else wrap


def function_tool(
    fn: Callable[..., Any], *, name: str | None = None, description: str | None = None, risk: Risk = "read"
) -> Tool:
    sig = inspect.signature(fn)
    hints = inspect.get_annotations(fn, eval_str=True)
    fields: dict[str, Any] = {}
    for pname, param in sig.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(pname, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (annotation, default)
    model = create_model(f"{fn.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    doc = inspect.getdoc(fn) or ""

    async def run(arguments: dict[str, Any]) -> ToolOutput:
        try:
            parsed = model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolArgumentsError(_validation_message(exc)) from None
        kwargs = {k: getattr(parsed, k) for k in fields}
        if inspect.iscoroutinefunction(fn):
            result = await fn(**kwargs)
        else:
            result = await asyncio.to_thread(fn, **kwargs)
        return _to_output(result)

    return Tool(
        name=name or fn.__name__,
        description=description or doc.split("\n\n")[0].strip() or fn.__name__,
        parameters=schema,
        run=run,
        risk=risk,
    )


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "arguments"
        parts.append(f"{loc}: {err['msg']}")
    return "invalid arguments: " + "; ".join(parts)
