"""A card draws what runs, checked where each character lands on the screen (issue 29, item 1), in
JupyterLab and chromium on the built widget.

The built-in agent on a scripted model asks to run three pieces of code: a statement hidden after a
comment, padding and a lone carriage return (Python reads the CR as a line break; Chromium drew it as
nothing, so the statement sat past the box's right edge on the comment's row), the same at 25,000
characters (past the old highlighting limit), and Trojan Source (bidirectional controls that make the
code read as another branch). A failed cell's Fix then proposes an ``edit_cell`` whose new source
hides a statement the same way. The real Claude Code asks to write a file with a hidden statement
(its diff) and to run a Bash command holding direction controls. For each card, in the browser's own
layout (``Range.getClientRects``): the hidden statement is drawn inside the card's visible box, at the
start of a line of its own; the bidirectional controls are marked escapes drawn left to right in the
order they are stored; the card says it holds such characters. Allowed, what runs is what was drawn:
the statements print. Waits are on locators only.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Jupyter, shot
from tests.browser.harness import write_notebook
from tests.browser.test_widget_e2e import RUN, run_cell, wait_idle
from tests.real_agents import make_agent
from tests.servers.scripted_keyword import KeywordModel
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import serve

PAD = " " * 90  # wider than the card: the old card drew what follows the CR past its right edge


def hidden(comment_line: str, statement: str) -> str:
    return f"{comment_line}{PAD}\r{statement}"


SHORT = hidden('print("checking rows")  # only a check', 'print("HIDDEN-short")')
LONG = (
    hidden('print("checking rows")  # only a check', 'print("HIDDEN-long")')
    + "\n"
    + "".join(f"# filler line {i:05d} to pass the old 20,000-character highlighting limit\n" for i in range(350))
)
TROJAN = (
    'role = "guest"\n'
    'if role != "guest\u202e \u2066# guests may not export\u2069 \u2066":\n'
    '    print("EXPORTED-for-" + role)\n'
)
BROKEN = "rows = [r for r in rowz if r]"
FIXED = hidden("rows = [r for r in rows if r]  # drop the empty rows", 'print("HIDDEN-fix")')

# where each needle of `root`'s text is drawn, in the page's own layout (its box, and on how many rows):
# its first occurrence, or (`inOrder`) the first after the previous needle's
RECTS = """(root, [needles, inOrder]) => {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = [];
  let text = "";
  while (walker.nextNode()) { nodes.push([walker.currentNode, text.length]); text += walker.currentNode.data; }
  let from = 0;
  return needles.map((needle) => {
    const at = text.indexOf(needle, inOrder ? from : 0);
    if (at < 0) return null;
    const end = at + needle.length;
    from = end;
    const range = document.createRange();
    for (const [node, start] of nodes) {
      if (start <= at && at < start + node.data.length) range.setStart(node, at - start);
      if (start < end && end <= start + node.data.length) { range.setEnd(node, end - start); break; }
    }
    // rows: the boxes' middles, a new row where one is more than 6 px below the last (a marked
    // escape's border moves its middle by a pixel or so; a row is 15 px or more)
    const middles = [...range.getClientRects()].filter((r) => r.width > 0).map((r) => (r.top + r.bottom) / 2)
      .sort((a, b) => a - b);
    const rows = middles.filter((m, i) => i === 0 || m - middles[i - 1] > 6).length;
    const { left, right, top, bottom } = range.getBoundingClientRect();
    return { left, right, top, bottom, rows };
  });
}"""
BOX = "el => (({ left, right, top, bottom }) => ({ left, right, top, bottom }))(el.getBoundingClientRect())"


def rects(block: Any, *needles: str, in_order: bool = False) -> list[dict[str, float]]:
    found = block.evaluate(RECTS, [list(needles), in_order])
    for needle, where in zip(needles, found, strict=True):
        assert where, f"{needle!r} is not drawn in {block.evaluate('el => el.textContent')!r}"
    return list(found)


def inside(rect: dict[str, float], box: dict[str, float]) -> bool:
    return bool(
        rect["left"] >= box["left"] - 0.5 and rect["right"] <= box["right"] + 0.5
        and rect["top"] >= box["top"] - 0.5 and rect["bottom"] <= box["bottom"] + 0.5
    )  # fmt: skip


def assert_own_line(block: Any, card: Any, first: str, statement: str) -> dict[str, float]:
    """``statement`` is drawn whole inside ``block``'s and ``card``'s boxes, at the start of a line
    below the one holding ``first`` (at that line's left edge: a wrapped row starts further right);
    the CR shown at the end of the first line is inside the box too. Returns where it is."""
    box, outer = block.evaluate(BOX), card.evaluate(BOX)
    head, where, mark = rects(block, first, statement, "\\r")
    assert where["rows"] == 1, f"{statement!r} drawn over {where['rows']} rows"
    assert inside(where, box), (where, box)
    assert inside(where, outer), (where, outer)
    assert inside(mark, box), (mark, box)
    assert where["top"] >= head["bottom"] - 0.5, "drawn on the comment's row"
    assert abs(where["left"] - head["left"]) < 1, "not at the start of a line"
    # where, from the first line's start and from the box's top (the gutter grows with the line count)
    return {"dx": where["left"] - head["left"], "dy": where["top"] - head["top"], "top": where["top"] - box["top"]}


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    calls = [("run_code", {"code": SHORT}, "t_short"), ("run_code", {"code": LONG}, "t_long"),
             ("run_code", {"code": TROJAN}, "t_trojan")]  # fmt: skip
    scripted = ScriptedModel(
        [
            *(Turn(tool_calls=[ToolCallSpec(name, json.dumps(args), cid)]) for name, args, cid in calls),
            Turn(text="Checked."),
            Turn(tool_calls=[ToolCallSpec("edit_cell", json.dumps({"cell_id": "c4", "source": FIXED}), "t_fix")]),
            Turn(text="Fixed."),
        ],
        model="gpt-4.1-mini",
    )
    with serve(scripted.app) as url:
        scripted.url = url  # type: ignore[attr-defined]
        yield scripted


def cells(url: str, data_dir: Path) -> list[str]:
    return [
        "import os\n"
        f"os.environ['OPENAI_BASE_URL'] = {url + '/v1'!r}\n"
        "os.environ['OPENAI_API_KEY'] = 'test-key'\n"
        "os.environ['NB_AGENT_MODEL'] = 'gpt-4.1-mini'\n"
        "os.environ.pop('NB_AGENT_PROVIDER', None)\n"
        f"os.environ['NB_AGENT_DATA_DIR'] = {str(data_dir)!r}",
        "%load_ext nb_agent",
        "rows = [1, None, 2]",
        "%agent Check the rows",
        BROKEN,
    ]


def allow(card: Any) -> None:
    card.locator(".nb-agent-allow").click()
    expect(card).to_have_attribute("data-answered", "true", timeout=RUN)


@pytest.mark.browser
@pytest.mark.parametrize("jupyter", ["lab"], indirect=True)
def test_cards_draw_what_runs(page: Any, jupyter: Jupyter, model: ScriptedModel, tmp_path: Path) -> None:
    write_notebook(jupyter.root / "cards.ipynb", cells(model.url, tmp_path / "data"))  # type: ignore[attr-defined]
    page.goto(jupyter.open_url("cards.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    for index in range(3):
        run_cell(page, jupyter, index)
        wait_idle(page, jupyter)

    # run_code: the statement after the lone CR, on its own line inside the box; at 25,000 characters too
    ask = run_cell(page, jupyter, 3)
    placed = []
    for cid, statement in (("t_short", 'print("HIDDEN-short")'), ("t_long", 'print("HIDDEN-long")')):
        card = ask.locator(f".nb-agent-approval[data-tool-call-id='{cid}']")
        expect(card).to_be_visible(timeout=RUN)
        code = card.locator("[data-part='code'] pre")
        placed.append(assert_own_line(code, card, 'print("checking rows")', statement))
        warning = card.locator(".nb-agent-approval-warning")
        expect(warning).to_be_visible()
        expect(warning).to_contain_text("invisible or direction-changing characters")
        expect(card.locator(".nb-agent-allow")).to_be_enabled()
        shot(page, f"cards-{cid}")
        allow(card)
    assert placed[0] == placed[1]  # the same drawing at 25,000 characters as at 100

    # Trojan Source: every direction control an escape, drawn left to right in the order stored
    card = ask.locator(".nb-agent-approval[data-tool-call-id='t_trojan']")
    expect(card).to_be_visible(timeout=RUN)
    code = card.locator("[data-part='code'] pre")
    order = ['if role != "guest', "\\u202e", "\\u2066", "# guests may not export", "\\u2069", "\\u2066", '":']
    found = rects(code, *order, in_order=True)
    assert all(r["rows"] == 1 for r in found), found  # one row each: the line is not broken or wrapped
    lefts = [r["left"] for r in found]
    assert lefts == sorted(lefts), list(zip(order, lefts, strict=True))
    tops = [(r["top"] + r["bottom"]) / 2 for r in found]
    assert max(tops) - min(tops) < 4, tops  # all on the `if` line's row
    box = code.evaluate(BOX)
    assert all(inside(r, box) for r in found)
    expect(code.locator(".nb-agent-unseen[data-kind='bidi']")).to_have_count(4)
    expect(card.locator(".nb-agent-approval-warning")).to_be_visible()
    shot(page, "cards-trojan")
    allow(card)
    expect(ask.locator(".nb-agent-text").last).to_have_text("Checked.", timeout=RUN)
    results = "\n".join(str(m.get("content")) for m in model.requests[3]["messages"] if m.get("role") == "tool")
    for printed in ("HIDDEN-short", "HIDDEN-long", "EXPORTED-for-guest"):
        assert printed in results  # allowed, what was drawn ran
    wait_idle(page, jupyter)

    # a Fix: the diff's new line after the CR is a line of its own; allowed, it runs
    broken = run_cell(page, jupyter, 4)
    expect(broken.locator(".jp-OutputArea-output")).to_contain_text("NameError", timeout=RUN)
    broken.locator(".nb-agent-fix").click()
    fixer = page.locator(".jp-Notebook .jp-Cell").nth(5)
    card = fixer.locator(".nb-agent-approval[data-tool-call-id='t_fix']")
    expect(card).to_be_visible(timeout=RUN)
    diff = card.locator(".nb-agent-diff-lines")
    expect(card.locator(".nb-agent-diff-add")).to_have_count(2)
    assert_own_line(diff, card, "+ rows = [r for r in rows if r]", '+ print("HIDDEN-fix")')
    expect(card.locator(".nb-agent-approval-warning")).to_be_visible()
    card.scroll_into_view_if_needed()
    shot(page, "cards-fix")
    allow(card)
    expect(broken.locator(".jp-OutputArea-output")).to_contain_text("HIDDEN-fix", timeout=RUN)  # it ran
    wait_idle(page, jupyter)


@pytest.mark.browser
@pytest.mark.parametrize("jupyter", ["lab"], indirect=True)
def test_claude_codes_write_diff_and_bash_command(
    page: Any, jupyter: Jupyter, tmp_path: Path, keyword_model: tuple[KeywordModel, str]
) -> None:
    """Claude Code refuses Bash commands holding control characters itself; a file's content it writes
    as asked, and direction controls in a command it passes on for approval."""
    agent = make_agent("claude", tmp_path, keyword_model[1])
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in agent.env.items())
    acp = json.dumps(f"env {env} {agent.command}")
    content = hidden("total = 1  # a constant", 'print("HIDDEN-write")')
    command = "echo checked \u2067x\u2069 \u200b# \u202enote"
    # the prompts hold the characters as they are (a line magic's {name} would describe the variable)
    ask = "get_ipython().run_line_magic('agent', {!r} + {})"
    write_notebook(
        jupyter.root / "claude-cards.ipynb",
        [
            "%load_ext nb_agent",
            f"content = {content!r}\ncommand = {command!r}",
            ask.format(f"--acp {acp} write a file {jupyter.root}/notes.py: ", "content"),
            ask.format(f"--acp {acp} use the shell: ", "command"),
        ],
    )
    page.goto(jupyter.open_url("claude-cards.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    for index in range(2):
        run_cell(page, jupyter, index)
        wait_idle(page, jupyter)

    # the write's diff (Claude Code's own permission request): the hidden statement on its own line
    cell = run_cell(page, jupyter, 2)
    card = cell.locator(".nb-agent-approval")
    expect(card).to_be_visible(timeout=RUN)
    diff = card.locator(".nb-agent-diff-lines").first
    expect(diff).to_be_visible()
    assert_own_line(diff, card, "+ total = 1", '+ print("HIDDEN-write")')
    expect(card.locator(".nb-agent-approval-warning")).to_be_visible()
    card.scroll_into_view_if_needed()
    shot(page, "cards-claude-write")
    card.locator('[data-option-kind="reject_once"]').first.click()
    wait_idle(page, jupyter)

    # the Bash command: its direction controls and zero-width space as escapes, left to right, in order
    cell = run_cell(page, jupyter, 3)
    card = cell.locator(".nb-agent-approval")
    expect(card).to_be_visible(timeout=RUN)
    block = card.locator("[data-part='command'] pre")
    order = ["echo checked ", "\\u2067", "x", "\\u2069", "\\u200b", "# ", "\\u202e", "note"]
    found = rects(block, *order, in_order=True)
    lefts = [r["left"] for r in found]
    assert lefts == sorted(lefts), list(zip(order, lefts, strict=True))
    assert all(inside(r, block.evaluate(BOX)) for r in found)
    expect(card.locator(".nb-agent-approval-warning")).to_be_visible()
    card.scroll_into_view_if_needed()
    shot(page, "cards-claude-bash")
    card.locator('[data-option-kind="reject_once"]').first.click()
    wait_idle(page, jupyter)
    assert not (jupyter.root / "notes.py").exists()
