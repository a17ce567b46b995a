"""Pictures for a model: a plot, a cell's PNG / JPEG / SVG output, an image variable; bounded and described.

A plot is worth showing a model as an image, never as base64 text (datalayer/jupyter-mcp-server#200:
a plot overflowed tool responses that way). Each picture here is:

* **bounded**: at most ``MAX_SIDE`` pixels on its long side and ``MAX_PIXELS`` in all (Anthropic's
  advice for its models, https://docs.claude.com/en/docs/build-with-claude/vision#evaluate-image-size;
  OpenAI's "high" detail scales to 2048 then 768 on the short side), downscaled with Pillow where it is
  installed (matplotlib brings it); where it is not, a picture over ``MAX_BYTES`` is described instead;
* **counted**: ``tokens()`` estimates what it costs in context (width x height / 750, Anthropic's rule),
  for the context meter until the provider reports real counts;
* **described**: ``description`` is one line ("a 640x480 PNG, 3 axes") that a model without vision
  gets instead of the image, and that tool results say where the image was.

Sizes are read from the file's own header (PNG IHDR, JPEG SOF, GIF, SVG ``width``/``height`` or
``viewBox``) by hand: a few bytes, no decoder needed. SVG is rasterised with ``cairosvg`` when it is
installed; otherwise it is described (models take PNG, JPEG, GIF and WebP).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import io
import re
import struct
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

MAX_SIDE = 1568
MAX_PIXELS = 1_150_000
MAX_BYTES = 3_750_000  # raw bytes of one image (5 MB once base64-encoded: the providers' usual cap)
MAX_INPUT = 8 * MAX_BYTES  # characters of one output's data read at all (a large photo still gets downscaled)
MODEL_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")  # what vision models take
SHOWN_TYPES = (*MODEL_TYPES, "image/svg+xml")
_NAMES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP", "image/svg+xml": "SVG"}
_AXES = re.compile(r"with (\d+) Axes")
_SVG_SIZE = re.compile(r"<svg\b[^>]*?\bwidth=\"([\d.]+)(?:pt|px)?\"[^>]*?\bheight=\"([\d.]+)(?:pt|px)?\"", re.S)
_SVG_BOX = re.compile(r"<svg\b[^>]*?\bviewBox=\"[\d.\-]+[ ,]+[\d.\-]+[ ,]+([\d.]+)[ ,]+([\d.]+)\"", re.S)


@dataclass(frozen=True)
class Picture:
    """An image as a model takes it: ``data`` base64 of a PNG / JPEG / GIF / WebP, or ``None`` when
    it could not be made one (then only ``description`` goes to the model)."""

    mime_type: str
    data: str | None
    width: int | None
    height: int | None
    description: str

    def tokens(self) -> int:
        """Its estimated cost in context, in tokens (a described picture costs its words)."""
        if self.data is None:
            return len(self.description) // 4 + 1
        if self.width and self.height:
            return max(1, self.width * self.height // 750)
        return 1_000


def size_of(mime_type: str, raw: bytes) -> tuple[int, int] | None:
    """(width, height) from the image's header, or ``None`` when it does not say."""
    try:
        if mime_type == "image/png" and raw[:8] == b"\x89PNG\r\n\x1a\n" and raw[12:16] == b"IHDR":
            w, h = struct.unpack(">II", raw[16:24])
            return int(w), int(h)
        if mime_type == "image/gif" and raw[:3] == b"GIF":
            w, h = struct.unpack("<HH", raw[6:10])
            return int(w), int(h)
        if mime_type == "image/jpeg":
            return _jpeg_size(raw)
        if mime_type == "image/svg+xml":
            head = raw[:4096].decode("utf-8", "replace")
            m = _SVG_SIZE.search(head) or _SVG_BOX.search(head)
            return (round(float(m[1])), round(float(m[2]))) if m else None
    except (struct.error, ValueError):
        return None
    return None


def _jpeg_size(raw: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 < len(raw) and raw[at] == 0xFF:
        marker = raw[at + 1]
        length = struct.unpack(">H", raw[at + 2 : at + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
            h, w = struct.unpack(">HH", raw[at + 5 : at + 9])
            return int(w), int(h)
        at += 2 + length
    return None


def describe(mime_type: str, size: tuple[int, int] | None, hint: str | None = None) -> str:
    """ "a 640x480 PNG, 3 axes": the kind, the size, and what ``hint`` (the output's text form, such
    as matplotlib's ``<Figure size 640x480 with 3 Axes>``) adds."""
    kind = _NAMES.get(mime_type, mime_type)
    text = f"a {size[0]}x{size[1]} {kind}" if size else f"a {kind} image"
    m = _AXES.search(hint or "")
    if m:
        n = int(m[1])
        text += f", {n} {'axis' if n == 1 else 'axes'}"
    return text


def picture(mime_type: str, data: str | bytes, hint: str | None = None) -> Picture:
    """A picture from an output's base64 (or raw) data, bounded for a model; ``hint``: the output's text."""
    if len(data) > MAX_INPUT:  # hostile or huge: not decoded, not handed to a decoder
        return Picture(mime_type, None, None, None, f"a {_NAMES.get(mime_type, mime_type)} image too large to read")
    try:
        raw = data if isinstance(data, bytes) else base64.b64decode("".join(data.split()), validate=False)
    except (binascii.Error, ValueError):
        return Picture(mime_type, None, None, None, f"an unreadable {_NAMES.get(mime_type, mime_type)} image")
    size = size_of(mime_type, raw)
    description = describe(mime_type, size, hint)
    w, h = size or (None, None)
    if mime_type == "image/svg+xml":
        png = _rasterised(raw)
        if png is None:
            return Picture(mime_type, None, w, h, description)
        raw, mime_type, size = png, "image/png", size_of("image/png", png)
    if mime_type not in MODEL_TYPES:
        return Picture(mime_type, None, w, h, description)
    if size is None or size[0] > MAX_SIDE or size[1] > MAX_SIDE or size[0] * size[1] > MAX_PIXELS:
        smaller = _downscaled(raw, mime_type)
        if smaller is not None:
            raw, size = smaller
        else:  # too large and nothing here can make it smaller, or not the image it says (a provider refuses it)
            return Picture(mime_type, None, w, h, description)
    if len(raw) > MAX_BYTES:
        return Picture(mime_type, None, w, h, description)
    w, h = size or (None, None)
    return Picture(mime_type, base64.b64encode(raw).decode("ascii"), w, h, description)


def _downscaled(raw: bytes, mime_type: str) -> tuple[bytes, tuple[int, int]] | None:
    """The image resized to fit the bounds (same format), with Pillow; ``None`` without it."""
    try:
        from PIL import Image
    except ImportError:
        return None
    try:
        with Image.open(io.BytesIO(raw)) as img:
            w, h = img.size
            scale = min(1.0, MAX_SIDE / max(w, h), (MAX_PIXELS / (w * h)) ** 0.5)
            if scale >= 1.0:
                return raw, (w, h)
            small = img.resize((max(1, int(w * scale)), max(1, int(h * scale))))
            out = io.BytesIO()
            fmt = "JPEG" if mime_type == "image/jpeg" else "PNG"
            (small.convert("RGB") if fmt == "JPEG" else small).save(out, format=fmt)
            return out.getvalue(), small.size
    except Exception:  # an image Pillow cannot read: described instead
        return None


def _rasterised(svg: bytes) -> bytes | None:
    try:
        import cairosvg  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        png: bytes = cairosvg.svg2png(bytestring=svg)
        return png
    except Exception:
        return None


def from_bundle(bundle: dict[str, Any]) -> Picture | None:
    """The picture in a display bundle (``{"image/png": ..., "text/plain": "<Figure ...>"}``), if any:
    a raster image first, SVG only when there is none."""
    hint = bundle.get("text/plain")
    for mime_type in SHOWN_TYPES:
        value = bundle.get(mime_type)
        if isinstance(value, list):
            value = "".join(str(v) for v in value)
        if isinstance(value, str | bytes) and value:
            if mime_type == "image/svg+xml" and isinstance(value, str):
                value = value.encode("utf-8")
            return picture(mime_type, value, hint if isinstance(hint, str) else None)
    return None


def from_value(value: Any) -> Picture | None:
    """A kernel value as a picture: a matplotlib Figure or Axes, a PIL image, ``IPython.display.Image``,
    anything with ``_repr_png_`` / ``_repr_jpeg_`` / ``_repr_svg_``; ``None`` for anything else."""
    figure = getattr(value, "figure", None) if hasattr(value, "get_figure") and hasattr(value, "plot") else None
    if figure is not None:  # an Axes: its whole figure
        value = figure
    if hasattr(value, "savefig") and hasattr(value, "axes"):
        out = io.BytesIO()
        value.savefig(out, format="png")
        axes = len(getattr(value, "axes", []) or [])
        return picture("image/png", out.getvalue(), f"with {axes} Axes")
    if hasattr(value, "save") and hasattr(value, "size") and hasattr(value, "mode"):  # PIL.Image.Image
        out = io.BytesIO()
        value.save(out, format="PNG")
        return picture("image/png", out.getvalue())
    for method, mime_type in (
        ("_repr_png_", "image/png"),
        ("_repr_jpeg_", "image/jpeg"),
        ("_repr_svg_", "image/svg+xml"),
    ):
        render = getattr(value, method, None)
        if callable(render) and not isinstance(value, type):
            data = render()
            if isinstance(data, tuple):  # (data, metadata)
                data = data[0]
            if isinstance(data, str) and mime_type == "image/svg+xml":
                data = data.encode("utf-8")
            if isinstance(data, str | bytes) and data:
                return picture(mime_type, data)
    return None


_ATTACHED: ContextVar[tuple[Picture, ...]] = ContextVar("nb_agent_attached", default=())


@contextlib.contextmanager
def attaching(pictures: Sequence[Picture]) -> Iterator[None]:
    """The pictures the front end attaches to the prompt of the run started inside this block (a
    ``{fig}`` in ``%agent``'s prompt): the run's client reads them with ``attached()``."""
    token = _ATTACHED.set(tuple(pictures))
    try:
        yield
    finally:
        _ATTACHED.reset(token)


def attached() -> tuple[Picture, ...]:
    return _ATTACHED.get()


__all__ = [
    "MAX_PIXELS",
    "MAX_SIDE",
    "MODEL_TYPES",
    "Picture",
    "attached",
    "attaching",
    "describe",
    "from_bundle",
    "from_value",
    "picture",
    "size_of",
]
