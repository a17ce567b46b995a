"""Pictures a prompt names: ``%agent what is wrong with this chart? {fig}`` attaches the figure itself.

A ``{name}`` whose value is a picture (a matplotlib Figure or Axes, a PIL image, an
``IPython.display.Image``, anything with ``_repr_png_`` / ``_repr_jpeg_`` / ``_repr_svg_``:
``nb_agent.pictures.from_value``) becomes ``[image N: a 640x480 PNG, 3 axes]`` in the prompt's text,
and the picture goes with the prompt (``pictures.attaching``): as an image to a model or ACP agent
that takes images, as that description to one that does not. Every other ``{name}`` is left for
``variables.interpolate``. At most ``MAX_ATTACHED`` pictures per prompt.

A ``{cell:ID}`` attaches the pictures a cell of the notebook shows (its PNG / JPEG / SVG outputs), as
the page holds them: ``read_cells`` asks the page the run is addressed to (``kernel.addressing``,
the notebook tools' way), so only an awaited ``%agent`` can (a page's reply is a comm message the
kernel hears only while the cell awaits: ``nb_agent.ui.awaiting``). A cell that cannot be attached
(no such cell, no picture, no page) becomes ``[cell ID: not attached: why]`` and the user is told.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from nb_agent.kernel.addressing import link as addressed
from nb_agent.kernel.variables import NAME_PATTERN
from nb_agent.kernel.workspace import NO_FRONT_END, FrontEndError, NoFrontEnd
from nb_agent.pictures import Picture, from_bundle, from_value

log = logging.getLogger("nb_agent.kernel")

MAX_ATTACHED = 5
CELL_PATTERN = re.compile(r"(?<!\{)\{cell:([^{}\s]{1,200})\}(?!\})")  # ``{cell:ID}``, an nbformat cell id
_EITHER = re.compile(f"{CELL_PATTERN.pattern}|{NAME_PATTERN.pattern}")
NOT_AWAITED = "the page can only be read by a top-level %agent in a kernel that awaits it (ipykernel 7.4+)"
NO_PAGE = "no notebook page is connected to this kernel (a headless run, VS Code or Colab has none)"
NO_PICTURE = "it shows no picture (no PNG, JPEG or SVG output)"
Cells = Mapping[str, "list[Picture] | str"]  # a cell id: its pictures, or why none can be attached


def attachments(
    prompt: str, namespace: Mapping[str, Any], cells: Cells | None = None, tell: Callable[[str], None] = log.info
) -> tuple[str, list[Picture]]:
    """``(the prompt with each picture named as [image N: ...], the pictures)``; ``cells``: what
    ``read_cells`` read for the prompt's ``{cell:ID}`` (``None``: the page could not be read here).
    Each cell not attached is named in the text and ``tell`` is told why."""
    found: list[Picture] = []
    seen: dict[str, str] = {}

    def replace(match: Any) -> str:
        key = match.group(0)
        if key not in seen:
            seen[key] = _cell(match.group(1)) if match.group(1) is not None else _variable(match.group(2))
        return seen[key]

    def _cell(cell_id: str) -> str:
        got = (cells or {}).get(cell_id, NOT_AWAITED if cells is None else "too many cells named")
        if isinstance(got, list):
            room = got[: MAX_ATTACHED - len(found)]
            if room:
                first = len(found) + 1
                found.extend(room)
                return " ".join(f"[image {first + i}: cell {cell_id}, {p.description}]" for i, p in enumerate(room))
            got = f"at most {MAX_ATTACHED} pictures go with one prompt" if got else NO_PICTURE
        tell(f"{{cell:{cell_id}}} not attached: {got}")
        return f"[cell {cell_id}: not attached: {got}]"

    def _variable(key: str) -> str:
        if key not in namespace or len(found) >= MAX_ATTACHED:
            return f"{{{key}}}"
        try:
            pic = from_value(namespace[key])
        except Exception as exc:  # a value that fails to draw stays a value
            log.info("%s could not be drawn as a picture: %s", key, exc)
            pic = None
        if pic is None:
            return f"{{{key}}}"
        found.append(pic)
        return f"[image {len(found)}: {key}, {pic.description}]"

    return _EITHER.sub(replace, prompt), found


def cell_ids(prompt: str) -> list[str]:
    """The cells a prompt names with ``{cell:ID}``, in order, at most ``MAX_ATTACHED`` of them."""
    return list(dict.fromkeys(CELL_PATTERN.findall(prompt)))[:MAX_ATTACHED]


async def read_cells(ids: list[str]) -> dict[str, list[Picture] | str]:
    """Each cell's pictures (display_data / execute_result outputs, bounded by ``nb_agent.pictures``)
    as the page the run is addressed to shows them, or why there are none."""
    read: dict[str, list[Picture] | str] = {}
    for cell_id in ids:  # one request each: the page refuses a whole request for one unknown id
        try:
            reply = await (await addressed()).request("read", {"cell_ids": [cell_id], "images": True})
        except FrontEndError as exc:  # the page's refusal: no such cell
            read[cell_id] = str(exc)
            continue
        except NoFrontEnd as exc:  # no page (or it did not answer): the same for every cell, asked once
            note = NO_PAGE if str(exc) == NO_FRONT_END else str(exc)
            return {i: read.get(i, note) for i in ids}
        got = reply.get("cells") if isinstance(reply, dict) else None
        outputs = got[0].get("outputs") if isinstance(got, list) and got and isinstance(got[0], dict) else None
        pictures = [
            pic
            for out in (outputs if isinstance(outputs, list) else [])
            if isinstance(out, dict) and out.get("output_type") in ("display_data", "execute_result")
            if isinstance(out.get("data"), dict) and (pic := from_bundle(_joined(out["data"]))) is not None
        ]
        read[cell_id] = pictures or NO_PICTURE
    return read


def _joined(bundle: dict[str, Any]) -> dict[str, Any]:
    """nbformat may split a value in lines (the text/plain the description's axes come from, too)."""
    return {k: "".join(str(x) for x in v) if isinstance(v, list) else v for k, v in bundle.items()}


__all__ = ["CELL_PATTERN", "MAX_ATTACHED", "attachments", "cell_ids", "read_cells"]
