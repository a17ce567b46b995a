"""``%agent --fix`` / ``%agent fix``: a run about the cell that failed, with its source, its traceback
(bounded, secrets masked) and the variables it reads; headless it prints the change it proposes, and
with the notebook workspace the fix is an ``edit_cell`` whose approval, allowed, runs the cell.
The button that asks for it is tested in the browser (``tests/browser/test_daily_e2e.py``)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

from nb_agent.kernel.failures import TRACE_LIMIT, failures, names_read
from tests.fake_workspace import FakeFrontEnd, cell
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ToolCallSpec, Turn

SECRET = "sk-proj-" + "Q" * 40


@pytest.fixture
def scripted(ipython: Any, running: Running, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    def start(*turns: Turn) -> Any:
        ctx = running(*turns)
        model, url = ctx.__enter__()
        started.append(ctx)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("NB_AGENT_MODEL", "scripted-model")
        return model

    started: list[Any] = []
    yield start
    for ctx in started:
        ctx.__exit__(None, None, None)


def fail(ip: Any, source: str, cell_id: str) -> None:
    result = ip.run_cell(source, store_history=True, cell_id=cell_id)
    assert result.error_in_exec is not None


def asked(model: Any) -> str:
    return str(model.requests[0]["messages"][-1]["content"])


def test_the_failed_cell_its_traceback_and_its_variables_are_the_prompt(
    ipython: Any, scripted: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    ipython.user_ns.update(sales_total=[3, 4], token_copy=SECRET, unrelated="not asked")
    fail(ipython, "def grow(xs):\n    return [x * 2 for x in sales_totl]\n\ngrow(sales_total + [token_copy])", "cell-7")
    model = scripted(Turn(text="Use the right name:\n```python\ndef grow(xs):\n    return [x * 2 for x in xs]\n```"))
    ipython.run_line_magic("agent", "--session fix-1 --new --fix")
    prompt = asked(model)
    assert "The notebook cell cell-7 (In [" in prompt
    assert "failed with NameError: name 'sales_totl' is not defined" in prompt
    assert "def grow(xs):\n    return [x * 2 for x in sales_totl]" in prompt
    trace = prompt.split("The traceback:\n```\n")[1].split("```")[0]
    assert trace.startswith("Traceback (most recent call last):")
    assert "in grow" in trace
    assert "interactiveshell.py" not in trace
    assert "sales_total = list (len 2): [3, 4]" in prompt  # the name it almost typed, and what it reads
    assert "token_copy = str: '***'" in prompt  # secrets masked, as every kernel tool masks them
    assert SECRET not in json.dumps(model.requests)
    assert "unrelated" not in prompt
    assert "```python code block" in prompt  # no notebook workspace here: the fix comes back as code
    out = capsys.readouterr().out
    assert "Proposed change to cell cell-7:\n--- cell cell-7\n+++ cell cell-7 (fixed)\n" in out
    diff = out.split("+++ cell cell-7 (fixed)\n")[1].split("\n\n")[0].splitlines()
    assert diff[1:] == [
        " def grow(xs):",
        "-    return [x * 2 for x in sales_totl]",
        "-",
        "-grow(sales_total + [token_copy])",
        "+    return [x * 2 for x in xs]",
    ]


def test_fix_as_a_word_and_what_is_not_a_fix(ipython: Any, scripted: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fail(ipython, "1 / 0", "cell-z")
    model = scripted(Turn(text="Divide by something else."), Turn(text="A plot."))
    ipython.run_line_magic("agent", "--session fix-2 --new fix")
    assert "failed with ZeroDivisionError: division by zero" in asked(model)
    assert "The agent proposed no change to the cell." in capsys.readouterr().out
    ipython.run_line_magic("agent", "--session fix-2 fix the plot")  # an ordinary prompt
    assert model.requests[1]["messages"][-1]["content"] == "fix the plot"
    ipython.run_cell("1 + 1", store_history=True, cell_id="cell-z")  # it runs cleanly now: forgotten
    ipython.run_line_magic("agent", "--fix --cell cell-z")
    assert "cell cell-z has not failed in this kernel" in capsys.readouterr().out
    assert len(model.requests) == 2


def test_headless_the_fix_is_not_offered_an_edit_it_could_only_be_denied(
    ipython: Any, scripted: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """No notebook page here (nbconvert, nbval, jupyter execute): the tools that need one are not
    offered, so the model proposes the fix as code, which the run prints as a diff."""
    fail(ipython, "total = sum(valeus)", "cell-h")
    model = scripted(Turn(text="```python\ntotal = sum(values)\n```"))
    ipython.run_line_magic("agent", "--session fix-h --new --fix --approve ask")
    offered = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert {"run_code", "insert_cells", "list_variables"} <= offered
    assert not offered & {"edit_cell", "read_notebook", "delete_cells", "move_cell", "run_cells"}
    assert "```python code block" in asked(model)  # the prompt asks for what can be done here
    assert "Proposed change to cell cell-h:" in capsys.readouterr().out


def test_a_huge_traceback_is_cut_in_the_middle(ipython: Any) -> None:
    fail(ipython, "raise ValueError('head ' + 'x' * 50_000 + ' tail')", "cell-big")
    failure = failures().find("cell-big")
    assert failure is not None
    assert len(failure.traceback) < TRACE_LIMIT + 200
    assert "Traceback (most recent call last):" in failure.traceback
    assert failure.traceback.endswith("x tail")
    assert "characters of the traceback cut" in failure.traceback
    assert len(failure.error) <= 1_000


def test_names_read_in_the_order_the_cell_reads_them() -> None:
    assert names_read("y = f(b, a)\nprint(a.c, z)") == ["f", "b", "a", "print", "z"]
    assert names_read("not python (") == ["not", "python"]


# -- with the notebook workspace, in a real kernel --------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Any]:
    kernels: list[Any] = []

    def start(url: str, cells: list[dict[str, Any]], metadata: dict[str, Any] | None = None) -> FakeFrontEnd:
        env = {k: v for k, v in os.environ.items() if not k.startswith("NB_AGENT_")}
        env |= {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
                "NB_AGENT_DATA_DIR": str(tmp_path), "OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test-key",
                "NB_AGENT_MODEL": "gpt-4.1-mini"}  # fmt: skip
        km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT), startup_timeout=60)
        kernels.append((km, kc))
        fe = FakeFrontEnd(kc, cells)
        fe.metadata = metadata or {}
        return fe

    yield start
    for km, kc in kernels:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.timeout(240)
def test_with_the_workspace_the_fix_is_an_edit_that_runs_the_cell_and_the_ledger_is_saved(
    kernel: Any, running: Running
) -> None:
    fixed = "values = [3, 4]\ntotal = sum(values)\nprint('total', total)"
    turns = [
        Turn(tool_calls=[ToolCallSpec("edit_cell", json.dumps({"cell_id": "calc", "source": fixed}), "t_fix")],
             input_tokens=900, output_tokens=40),
        Turn(text="Fixed the typo: valeus is values.", input_tokens=1_000, output_tokens=12),
    ]  # fmt: skip
    broken = "values = [3, 4]\ntotal = sum(valeus)"
    cells = [cell("calc", broken), cell("ask", "%agent --fix --approve always")]
    with running(*turns) as (model, url):
        fe = kernel(url, cells)
        assert fe.execute("%load_ext nb_agent").error is None
        fe.settle()
        assert fe.execute(broken, cell_id="calc").error == "NameError: name 'valeus' is not defined"
        assert fe.execute(cells[1]["source"], cell_id="ask", timeout=120).error is None
        prompt = str(model.requests[0]["messages"][-1]["content"])
        assert "Propose the fix with the edit_cell tool: cell_id 'calc'" in prompt
        assert "values = list (len 2): [3, 4]" in prompt
        ran = next(m for m in model.requests[1]["messages"] if m["role"] == "tool")["content"]
        asked = json.loads(fe.execute("import json; print(json.dumps([[e.prompt, e.model_dump()['diffs']] for e in "
                                      "_agent.events if e.type == 'approval_requested']))").stdout)  # fmt: skip
    assert fe.cells[0]["source"] == fixed
    assert fe.cells[0]["outputs"] == [{"output_type": "stream", "name": "stdout", "text": "total 7\n"}]
    assert "edited: cell calc" in ran
    assert "then ran it:\n## cell calc\ntotal 7" in ran
    [(question, diffs)] = asked
    assert question == "Allow edit_cell to change cell calc and then run it (the fix you asked for)?"
    assert diffs == [{"path": "cell calc", "old_text": broken, "new_text": fixed, "truncated": False}]

    # the turn's row went into the notebook's metadata; a new kernel on the saved notebook adopts it
    saved = fe.metadata["nb_agent"]["usage"]
    assert saved["totals"]["turns"] == 1
    assert (saved["totals"]["input_tokens"], saved["totals"]["output_tokens"]) == (1_900, 52)
    cost = (1_900 * 0.4 + 52 * 1.6) / 1e6
    assert saved["totals"]["cost"] == pytest.approx(cost)
    with running() as (_model, url):
        again = kernel(url, [cell("usage", "%agent_usage")], metadata=json.loads(json.dumps(fe.metadata)))
        assert again.execute("%load_ext nb_agent").error is None
        again.settle()
        assert again.comm_id is not None
        out = again.execute("import json\nsaved = %agent_usage --json\nprint(json.dumps(saved))", cell_id="usage")
    assert json.loads(out.stdout)["rows"] == [{k: v for k, v in r.items() if v is not None} for r in saved["rows"]]


def test_an_acp_agent_gets_the_same_request(ipython: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fail(ipython, "rows = [1, 2]\nrows.apend(3)", "cell-acp")
    echo = f"{sys.executable} {Path(__file__).parents[1] / 'servers' / 'acp_agent.py'} echo"
    ipython.run_line_magic("agent", f'--acp "{echo}" --session fix-acp --new --no-kernel --fix --cell cell-acp')
    answer = ipython.user_ns["_agent"].text  # the scripted agent answers with the prompt it was given
    assert "failed with AttributeError: 'list' object has no attribute 'apend'" in answer
    assert "rows = list (len 2): [1, 2]\nattributes like 'apend': append" in answer
    assert "rows.apend(3)" in answer
    capsys.readouterr()
