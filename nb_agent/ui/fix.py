"""``%agent --fix`` (or ``%agent fix``): a run that fixes the cell that failed.

The prompt is built here from the kernel's record of the failure (``nb_agent.kernel.failures``):
the cell's source, its traceback (bounded, secrets masked) and the variables it reads, and what
to do with it. With the notebook workspace (JupyterLab, Notebook 7) the agent proposes the fix as
``edit_cell`` on that cell: the approval shows the diff, and allowed, the cell runs (the run is
told it fixes that cell, ``RunInfo.fixing``). Without one (VS Code, a headless run) ``edit_cell`` is
not offered (it could only fail or be denied there): the agent answers with the corrected cell as
code, and a headless run ends by printing the change as a diff of the cell. The same
prompt goes to the built-in agent and to ACP agents (they get the workspace tools over MCP).
"""

from __future__ import annotations

import re
from collections.abc import Coroutine
from typing import Any

from nb_agent.conversation.result import AgentResult
from nb_agent.errors import UsageError
from nb_agent.kernel.failures import Failure, failures, relevant_variables
from nb_agent.kernel.workspace import workspace
from nb_agent.render.diff import draw
from nb_agent.render.unseen import FLAG

_CODE = re.compile(r"```(?:python|py|ipython|python3)?[ \t]*\n(.*?)```", re.S)


def is_fix(prompt: str) -> bool:
    """``%agent fix``: the prompt is the one word (``%agent fix the plot`` is an ordinary prompt)."""
    return prompt.strip().lower() == "fix"


def find(cell_id: str | None) -> Failure:
    failure = failures().find(cell_id)
    if failure is None:
        if cell_id is None:
            raise UsageError("no cell has failed in this kernel yet: nothing to fix")
        raise UsageError(
            f"cell {cell_id} has not failed in this kernel (it ran cleanly since, or failed before a restart: "
            "run it again, then ask)"
        )
    return failure


def prompt(failure: Failure, namespace: dict[str, Any], extra: str = "") -> str:
    """What the agent is asked: the failure, the variables it reads, and how to answer."""
    where = f"cell {failure.cell_id}" if failure.cell_id else "the cell"
    count = f" (In [{failure.execution_count}])" if failure.execution_count is not None else ""
    parts = [f"The notebook {where}{count} failed with {failure.error}. Fix it: change only what the error needs."]
    if extra.strip():
        parts.append(f"The user adds: {extra.strip()}")
    parts.append(f"The cell's source:\n```python\n{failure.source}\n```")
    parts.append(f"The traceback:\n```\n{failure.traceback}\n```")
    variables = relevant_variables(failure, namespace)
    if variables:
        shown = "\n".join(f"{name} = {summary}" for name, summary in variables)
        parts.append(f"The variables it uses, as the kernel holds them now:\n```\n{shown}\n```")
    if failure.cell_id and workspace().linked():  # the same test as the edit_cell tool's offer
        parts.append(
            f"Propose the fix with the edit_cell tool: cell_id {failure.cell_id!r} and the whole corrected source. "
            "The user sees your change as a diff and approves it; then the cell runs and you get its output. "
            "Say in one sentence what you changed."
        )
    else:
        parts.append(
            "Answer with the whole corrected cell in one ```python code block, and one sentence on what you "
            "changed. Do not run it: the user will."
        )
    return "\n\n".join(parts)


def proposal(result: AgentResult, failure: Failure) -> str | None:
    """The change the run proposes to the failed cell, as a unified diff of it (headless runs print it):
    from an ``edit_cell`` call on it, else from the answer's first Python code block."""
    new: str | None = None
    for call in result.tool_calls:
        args = call.arguments
        if call.name.endswith("edit_cell") and args.get("cell_id") == failure.cell_id:
            new = args.get("source") if isinstance(args.get("source"), str) else new
    if new is None:
        match = _CODE.search(result.text)
        new = match.group(1) if match else None
    if new is None:
        return None
    name = f"cell {failure.cell_id}" if failure.cell_id else "the cell"
    # the cards' rule (render.diff): the lines Python reads (a lone CR ends one), hidden characters escaped
    drawn = draw(failure.source, new, (name, f"{name} (fixed)"), rule="python", limit=None)
    text = "".join(f"{line}\n" for line in drawn.lines) + (f"⚠ {FLAG}\n" if drawn.unseen else "")
    return f"Proposed change to {name}:\n{text}" if text else f"The proposed {name} is the same as the failed one."


async def reporting(run: Coroutine[Any, Any, AgentResult], failure: Failure) -> AgentResult:
    """A headless fix run, then the change it proposes printed as a diff."""
    result = await run
    print("\n" + (proposal(result, failure) or "The agent proposed no change to the cell."))
    return result


__all__ = ["find", "is_fix", "prompt", "proposal", "reporting"]
