"""The open notebook's cells as the model reads them, and kernel-run results as notebook outputs.

The front end sends cells as nbformat JSON (``id``, ``cell_type``, ``source``, ``execution_count``,
``outputs``); here they become text for the model: each cell's header, its source, and its outputs
summarised (streams, the text form of rich outputs, errors without colours), each cut, with images as
image parts only when asked for (they are large). :func:`to_outputs` goes the other way: a run done in
the kernel (:func:`nb_agent.kernel.runner.execute`) as nbformat outputs the front end writes into the cell.
"""

from __future__ import annotations

import re
from typing import Any

from nb_agent.kernel.provenance import describe
from nb_agent.kernel.runner import CodeResult
from nb_agent.pictures import SHOWN_TYPES, from_bundle

IMAGES = SHOWN_TYPES  # PNG, JPEG, GIF, WebP, SVG


def picture_of(bundle: dict[str, Any], images: list[tuple[str, str]] | None) -> str | None:
    """A picture output as the model reads it: ``[image: a 640x480 PNG, 3 axes]`` in the text, and
    the image itself (bounded: ``nb_agent.pictures``) appended to ``images`` when it is a list;
    never its base64 as text. ``None`` when the bundle holds no picture."""
    pic = from_bundle({k: _joined(v) for k, v in bundle.items()})  # nbformat may split a value in lines
    if pic is None:
        return None
    if images is not None and pic.data is not None:
        images.append((pic.mime_type, pic.data))
    return f"[image: {pic.description}]"


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [cut: {len(text) - limit:,} more characters not shown]"


def _joined(value: Any) -> str:
    return "".join(str(x) for x in value) if isinstance(value, list) else str(value or "")


def _bundle_text(data: dict[str, Any]) -> str:
    for mime in ("text/plain", "text/markdown"):
        if mime in data:
            return _joined(data[mime])
    if "text/html" in data:
        return "(HTML) " + _joined(data["text/html"])
    return "(" + ", ".join(data) + ")"


def outputs_text(outputs: list[Any], images: list[tuple[str, str]] | None) -> str:
    """``outputs`` (nbformat) in reading order; images are appended to ``images`` when it is a list."""
    parts: list[str] = []
    for out in outputs:
        if not isinstance(out, dict):
            continue
        kind = out.get("output_type")
        if kind == "stream":
            text = _joined(out.get("text")).replace("\r\n", "\n").rstrip("\n")
            parts.append(text if out.get("name") != "stderr" else f"[stderr]\n{text}")
        elif kind in ("display_data", "execute_result"):
            data: dict[str, Any] = out["data"] if isinstance(out.get("data"), dict) else {}
            parts.append(picture_of(data, images) or _bundle_text(data))
        elif kind == "error":
            trace = _ANSI.sub("", "\n".join(str(x) for x in out.get("traceback") or []))
            parts.append(trace or f"{out.get('ename')}: {out.get('evalue')}")
    return "\n".join(parts)


def cell_text(cell: dict[str, Any], index: int, *, output_limit: int, images: list[tuple[str, str]] | None) -> str:
    kind = cell.get("cell_type", "code")
    head = f"## cell {index} id={cell.get('id')} {kind}"
    if kind == "code":
        count = cell.get("execution_count")
        if cell.get("running"):
            head += ", running now"
        else:
            head += f", executed [{count}]" if count is not None else ", never run"
    meta = cell.get("metadata")
    made = describe(meta.get("nb_agent") if isinstance(meta, dict) else None)
    if made:
        head += f"\n({made})"
    source = _joined(cell.get("source"))
    text = f"{head}\n{source}" if source else f"{head}\n(empty)"
    outputs = cell.get("outputs") or []
    if outputs:
        text += "\n### outputs\n" + clip(outputs_text(outputs, images), output_limit)
    return text


def notebook_text(
    reply: dict[str, Any], *, asked_from: str | None, output_limit: int, limit: int, images: bool, start: int = 0
) -> tuple[str, list[tuple[str, str]]]:
    """The notebook for the model from cell ``start`` on, whole cells up to about ``limit`` characters
    (then a note says where to read on), and their images when ``images``."""
    cells = [c for c in reply.get("cells") or [] if isinstance(c, dict)]
    found: list[tuple[str, str]] = []
    head = [f"notebook: {reply.get('path') or '(unsaved)'}, {len(cells)} cells"]
    head.append(f"selected cell: {reply.get('active_cell_id') or 'none'}")
    head.append(f"you were asked from cell: {asked_from or 'none (not from a cell of this notebook)'}")
    text = "\n".join(head)
    index = max(0, start)
    while index < len(cells):
        part = cell_text(cells[index], index, output_limit=output_limit, images=found if images else None)
        if len(text) + len(part) > limit and index > start:
            break
        text += "\n\n" + part
        index += 1
    if index < len(cells):
        text += f"\n\n… cells {index} to {len(cells) - 1} not shown: call read_notebook with start={index}"
    return clip(text, limit + output_limit), found


def to_outputs(result: CodeResult) -> list[dict[str, Any]]:
    """A kernel-side run as nbformat outputs, in the order the model reads them."""
    outputs: list[dict[str, Any]] = []
    if result.stdout:
        outputs.append({"output_type": "stream", "name": "stdout", "text": result.stdout})
    if result.stderr:
        outputs.append({"output_type": "stream", "name": "stderr", "text": result.stderr})
    outputs += [{"output_type": "display_data", "data": d, "metadata": {}} for d in result.displays]
    if result.result:
        outputs.append(
            {"output_type": "execute_result", "data": result.result, "metadata": {}, "execution_count": None}
        )
    if result.error:
        name, _, value = result.error.rpartition("\n")[2].partition(": ")
        outputs.append({"output_type": "error", "ename": name, "evalue": value, "traceback": result.error.split("\n")})
    return outputs
