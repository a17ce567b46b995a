"""Inline completions: ghost text in notebook cells, from any of nb-agent's models, local by default.

The page's extension (labextension/src/completer/) asks the Jupyter server's endpoint
(:mod:`nb_agent.completion.server`) at each pause in typing; the kernel's variables reach the page
after each execution (:mod:`nb_agent.kernel.summary_push`) and travel with the request. Here: the
request (``request``), the prompt (``prompt``), the model (``models``), how each model is asked
(``backends``), the answer cleaned (``clean``) and the whole as functions (``engine``).
"""

from nb_agent.completion.engine import acomplete, complete, stream_completion
from nb_agent.completion.request import CompletionRequest

__all__ = ["CompletionRequest", "acomplete", "complete", "stream_completion"]
