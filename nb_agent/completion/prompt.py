"""The prompt for one completion, in the two shapes models take it, within fixed budgets.

- Raw text, for a model served with a completion API (the embedded model, llama-server, Ollama,
  vLLM): the notebook written as one script in the percent format (``# %%`` between cells, which
  Jupytext, VS Code and Spyder write, so code models have seen it), headed by the kernel's variables
  and the notebook's imports. With fill-in-the-middle the text after the cursor goes as the suffix;
  without it the model continues the text before the cursor.
- Chat, for a model behind a chat API only (OpenAI, Anthropic): the same parts, the cursor marked,
  and an instruction to answer with the text to insert and nothing else.

Every part is masked by the secrets registry (``nb_agent.secrets``) on its way into the prompt: a
key written in a cell never reaches the model, whatever the page sent.

Budgets are characters (about four to a token): what is nearest the cursor is kept first (the end of
the cell's prefix, the start of its suffix, the cells just above, the variables the cell names), so
a long notebook costs the same as a short one. Everything stable comes first in the raw prompt
(variables, imports, cells above) and the cell last, so a server's prompt cache (llama.cpp keeps the
longest common prefix of the previous prompt) re-reads only what was typed since the last request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nb_agent.completion.request import CompletionRequest
from nb_agent.secrets import redact

CELL_BUDGET = 2000  # the cell before the cursor
ABOVE_BUDGET = 2000  # the cells above, the nearest first
SUFFIX_BUDGET = 800
CONTEXT_BUDGET = 1500  # the kernel's summary
IMPORTS_BUDGET = 600
MARGIN = 256  # characters masked past a budget's cut (longer than any key shape but a PEM block)
CELL_MARK = "%%"
CURSOR = "<CURSOR>"
_COMMENT = {
    **dict.fromkeys(("python", "ipython", "r", "julia", "ruby", "bash", "sh", "perl", "nim", "coconut"), "#"),
    **dict.fromkeys(("sql", "haskell", "lua", "ada"), "--"),
    **dict.fromkeys(("javascript", "typescript", "c", "c++", "cpp", "java", "scala", "go", "rust", "kotlin"), "//"),
    **dict.fromkeys(("matlab", "octave"), "%"),
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

CHAT_SYSTEM = (
    "You are the inline code completion of a Jupyter notebook. You are shown a {language} cell with "
    "the cursor marked " + CURSOR + ". Answer with only the text to insert at the cursor: no "
    "explanation, no Markdown, no code fences, and do not repeat the text before the cursor. Finish "
    "the statement being typed, using the variables, columns and imports listed. If nothing fits, "
    "answer with nothing."
)


def comment(language: str) -> str:
    return _COMMENT.get(language.lower(), "#")


@dataclass(frozen=True)
class Prompt:
    """The parts of one request, cut to their budgets."""

    header: str  # the kernel's variables (as comments) and the imports not already in the text
    above: str  # the cells above, joined in the percent format
    before: str  # the cell up to the cursor
    after: str  # the cell after the cursor
    context: str  # the variables kept, one a line
    imports: str  # the import lines kept

    @property
    def prefix(self) -> str:
        """Everything before the cursor, as one script (a raw prompt, or the FIM prefix)."""
        return self.header + self.above + self.before


def _masked_tail(text: str, budget: int) -> str:
    """The end of ``text`` within ``budget``, its secrets masked. Masked before the cut, with a margin
    longer than a key, so that a key the cut falls inside is masked whole, not left half recognisable."""
    return _tail(redact(text[-(budget + MARGIN) :]), budget)


def _masked_head(text: str, budget: int) -> str:
    return _head(redact(text[: budget + MARGIN]), budget)


def _tail(text: str, budget: int) -> str:
    """The end of ``text`` within ``budget``, cut at a line start where it can be."""
    if len(text) <= budget:
        return text
    cut = text[-budget:]
    newline = cut.find("\n")
    return cut[newline + 1 :] if 0 <= newline < budget // 2 else cut


def _head(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    cut = text[:budget]
    newline = cut.rfind("\n")
    return cut[:newline] if newline > budget // 2 else cut


def _variables(context: str, named: set[str], budget: int) -> list[str]:
    """The summary's lines within ``budget``: those of names the cell uses first, then the newest."""
    lines = [line for line in context.splitlines() if line.strip()]
    first = [line for line in lines if line.split(":", 1)[0].strip() in named]
    rest = [line for line in reversed(lines) if line not in first]
    kept: list[str] = []
    size = 0
    for line in [*first, *rest]:
        if size + len(line) + 1 > budget:
            continue
        kept.append(line)
        size += len(line) + 1
    order = {line: i for i, line in enumerate(lines)}
    return sorted(kept, key=lambda line: order[line])  # in the kernel's order, newest last


def build(request: CompletionRequest) -> Prompt:
    """The request's parts within their budgets."""
    mark = comment(request.language)
    before = _masked_tail(request.prefix, CELL_BUDGET)
    after = _masked_head(request.suffix, SUFFIX_BUDGET)
    cells: list[str] = []
    left = ABOVE_BUDGET
    for source in reversed(request.above):
        if left <= 0:
            break
        piece = _masked_tail(source.rstrip(), left)
        cells.insert(0, piece)
        left -= len(piece) + len(CELL_MARK) + 4
    above = "".join(f"{mark} {CELL_MARK}\n{cell}\n\n" for cell in cells)
    above += f"{mark} {CELL_MARK}\n" if cells else ""
    text = above + before + after
    named = set(_NAME.findall(request.prefix[-CELL_BUDGET:] + request.suffix[:SUFFIX_BUDGET]))
    variables = redact("\n".join(_variables(request.context, named, CONTEXT_BUDGET))).splitlines()
    imports: list[str] = []
    size = 0
    for line in dict.fromkeys(i.strip() for i in request.imports):
        if not line or line in text or size + len(line) + 1 > IMPORTS_BUDGET:
            continue
        imports.append(line)
        size += len(line) + 1
    imports = redact("\n".join(imports)).splitlines()
    header = ""
    if variables:
        header += f"{mark} The kernel holds these variables (name: type, shape, columns and dtypes):\n"
        header += "".join(f"{mark} {line}\n" for line in variables)
    if imports:
        header += "".join(f"{line}\n" for line in imports)
    if header:
        header += "\n"
    return Prompt(header, above, before, after, "\n".join(variables), "\n".join(imports))


def chat(request: CompletionRequest, prompt: Prompt | None = None) -> tuple[str, str]:
    """``(system, user)`` for a chat model."""
    p = prompt or build(request)
    parts = []
    if p.context:
        parts.append(f"Variables in the kernel (name: type, shape, columns and dtypes):\n{p.context}")
    if p.imports:
        parts.append(f"Imports in the notebook:\n{p.imports}")
    if p.above:
        parts.append(f"Cells above, in the percent format:\n{p.above.rstrip()}")
    parts.append(f"The {request.language} cell:\n{p.before}{CURSOR}{p.after}")
    return CHAT_SYSTEM.format(language=request.language), "\n\n".join(parts)


def stops(request: CompletionRequest) -> list[str]:
    """Where a raw completion ends (at most four: OpenAI's completions API takes no more)."""
    mark = comment(request.language)
    out = [f"\n{mark} {CELL_MARK}", "\n```", "\n\n\n"]
    if request.line_suffix.strip():
        out.append("\n")  # in the middle of a line: the rest of that line only
    return out


__all__ = ["CURSOR", "Prompt", "build", "chat", "comment", "stops"]
