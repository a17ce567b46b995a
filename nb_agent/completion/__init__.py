"""Inline completions: ghost text in notebook cells, from any of nb-agent's models, local by default.

The page's extension (labextension/src/completer/) asks the Jupyter server's endpoint
(:mod:`nb_agent.completion.server`) at each pause in typing; the kernel's variables reach the page
after each execution (:mod:`nb_agent.kernel.summary_push`) and travel with the request. Here: the
request (``request``), the prompt (``prompt``), the model (``models``), how each model is asked
(``backends``), the answer cleaned (``clean``) and the whole as functions (``engine``).
"""

from typing import Any

from nb_agent.completion.request import CompletionRequest

__all__ = ["CompletionRequest", "acomplete", "complete", "stream_completion"]


def __getattr__(name: str) -> Any:
    """The engine on first use: importing it loads the providers (50 ms), which ``%load_ext`` and a
    submodule's import (the request, the prompt) do not need."""
    if name in ("acomplete", "complete", "stream_completion"):
        from nb_agent.completion import engine

        return getattr(engine, name)
    raise AttributeError(name)
