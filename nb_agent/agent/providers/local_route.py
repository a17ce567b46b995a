"""Run it now, or propose a cell: the embedded model's own choice, made once per prompt.

Where both ``run_code`` and ``insert_cells`` are offered, the first call turn after a prompt
writes code either way (under ``local_code``'s grammar); what differs is whether the code runs
now or is proposed as a new cell below, for the user to read and run. A word list decided that
before ("propose / write / add ... cell"), and was wrong both ways: it missed "could you put the
plot in a new cell below", "make me a cell for ...", any other language, and fired on "write the
total of each cell's column". Measured (``bench/cell_routing.py``, 24 held-out prompts, 12 each
way): 13 of 24, 2 of the 12 requests for a cell.

So the model is asked, the way a classifier is read off a language model: after a fixed question
("Run it now or put it in a new cell?") following the request, the next-token scores of ``run``
and ``cell`` are compared (one forward pass, no sampling). Two things make a 135M model's answer
usable, both measured on the same held-out prompts:

- **A few worked examples** of the question answered (on requests of their own, none of the
  bench's), as earlier turns: the model copies the form of turns it has just seen far better than
  it follows a description (as with the code examples, ``local_code.EXAMPLES``).
- **Contextual calibration** (Zhao et al., "Calibrate Before Use", https://arxiv.org/abs/2102.09690,
  section 4): the model prefers ``run`` whatever the request (its log-odds were below zero for
  every prompt); the log-odds for an empty request measure that bias, and are subtracted. The
  threshold is then zero, not a number tuned on the prompts it is measured on.

With both: 19 of 24 (raw log-odds: 12 of 24). No request to run was routed to a cell, 7 of the 12
requests for a cell were (the misses: "make me a cell for ...", "I'd like a cell that ..., I'll
run it myself", "Prepare a cell below ...", "Can you set up a new cell ...", "Leave the code ...
in a cell"). The last two examples (a column added, an error fixed: both run) were added after a
first measurement with the six others alone: 20 of 24, but "Add a column price to sales ..." and
"My last cell failed ... Fix it and run it." (two of bench/offline_tasks.py's tasks) went to a
cell, and a request to run that proposes a cell instead answers nothing, where a request for a
cell that runs still shows the code, under approval. Two more cell examples, or the mean of the
odds under two wordings of the question, caught one to three more requests for a cell but sent
one to three of the offline tasks' requests to run to a cell. On those 15 task prompts: 14 right
(the word list: 14), the miss "Could you put a bar chart ... in a new cell below?" (odds -0.19).

The prompt is its own short conversation, not the code turn's (whose examples are all code run
now, and which holds tool results): one question, the same for every notebook. Its system and
examples (about 300 tokens) are read again at each prompt, since the code turn's prompt takes
their place in llama.cpp's cache: a decision costs 1.2 s then (0.1 s warm; 2 shared cores).

No option of ``%agent`` asks for a cell; the user's explicit signal is which tools are offered:
without ``insert_cells`` (or without ``run_code``) there is nothing to choose.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from nb_agent.agent.proposals import RUN_CODE
from nb_agent.agent.providers.local_tools import INSERT_CELLS
from nb_agent.tool_contract import Tool

Route = Literal["run", "cell"]

QUESTION = "Run it now or put it in a new cell?"
SYSTEM = (
    "In a Jupyter notebook, a request is either done now (run: the code runs and the answer is given) "
    "or written as a new cell the user reads and runs later (cell)."
)
# requests of their own (an ``orders`` table, ``speeds``): none is one of the bench's held-out prompts
EXAMPLES: tuple[tuple[str, Route], ...] = (
    ("What is the sum of the prices?", "run"),
    ("Write a new cell that prints the first rows of orders.", "cell"),
    ("how many cities are there", "run"),
    ("put code for a scatter plot of price against qty in a cell", "cell"),
    ("Show me the largest speed.", "run"),
    ("I want a cell below to save orders as a CSV file.", "cell"),
    ("add a column total to orders, price times qty", "run"),
    ("the cell above raised an error, fix it", "run"),
)
MAX_REQUEST = 600  # characters of the request the question follows: a long prompt's head says what it asks


def routing_chat(request: str) -> list[dict[str, str]]:
    """The conversation whose next token is the answer: the examples, then the request and the question."""
    chat = [{"role": "system", "content": SYSTEM}]
    for asked, route in EXAMPLES:
        chat += [{"role": "user", "content": f"{asked}\n\n{QUESTION}"}, {"role": "assistant", "content": route}]
    chat.append({"role": "user", "content": f"{request.strip()[:MAX_REQUEST]}\n\n{QUESTION}"})
    return chat


def next_token_logits(llm: Any, prompt: str) -> Any:
    """The model's logits for the token after ``prompt`` (a numpy array over the vocabulary).

    Evaluated on top of what llama.cpp's context already holds (the longest common prefix of
    tokens is kept, as ``Llama.generate`` does), so the examples are read once. Read through
    llama.cpp's own ``llama_get_logits_ith``: ``Llama`` keeps no logits unless every position's
    are kept (``logits_all``), which would cost the code turns memory for nothing."""
    import llama_cpp
    import numpy as np

    tokens = llm.tokenize(prompt.encode(), special=True)
    held = llm.input_ids[: llm.n_tokens]
    same = 0
    for a, b in zip(held, tokens, strict=False):
        if a != b:
            break
        same += 1
    llm.n_tokens = min(same, len(tokens) - 1)  # the last token is evaluated again: its logits are the answer
    llm.eval(tokens[llm.n_tokens :])
    logits = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    return np.ctypeslib.as_array(logits, shape=(llm.n_vocab(),)).copy()


def _log_odds(llm: Any, render: Any, request: str) -> float:
    """log P(cell) - log P(run) as the answer's first token, uncalibrated."""
    logits = next_token_logits(llm, render(routing_chat(request)))
    run, cell = (llm.tokenize(word.encode(), add_bos=False)[0] for word in ("run", "cell"))
    return float(logits[cell] - logits[run])


_bias: dict[int, float] = {}


def cell_odds(llm: Any, render: Any, request: str) -> float:
    """How much more the model answers ``cell`` than ``run`` for ``request``, over its answer for
    an empty request (the calibration, measured once per model): above zero, a cell."""
    if id(llm) not in _bias:
        _bias[id(llm)] = _log_odds(llm, render, "")
    return _log_odds(llm, render, request) - _bias[id(llm)]


def choose(llm: Any, render: Any, request: str) -> Route:
    """The model's choice for ``request``: ``render`` is the model's chat template (``Template.render``)."""
    return "cell" if cell_odds(llm, render, request) > 0 else "run"


def can_propose(tools: Sequence[Tool]) -> bool:
    """Both ways are offered: code can run, and a cell can be proposed."""
    names = {t.name for t in tools}
    return RUN_CODE in names and INSERT_CELLS in names
