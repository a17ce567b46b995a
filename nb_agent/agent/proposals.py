"""Code proposals: for models without tool calling, a Python block in the answer becomes a ``run_code`` call.

Small local models often answer "run this" with a fenced block instead of a tool call. The loop
offers the first block worth running as a ``run_code`` call (which the user approves like any
other), at most ``limit`` times per run and never the same code twice: a model that repeats
itself is going round in circles.
"""

from __future__ import annotations

import ast
import re
import uuid

from nb_agent.agent.messages import Message, ToolCallPart

RUN_CODE = "run_code"
_FENCE = re.compile(r"```([\w+-]*)[ \t]*\n(.*?)```", re.DOTALL)
_PYTHON_TAGS = {"python", "py", "python3", "ipython"}


def code_proposal(message: Message, proposed: list[str], limit: int) -> Message:
    """``message`` with its first runnable block added as a ``run_code`` call (recorded in ``proposed``),
    or unchanged when it has none, repeats an earlier proposal, or ``limit`` is reached."""
    code = next((c for tag, c in _FENCE.findall(message.text) if is_code(tag, c)), None)
    if code is None:
        return message
    if code in proposed or len(proposed) >= limit:
        return message
    proposed.append(code)
    call = ToolCallPart(id=f"proposal_{uuid.uuid4().hex[:12]}", name=RUN_CODE, arguments={"code": code})
    return message.model_copy(update={"content": [*message.content, call]})


def is_code(tag: str, code: str) -> bool:
    """A block worth running: tagged Python, or untagged Python that does something (not an
    echoed output such as ``15`` or ``Hello World``)."""
    if not code.strip():
        return False
    if tag:
        return tag.lower() in _PYTHON_TAGS
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    return any(
        isinstance(n, ast.Call | ast.Assign | ast.AugAssign | ast.Import | ast.ImportFrom) for n in ast.walk(tree)
    )
