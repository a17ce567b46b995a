"""Goose's ``subagent`` tool: an isolated agent with its own instructions, tools and settings.

The child shares the parent's provider (or the same provider with another model), gets a
subset of the parent's tools (never ``subagent`` itself: no nesting) and the parent's
permissions, and returns the last answer as a summary, or its whole transcript on request.
Its approval requests surface in the parent's stream, so the user answers them where they look.
Several calls in one turn run in parallel, except repeats of a sub-recipe that asks to be
``sequential_when_repeated``.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from nb_agent.errors import UsageError
from nb_agent.events import ApprovalRequested, Subtask
from nb_agent.tool_contract import Tool, ToolOutput, function_tool

if TYPE_CHECKING:
    from nb_agent.agent.loop import Agent
    from nb_agent.agent.recipes import Recipe

SUBAGENT = "subagent"
DEFAULT_SUBAGENT_TURNS = 25


class SubagentSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    max_turns: int | None = None
    temperature: float | None = None


def subagent_tool(parent: Agent, recipe: Recipe | None = None) -> Tool:
    """The ``subagent`` tool of ``parent``; ``recipe`` supplies the sub-recipes it may run."""
    locks: dict[str, asyncio.Lock] = {}
    names = [s.name for s in recipe.sub_recipes] if recipe is not None else []

    async def subagent(
        instructions: str | None = None,
        subrecipe: str | None = None,
        parameters: dict[str, str] | None = None,
        settings: SubagentSettings | None = None,
        summary: bool = True,
        extensions: list[str] | None = None,
    ) -> ToolOutput:
        """Run a task in an isolated subagent and get its answer back."""
        task, child_recipe, sequential = instructions, None, False
        if subrecipe is not None:
            if recipe is None:
                raise UsageError("there are no sub-recipes here; pass instructions instead")
            child_recipe = recipe.load_sub_recipe(subrecipe, parameters or {})
            sequential = recipe.sub_recipe(subrecipe).sequential_when_repeated
            task = child_recipe.prompt or instructions or "Do the task in your instructions."
        if not task:
            return ToolOutput("give the subagent instructions (or a subrecipe)", is_error=True)
        if sequential and subrecipe is not None:
            async with locks.setdefault(subrecipe, asyncio.Lock()):
                return await _run_child(parent, task, child_recipe, settings, summary, extensions)
        return await _run_child(parent, task, child_recipe, settings, summary, extensions)

    doc = (
        "Run a task in an isolated subagent with its own context; it returns a summary of its work "
        "(summary=false: its whole transcript). Several subagent calls in one answer run in parallel."
    )
    if names:
        doc += f" Sub-recipes you can run by name: {', '.join(names)}."
    return function_tool(subagent, name=SUBAGENT, description=doc, risk="read")


async def _run_child(
    parent: Agent,
    task: str,
    recipe: Recipe | None,
    settings: SubagentSettings | None,
    summary: bool,
    extensions: list[str] | None,
) -> ToolOutput:
    from nb_agent.agent.loop import Agent
    from nb_agent.agent.settings import AgentSettings

    s = settings or SubagentSettings()
    rs = recipe.settings if recipe is not None and recipe.settings is not None else None
    model = s.model or (rs.model if rs else None)
    provider = parent.provider.with_model(model) if model else parent.provider
    tools = [t for name, t in parent.tools.items() if name != SUBAGENT]
    if extensions is not None:
        tools = [t for t in tools if t.extension in extensions]
    instructions = parent.settings.instructions
    if recipe is not None and recipe.instructions:
        instructions = recipe.instructions
    child = Agent(
        provider,
        tools=tools,
        permissions=parent.permissions.child(),
        settings=AgentSettings(
            instructions=instructions,
            max_turns=s.max_turns or (rs.max_turns if rs and rs.max_turns else DEFAULT_SUBAGENT_TURNS),
            temperature=s.temperature if s.temperature is not None else (rs.temperature if rs else None),
            retry=parent.settings.retry,
        ),
        mode_label="subagent",
        owns_provider=provider is not parent.provider,
    )
    sub_id = uuid.uuid4().hex[:12]
    name = (recipe.title if recipe is not None else None) or task.strip().splitlines()[0][:60]
    parent._emit(Subtask(id=sub_id, state="working", name=name))
    texts: list[str] = []
    last: list[str] = []
    failed: str | None = None
    try:
        async for ev in child.stream(task):
            if ev.type == "text_delta":
                texts.append(ev.delta)
                last.append(ev.delta)
            elif ev.type == "tool_call":
                last = []  # the summary is the answer after the last tool call
                texts.append("\n")
            elif isinstance(ev, ApprovalRequested):
                parent.delegate(ev.tool_call_id, child)
                parent._emit(ev)  # the user answers it where they look
            elif ev.type == "error":
                failed = ev.message
    except asyncio.CancelledError:
        parent._emit(Subtask(id=sub_id, state="canceled", name=name))
        await child.cancel()
        raise
    finally:
        await child.aclose()
    parent._emit(Subtask(id=sub_id, state="failed" if failed else "completed", name=name))
    parent.accumulate(child)
    if failed:
        so_far = f"\nIts output so far:\n{''.join(texts)}" if texts else ""
        return ToolOutput(f"the subagent failed: {failed}{so_far}", is_error=True)
    answer = "".join(last if summary else texts).strip()
    return ToolOutput(answer or "(the subagent gave no answer)")
