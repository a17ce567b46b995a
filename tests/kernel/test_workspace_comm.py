"""The notebook workspace tools against a real kernel, with a fake front end on the comm.

The kernel runs ipykernel with ``%load_ext nb_agent``; the tools are called from cells the way the
built-in agent's live run calls them (a top-level ``await``: the cell holds the kernel's shell while
the tool waits for the front end), or from a task that outlives its cell (the shell is free, as for an
MCP client): ``run_cells`` then runs the cells through the front end's own execute requests.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_client.manager import start_new_kernel

from tests.fake_workspace import MARK, FakeFrontEnd, cell

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
SETUP = f"""\
import asyncio, json
from nb_agent.kernel.notebook_tools import notebook_tools
W = {{t.name: t for t in notebook_tools(get_ipython(), timeout=5, max_output=10_000)}}
async def _call(name, args):
    out = await W[name].run(args)
    print({MARK!r} + json.dumps({{"content": out.content, "is_error": out.is_error, "images": out.images}}))
"""


def notebook() -> list[dict[str, object]]:
    return [
        cell("intro", "# Sales study\nWe look at **Q3**.", "markdown"),
        cell("load", "rows = [3, 4, 5]", execution_count=1),
        cell("later", "total = sum(rows)\ntotal"),  # never run
        cell("agent", "%agent look at this notebook", execution_count=2),
    ]


@pytest.fixture
def front(tmp_path: Path) -> Iterator[FakeFrontEnd]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(tmp_path)
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT), startup_timeout=60)
    fe = FakeFrontEnd(kc, notebook())
    try:
        yield fe
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def loaded(fe: FakeFrontEnd) -> FakeFrontEnd:
    """``%load_ext nb_agent`` in a notebook whose front end has the extension: the kernel reaches out."""
    assert fe.execute("%load_ext nb_agent").error is None
    assert fe.execute(SETUP).error is None
    fe.settle()
    assert fe.comm_id is not None
    return fe


def call(fe: FakeFrontEnd, name: str, *, asked_from: str = "agent", **args: object) -> dict[str, object]:
    """Call a tool from a cell (the one with the id ``asked_from``), as a live %agent run does."""
    return fe.execute(f"await _call({name!r}, {args!r})", cell_id=asked_from).tool()


def test_read_notebook_quotes_every_cell_the_selection_and_where_it_was_asked(front: FakeFrontEnd) -> None:
    fe = loaded(front)
    fe.active = "later"
    fe.cells[3]["running"] = True  # what the extension says of a cell that is running now
    fe.cells[1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "loaded 3 rows\n"}]
    out = call(fe, "read_notebook")
    text = str(out["content"])
    assert out["is_error"] is False
    assert "# Sales study\nWe look at **Q3**." in text  # the markdown cell
    assert "id=later code, never run\ntotal = sum(rows)\ntotal" in text  # the cell never run
    assert "id=load code, executed [1]" in text
    assert "id=agent code, running now" in text
    assert "loaded 3 rows" in text  # outputs, summarised
    assert "selected cell: later" in text
    assert "you were asked from cell: agent" in text
    assert "notebook: work/analysis.ipynb, 4 cells" in text


def test_insert_edit_move_delete_change_the_front_ends_notebook(front: FakeFrontEnd) -> None:
    fe = loaded(front)
    new = [{"source": "print(sum(rows))"}, {"source": "## Notes", "cell_type": "markdown"}]
    out = call(fe, "insert_cells", cells=new, after_cell_id="load")
    assert out["is_error"] is False
    new_code, new_md = fe.cells[2], fe.cells[3]
    assert (new_code["source"], new_code["cell_type"], new_md["cell_type"]) == ("print(sum(rows))", "code", "markdown")
    assert f"cell {new_code['id']}" in str(out["content"])

    assert call(fe, "edit_cell", cell_id="later", source="total = sum(rows) * 2")["is_error"] is False
    assert fe.cells[fe.index("later")]["source"] == "total = sum(rows) * 2"

    assert call(fe, "move_cell", cell_id="later", position=0)["is_error"] is False
    assert fe.cells[0]["id"] == "later"

    assert call(fe, "delete_cells", cell_ids=[new_md["id"], "intro"])["is_error"] is False
    assert [c["id"] for c in fe.cells] == ["later", "load", new_code["id"], "agent"]


def test_cells_an_agent_inserts_or_edits_carry_its_run_and_read_notebook_reports_it(front: FakeFrontEnd) -> None:
    fe = loaded(front)
    run = (
        "RunInfo(agent='the built-in agent', prompt='Tidy up', cell_id='agent', model='scripted-model', "
        "run_id='r1234567890')"
    )
    code = (
        "from nb_agent.kernel.provenance import RunInfo, running\n"
        "from nb_agent.tool_contract import CURRENT_CALL\n"
        f"with running({run}):\n"
        "    CURRENT_CALL.set('call_9')\n"
        "    await _call('insert_cells', {'cells': [{'source': 'x = 1'}], 'after_cell_id': 'load'})\n"
        "    await _call('edit_cell', {'cell_id': 'later', 'source': 'total = 0'})"
    )
    assert fe.execute(code, cell_id="agent").error is None
    inserted = fe.cells[2]["metadata"]["nb_agent"]["provenance"]
    assert {k: v for k, v in inserted.items() if k != "time"} == {
        "action": "inserted", "agent": "the built-in agent", "model": "scripted-model", "run_id": "r1234567890",
        "prompt": "Tidy up", "cell_id": "agent", "tool_call_id": "call_9",
    }  # fmt: skip
    assert fe.cells[fe.index("later")]["metadata"]["nb_agent"]["provenance"]["action"] == "edited"
    text = str(call(fe, "read_notebook")["content"])
    assert "(inserted by the built-in agent (scripted-model), run r1234567, " in text
    assert 'asked "Tidy up")\nx = 1' in text
    assert "(edited by the built-in agent (scripted-model)" in text


def test_a_cell_the_user_is_typing_in_is_not_overwritten(front: FakeFrontEnd) -> None:
    fe = loaded(front)
    fe.typing_in = "later"
    out = call(fe, "edit_cell", cell_id="later", source="oops = 1")
    assert out["is_error"] is True
    assert "the user is typing in cell later" in str(out["content"])
    assert fe.cells[fe.index("later")]["source"] == "total = sum(rows)\ntotal"


def test_an_unknown_cell_id_is_an_error_the_model_can_read(front: FakeFrontEnd) -> None:
    fe = loaded(front)
    out = call(fe, "edit_cell", cell_id="nope", source="x")
    assert out["is_error"] is True
    assert 'there is no cell with id "nope"' in str(out["content"])


def test_edit_preview_is_a_diff_of_the_cell(front: FakeFrontEnd) -> None:
    fe = loaded(front)
    code = (
        "from nb_agent.kernel.notebook_tools import edit_preview\n"
        "p = await edit_preview({'cell_id': 'later', 'source': 'total = sum(rows) * 2\\ntotal'})\n"
        "print('@@tool ' + json.dumps({'content': [p.text, p.diffs], 'is_error': False, 'images': []}))"
    )
    text, diffs = fe.execute(code).tool()["content"]
    assert text == "Allow edit_cell to change cell later?"
    old, new = "total = sum(rows)\ntotal", "total = sum(rows) * 2\ntotal"
    assert diffs == [{"path": "cell later", "old_text": old, "new_text": new, "truncated": False}]


def test_run_cells_while_the_agents_cell_holds_the_shell(front: FakeFrontEnd) -> None:
    """The live %agent case: the kernel runs the source itself, the front end writes the outputs."""
    fe = loaded(front)
    fe.execute("rows = [3, 4, 5]")
    out = call(fe, "run_cells", cell_ids=["later"])
    assert out["is_error"] is False
    assert "12" in str(out["content"])
    later = fe.cells[fe.index("later")]
    assert later["outputs"][0]["output_type"] == "execute_result"
    assert later["outputs"][0]["data"]["text/plain"] == "12"
    assert [r["op"] for r in fe.requests[-2:]] == ["read", "set_outputs"]
    assert fe.execute("print(total)").stdout == "12\n"  # it ran in the user's namespace


def test_run_cells_when_the_shell_is_free_runs_them_as_shift_enter(front: FakeFrontEnd) -> None:
    """An MCP client or a background run: the front end sends the execute request itself."""
    fe = loaded(front)
    fe.cells[2]["source"] = "print('ran', 6 * 7)"
    fe.execute("job = asyncio.ensure_future(W['run_cells'].run({'cell_ids': ['later']}))")
    fe.settle(3)
    assert [r["op"] for r in fe.requests] == ["read", "run"]  # the cells' code first: what the checkpoint covers
    later = fe.cells[fe.index("later")]
    assert later["outputs"] == [{"output_type": "stream", "name": "stdout", "text": "ran 42\n"}]
    assert isinstance(later["execution_count"], int)
    result = fe.execute("print(job.result().content)").stdout
    assert result.startswith(f"## cell later [{later['execution_count']}]\nran 42")


def test_an_error_in_a_run_cell_is_an_error_result(front: FakeFrontEnd) -> None:
    fe = loaded(front)
    fe.cells[2]["source"] = "1 / 0"
    out = call(fe, "run_cells", cell_ids=["later"])
    assert out["is_error"] is True
    assert "ZeroDivisionError" in str(out["content"])
    assert fe.cells[2]["outputs"][-1]["output_type"] == "error"


def test_without_the_extension_the_tools_say_so_and_insert_cells_proposes_instead(front: FakeFrontEnd) -> None:
    """One insert tool everywhere: with no page linked, ``insert_cells`` falls back to the kernel's
    ``set_next_input`` (what the former ``insert_cell`` did) rather than failing."""
    front.extension = False  # VS Code, an old JupyterLab: the comm is closed at once
    fe = loaded_without_extension(front)
    out = call(fe, "read_notebook")
    assert out["is_error"] is True
    assert "no notebook front end with the nb-agent workspace extension" in str(out["content"])
    assert "use run_code to run code (insert_cells still proposes cells, below the current one)" in str(out["content"])
    cells = [{"source": "# Totals", "cell_type": "markdown"}, {"source": "total = sum(rows)"}]
    done = fe.execute(f"await _call('insert_cells', {{'cells': {cells!r}}})", cell_id="agent")
    assert done.tool()["is_error"] is False
    assert "proposed below the current one instead" in str(done.tool()["content"])
    proposed = [p for p in done.reply["payload"] if p.get("source") == "set_next_input"]
    assert proposed == [{"source": "set_next_input", "text": "# # Totals\n\ntotal = sum(rows)", "replace": False}]
    assert len(fe.cells) == 4  # the notebook itself is untouched: the front end shows the proposal


def loaded_without_extension(fe: FakeFrontEnd) -> FakeFrontEnd:
    assert fe.execute("%load_ext nb_agent").error is None
    assert fe.execute(SETUP).error is None
    fe.settle()
    assert fe.comm_id is None
    return fe


def test_an_extension_that_connects_after_nb_agent_was_loaded(front: FakeFrontEnd) -> None:
    """The page was reloaded (or opened) after ``%load_ext``: the extension opens the comm itself."""
    front.extension = False
    fe = loaded_without_extension(front)
    fe.extension = True
    fe.open_comm()
    fe.settle()
    out = call(fe, "read_notebook")
    assert out["is_error"] is False
    assert "# Sales study" in str(out["content"])


def test_a_closed_comm_is_no_front_end_and_a_new_one_works(front: FakeFrontEnd) -> None:
    fe = loaded(front)
    fe.close_comm()
    fe.settle()
    assert call(fe, "read_notebook")["is_error"] is True
    fe.open_comm()  # the extension reconnects (a kernel restart, a reloaded page)
    fe.settle()
    assert call(fe, "read_notebook")["is_error"] is False


def test_a_long_notebook_is_read_in_whole_cells_and_says_where_to_read_on(front: FakeFrontEnd) -> None:
    fe = loaded(front)
    fe.cells[:] = [cell(f"c{i}", f"value_{i} = {i}  # " + "x" * 400) for i in range(400)]
    first = str(call(fe, "read_notebook")["content"])
    shown = re.findall(r"## cell (\d+) id=", first)
    assert shown[0] == "0"
    assert len(shown) < 400
    following = int(shown[-1]) + 1
    assert first.endswith(f"cells {following} to 399 not shown: call read_notebook with start={following}")
    assert f"value_{following - 1} = {following - 1}  # " + "x" * 400 in first  # whole cells, none cut
    rest = str(call(fe, "read_notebook", start=following)["content"])
    assert re.findall(r"## cell (\d+) id=", rest)[0] == str(following)


def test_images_come_as_image_parts_only_when_asked(front: FakeFrontEnd) -> None:
    fe = loaded(front)
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    fe.cells[1]["outputs"] = [{"output_type": "display_data", "metadata": {}, "data": {"image/png": png + "\n"}}]
    plain = call(fe, "read_notebook")
    assert "[image: a 1x1 PNG]" in str(plain["content"])  # what it is, never its base64
    assert plain["images"] == []
    assert png not in str(plain["content"])  # no base64 in the text
    with_images = call(fe, "read_notebook", images=True)
    assert with_images["images"] == [["image/png", png]]
