"""Cards that read like what they ask, in plain text (headless output, the CLI): ``render.args``
reads a call's arguments as the widget's cards do (``js/tests/daily.test.js`` holds the same cases)."""

from __future__ import annotations

from nb_agent.events import ApprovalRequested, FileDiff, ToolCall
from nb_agent.render.args import classify, quote
from nb_agent.render.text import TextRenderer

CODE = "totals = sales.groupby('region')['amount'].sum()\ntotals.sort_values()"


def rendered(*events: object) -> str:
    out: list[str] = []
    renderer = TextRenderer(out.append)
    for ev in events:
        renderer.render(ev)  # type: ignore[arg-type]
    return "".join(out)


def test_code_is_lines_not_an_escaped_json_string() -> None:
    ask = ApprovalRequested(tool_call_id="c", name="run_code", arguments={"code": CODE}, prompt="Run this code?")
    out = rendered(ToolCall(tool_call_id="c", name="run_code", arguments={"code": CODE}), ask)
    assert out == (
        "⚙ Run Code\n"
        "    totals = sales.groupby('region')['amount'].sum()\n    totals.sort_values()\n"
        "? the agent wants to run Run Code — Run this code?\n"
        "    totals = sales.groupby('region')['amount'].sum()\n    totals.sort_values()\n"
    )
    assert "\\n" not in out


def test_a_command_is_its_quoted_command_line_and_other_arguments_stay() -> None:
    codex = classify("shell", {"command": ["bash", "-lc", "ls 'my dir' | wc -l"], "cwd": "/w"})
    assert codex.command == "bash -lc 'ls '\"'\"'my dir'\"'\"' | wc -l'"
    assert codex.rest == {"cwd": "/w"}
    terminal = classify("Run", {"command": "echo", "args": ["a b", "\u202eevil"], "env": {"LD_PRELOAD": "/x.so"}})
    assert terminal.command == "LD_PRELOAD=/x.so echo 'a b' $'\\u202eevil'"
    out = rendered(ToolCall(tool_call_id="b", name="Bash", arguments={"command": "ls -la", "timeout": 5}))
    assert out == '⚙ Bash {"timeout": 5} $ ls -la\n'
    assert quote("") == "''"
    assert quote("a\nb") == "$'a\\nb'"


def test_a_write_is_a_diff_and_the_rest_unchanged() -> None:
    edit = classify("Edit", {"file_path": "a.py", "old_string": "x = 1\n", "new_string": "x = 2\n"})
    assert edit.diff == FileDiff(path="a.py", old_text="x = 1\n", new_text="x = 2\n")
    assert edit.rest == {"file_path": "a.py"}
    ask = ApprovalRequested(tool_call_id="e", name="edit_cell", arguments={"cell_id": "c4", "source": "y = 2"},
                            diffs=[FileDiff(path="cell c4", old_text="y = 1", new_text="y = 2")])  # fmt: skip
    out = rendered(ask)  # the approval's own diff, drawn once
    assert out.splitlines()[0] == '? the agent wants to run Edit Cell {"cell_id": "c4"}'
    assert out.count("+y = 2") + out.count("+ y = 2") == 1
    assert rendered(ToolCall(tool_call_id="a", name="add", arguments={"a": 2, "b": 40})) == '⚙ Add {"a": 2, "b": 40}\n'
    assert classify("web_search", {"query": "sales"}).code is None
