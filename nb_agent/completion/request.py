"""One inline completion request, as the page (or a caller of ``nb_agent.complete``) sends it, with
every part bounded: a request comes from a browser page and is read as hostile input.

The page sends the cell's text around the cursor, the code cells above it, the kernel's summary (the
kernel pushed it to the page after its last execution: ``nb_agent.kernel.summary_push``) and the
notebook's import lines. Outputs are never sent: nothing of a cell's rich data reaches the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nb_agent.errors import UsageError

# What one request may carry at most (characters): the page sends more than the prompt keeps
# (prompt.py cuts to its budgets), and anything past these is refused rather than read.
MAX_TEXT = 100_000  # the cell's prefix or suffix
MAX_CELLS = 200  # cells above
MAX_CONTEXT = 20_000  # the kernel's summary
MAX_IMPORTS = 200  # import lines
MAX_LINE = 500  # one import line
DEFAULT_MAX_TOKENS = 64
MAX_TOKENS = 512
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.\- ]{1,40}")


@dataclass(frozen=True)
class CompletionRequest:
    """What to complete.

    Args:
        prefix: the cell's text before the cursor.
        suffix: the cell's text after the cursor.
        above: the sources of the code cells above this one, top to bottom.
        context: the kernel's summary (names, types, shapes, columns; never values).
        imports: the notebook's import lines (all its code cells, those below included).
        language: the cell's language (``python``, ``r``, ``julia`` ...).
        max_tokens: at most this many tokens are generated.
    """

    prefix: str
    suffix: str = ""
    above: tuple[str, ...] = ()
    context: str = ""
    imports: tuple[str, ...] = ()
    language: str = "python"
    max_tokens: int = DEFAULT_MAX_TOKENS

    def __post_init__(self) -> None:
        for name in ("prefix", "suffix"):
            if len(getattr(self, name)) > MAX_TEXT:
                raise UsageError(f"{name} is over {MAX_TEXT:,} characters")
        if len(self.above) > MAX_CELLS or sum(len(c) for c in self.above) > MAX_TEXT * 2:
            raise UsageError(f"too many cells above (at most {MAX_CELLS}, {MAX_TEXT * 2:,} characters)")
        if len(self.context) > MAX_CONTEXT:
            raise UsageError(f"the kernel summary is over {MAX_CONTEXT:,} characters")
        if len(self.imports) > MAX_IMPORTS or any(len(line) > MAX_LINE for line in self.imports):
            raise UsageError(f"too many import lines (at most {MAX_IMPORTS} of {MAX_LINE} characters)")
        if not _LANGUAGE.fullmatch(self.language):
            raise UsageError(f"unknown language {self.language[:40]!r}")
        if not 1 <= self.max_tokens <= MAX_TOKENS:
            raise UsageError(f"max_tokens must be between 1 and {MAX_TOKENS}")

    @property
    def line_prefix(self) -> str:
        """The cursor's line up to the cursor."""
        return self.prefix.rsplit("\n", 1)[-1]

    @property
    def line_suffix(self) -> str:
        """The cursor's line after the cursor."""
        return self.suffix.split("\n", 1)[0]

    @classmethod
    def from_json(cls, body: object) -> CompletionRequest:
        """A request from the page's JSON; :class:`UsageError` says what is wrong with it."""
        if not isinstance(body, dict):
            raise UsageError("a completion request is a JSON object")

        def text(name: str, default: str = "") -> str:
            value = body.get(name, default)
            if not isinstance(value, str):
                raise UsageError(f"{name} must be a string")
            return value

        def strings(name: str) -> tuple[str, ...]:
            value = body.get(name, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise UsageError(f"{name} must be a list of strings")
            return tuple(value)

        tokens = body.get("max_tokens", DEFAULT_MAX_TOKENS)
        if not isinstance(tokens, int) or isinstance(tokens, bool):
            raise UsageError("max_tokens must be a whole number")
        return cls(
            prefix=text("prefix"),
            suffix=text("suffix"),
            above=strings("above"),
            context=text("context"),
            imports=strings("imports"),
            language=text("language", "python") or "python",
            max_tokens=tokens,
        )


__all__ = ["DEFAULT_MAX_TOKENS", "MAX_TOKENS", "CompletionRequest"]
