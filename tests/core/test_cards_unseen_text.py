"""A card in plain text (the CLI, headless output, the Fix's printed diff, the Markdown copy) draws what
runs, as the widget does (``js/tests/cards-unseen.test.js``; where each character lands on screen:
``tests/browser/test_card_characters.py``): the lines the language reads, hidden characters as
escapes, and a line saying so. The CLI's question is checked on a pty, against the real Claude Code."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import termios
import time
from pathlib import Path

from nb_agent.conversation.result import AgentResult
from nb_agent.events import ApprovalRequested, FileDiff, ToolCall
from nb_agent.kernel.failures import Failure
from nb_agent.render.text import TextRenderer
from nb_agent.render.transcript import to_markdown
from nb_agent.render.unseen import CUT, FLAG
from nb_agent.ui.fix import proposal
from tests.protocols.test_acp_real_agents import Model
from tests.real_agents import make_agent

PAD = " " * 40
HIDDEN = f"rows = [r for r in rows if r]  # drop the empty rows{PAD}\rimport os; os.system('id')"
TROJAN = 'if role != "guest\u202e \u2066# guests may not export\u2069 \u2066":\n    export()'
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def rendered(*events: object) -> str:
    out: list[str] = []
    renderer = TextRenderer(out.append)
    for ev in events:
        renderer.render(ev)  # type: ignore[arg-type]
    return "".join(out)


def test_run_code_lines_are_the_lines_python_reads() -> None:
    out = rendered(ApprovalRequested(tool_call_id="c", name="run_code", arguments={"code": HIDDEN}))
    assert out.splitlines()[1:] == [
        f"    rows = [r for r in rows if r]  # drop the empty rows{PAD}\\r",
        "    import os; os.system('id')",
        f"    ⚠ {FLAG}",
    ]
    assert "\r" not in out
    # a character other readers take for a line break is none for Python: escaped inside its line
    code = "x = 1 # a\u2028b\x0bc\x85d"
    out = rendered(ApprovalRequested(tool_call_id="d", name="run_code", arguments={"code": code}))
    assert out.splitlines()[1] == "    x = 1 # a\\u2028b\\x0bc\\u0085d"


def test_bidi_controls_are_escapes_in_stored_order() -> None:
    out = rendered(ApprovalRequested(tool_call_id="c", name="run_code", arguments={"code": TROJAN}))
    assert '    if role != "guest\\u202e \\u2066# guests may not export\\u2069 \\u2066":' in out.splitlines()
    assert not any(ch in out for ch in BIDI)
    assert f"    ⚠ {FLAG}" in out.splitlines()


def test_an_edit_cells_diff_and_an_acp_write_read_as_python_and_as_their_file() -> None:
    fix = ApprovalRequested(
        tool_call_id="e", name="edit_cell", arguments={"cell_id": "c4", "source": HIDDEN},
        prompt="Allow edit_cell to change cell c4 and then run it (the fix you asked for)?",
        diffs=[FileDiff(path="cell c4", old_text="rows = [r for r in rowz if r]", new_text=HIDDEN)],
    )  # fmt: skip
    lines = rendered(fix).splitlines()
    assert [line for line in lines if line.startswith("    +") and not line.startswith("    +++")] == [
        f"    +rows = [r for r in rows if r]  # drop the empty rows{PAD}\\r",
        "    +import os; os.system('id')",
    ]
    write = ApprovalRequested(
        tool_call_id="w", name="Write", arguments={"file_path": "/w/run.sh"},
        diffs=[FileDiff(path="/w/run.sh", old_text=None, new_text="echo ok\r\nrm -rf ~/x \u2067y\u2069\n")],
    )  # fmt: skip
    lines = rendered(write).splitlines()  # a shell script: only LF ends its lines, so its CRs stay in them
    assert "    +echo ok\\r" in lines
    assert "    +rm -rf ~/x \\u2067y\\u2069" in lines
    assert f"    ⚠ {FLAG}" in lines


def test_a_bash_command_is_one_line_for_the_shell_and_quoted_words_still_flag() -> None:
    bash = ApprovalRequested(tool_call_id="b", name="Bash", arguments={"command": f"echo ok # note{PAD}\rtouch pwned"})
    lines = rendered(bash).splitlines()
    assert lines[0] == f"? the agent wants to run Bash $ echo ok # note{PAD}\\rtouch pwned"
    assert lines[1] == f"    ⚠ {FLAG}"
    argv = {"command": "echo", "args": ["\u202eevil"]}
    terminal = ApprovalRequested(tool_call_id="t", name="terminal", arguments=argv)
    assert rendered(terminal).splitlines() == [
        "? the agent wants to run Terminal $ echo $'\\u202eevil'",
        f"    ⚠ {FLAG}",
    ]


def test_past_what_a_card_shows_it_says_so() -> None:
    code = "# " + "x" * 119_998
    out = rendered(ApprovalRequested(tool_call_id="c", name="run_code", arguments={"code": code}))
    assert "    … 20,000 more characters, not shown" in out.splitlines()
    assert out.splitlines()[-1] == f"    ⚠ {CUT}"
    # a tool call (no decision asked) keeps its short form
    short = rendered(ToolCall(tool_call_id="t", name="run_code", arguments={"code": "x = 1\n" * 100}))
    assert "    … 60 more lines" in short.splitlines()


def test_the_fix_printed_headless_and_the_markdown_copy() -> None:
    failure = Failure(cell_id="c4", execution_count=3, source="rows = [r for r in rowz if r]", error="NameError",
                      traceback="")  # fmt: skip
    result = AgentResult("fix")
    result.events.append(ToolCall(tool_call_id="e", name="edit_cell", arguments={"cell_id": "c4", "source": HIDDEN}))
    said = proposal(result, failure)
    assert said is not None
    assert f"+rows = [r for r in rows if r]  # drop the empty rows{PAD}\\r\n+import os; os.system('id')\n" in said
    assert said.endswith(f"⚠ {FLAG}\n")
    call = {"type": "tool_call", "tool_call_id": "c", "name": "run_code", "arguments": {"code": TROJAN}}
    markdown = to_markdown([call])
    assert "\\u202e" in markdown
    assert not any(ch in markdown for ch in BIDI)


# -- the CLI's question, on a terminal, against the real Claude Code ---------------------------------
def ask_on_a_pty(command: list[str], env: dict[str, str], cwd: Path, answer: bytes) -> bytes:
    """Run ``command`` on a pty (no output processing: the bytes read are the bytes written), answer its
    ``[N]o:`` question with ``answer``, and return everything it wrote."""
    master, slave = pty.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    proc = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd)
    os.close(slave)
    seen, asked = b"", False
    deadline = time.monotonic() + 180
    try:
        while True:
            assert time.monotonic() < deadline, seen
            if not asked and b"[N]o: " in seen:
                os.write(master, answer)
                asked = True
            if select.select([master], [], [], 0.5)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the other end is closed
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return seen


def test_the_cli_question_shows_claude_codes_bash_command_with_its_hidden_characters(
    tmp_path: Path, keyword_model: Model, clean_env: None
) -> None:
    """Claude Code refuses a Bash command holding a control character itself ("would be hidden in the
    approval dialog"); direction controls and zero-width characters it passes on, to be approved."""
    agent = make_agent("claude", tmp_path, keyword_model[1])
    command = "echo checked \u2067x\u2069 \u200b# \u202enote"
    argv = [sys.executable, "-m", "nb_agent.cli", "stream", "--agent", agent.command, "--approve", "ask",
            f"use the shell: {command}"]  # fmt: skip
    seen = ask_on_a_pty(argv, {**os.environ, **agent.env, "PYTHONUNBUFFERED": "1"}, agent.project, b"n\n")
    text = seen.decode()
    hidden = [line for line in text.splitlines() if any(ch in line for ch in BIDI + "\u200b")]
    assert not hidden, [ascii(line) for line in hidden]  # nothing reaches the terminal to reorder or hide
    escaped = "echo checked \\u2067x\\u2069 \\u200b# \\u202enote"
    card = text[: text.index("[N]o: ")].splitlines()
    asked = next(i for i, line in enumerate(card) if line.startswith("? the agent wants to run "))
    assert f"$ {escaped}" in card[asked]  # the card: the command as the shell reads it
    assert card[asked + 1] == f"    ⚠ {FLAG}"
    question = card[-1]  # the question: its JSON, the same escapes, after the same warning
    assert question.startswith("Allow ")
    assert f'"command": "{escaped}"' in question
    assert card[-2] == f"⚠ {FLAG}"
    assert "→ deny" in text
