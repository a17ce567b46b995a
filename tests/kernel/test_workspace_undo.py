"""Undoing a run's cells and variables together, through the workspace comm (a real kernel, a fake page).

The page is :class:`tests.fake_workspace.FakeFrontEnd`, answering as the extension does (edits and
deletes say what they replaced, ``revert`` applies the reverting operations); the browser test
(tests/browser/test_undo_e2e.py) does the same with the real extension in JupyterLab.
"""

from __future__ import annotations

import copy

from tests.fake_workspace import FakeFrontEnd
from tests.kernel.test_workspace_comm import front, loaded

__all__ = ["front"]

RUN = """\
from nb_agent.kernel.provenance import RunInfo, running
with running(RunInfo(agent="test agent", prompt="rework the notebook")):
    for _name, _args in {calls!r}:
        await _call(_name, _args)
"""


def test_undo_reverts_the_cells_a_run_inserted_edited_deleted_moved_and_its_variables(front: FakeFrontEnd) -> None:
    fe = loaded(front)
    assert fe.execute("rows = [3, 4, 5]").error is None
    before = copy.deepcopy(fe.cells)
    calls = [
        ("insert_cells", {"cells": [{"source": "rows.append(6)"}], "after_cell_id": "load"}),
        ("edit_cell", {"cell_id": "load", "source": "rows = []"}),
        ("delete_cells", {"cell_ids": ["intro"]}),
        ("move_cell", {"cell_id": "later", "position": 0}),
        ("run_cells", {"cell_ids": ["later"]}),  # runs in the kernel (the run's cell holds the shell)
    ]
    ran = fe.execute(RUN.format(calls=calls), cell_id="agent")
    assert ran.error is None, ran.error
    inserted = next(c["id"] for c in fe.cells if c["source"] == "rows.append(6)")
    assert [c["id"] for c in fe.cells] == ["later", "load", inserted, "agent"]
    assert fe.execute("print(total)").stdout == "12\n"

    shown = fe.execute("%agent_undo --dry-run", cell_id="agent").stdout
    reverts = "1 inserted cell removed, 1 edited cell reverted, 1 deleted cell put back, 1 moved cell moved back"
    assert f"Reverts: {reverts}" in shown
    assert "Removes (the run made them): total" in shown
    done = fe.execute("%agent_undo", cell_id="agent")
    assert done.error is None, done.error
    assert "cells reverted" in done.stdout
    assert [(c["id"], c["source"]) for c in fe.cells] == [(c["id"], c["source"]) for c in before]
    assert fe.cells[0] == before[0]  # the deleted markdown cell whole, with its id
    assert fe.execute("print('total' in globals(), rows)").stdout == "False [3, 4, 5]\n"
    assert [r["op"] for r in fe.requests][-1] == "revert"
