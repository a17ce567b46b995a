"""``%agent_undo`` where the cell cannot wait (terminal IPython, a magic called from a function): the
variables go back through a private loop thread while the main thread serves it; there is no page."""

from __future__ import annotations

from typing import Any

from nb_agent.kernel.checkpoints import checkpointed, journal
from nb_agent.kernel.provenance import RunInfo, running
from nb_agent.kernel.runner import execute


def test_agent_undo_without_a_page(ipython: Any, capsys: Any) -> None:
    ipython.user_ns.update(kept=[1, 2], label="before")
    earlier = list(journal().steps)  # other tests' runs in this shared kernel, older than this one
    with running(RunInfo(agent="test agent", prompt="change things")):
        code = "kept.append(3)\nlabel = 'after'"
        assert checkpointed(ipython, [code], lambda: execute(ipython, code)).ok
    assert ipython.user_ns["kept"] == [1, 2, 3]
    ipython.run_line_magic("agent_undo", "--list")
    assert "test agent: change things  (kept, label;" in capsys.readouterr().out
    ipython.run_line_magic("agent_undo", "")
    out = capsys.readouterr().out
    assert "nb-agent: undid test agent: change things" in out
    assert "Puts back: kept; label (rebound by the run)" in out
    assert ipython.user_ns["kept"] == [1, 2]
    assert ipython.user_ns["label"] == "before"
    assert journal().steps == earlier  # this run's step is gone, the older ones stay


def test_agent_undo_options_say_what_is_wrong(ipython: Any, capsys: Any) -> None:
    ipython.run_line_magic("agent_undo", "--memory lots")
    assert "nb-agent: not a size: 'lots' (say 512M, 2G, or a number of bytes)" in capsys.readouterr().out
    saved = journal().budget.memory
    try:
        ipython.run_line_magic("agent_undo", "--memory 3G")
        assert "the checkpoints' budget is 3.0 GiB in memory" in capsys.readouterr().out
    finally:
        journal().budget.memory = saved
