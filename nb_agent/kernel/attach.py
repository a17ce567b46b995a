"""Pictures a prompt names: ``%agent what is wrong with this chart? {fig}`` attaches the figure itself.

A ``{name}`` whose value is a picture (a matplotlib Figure or Axes, a PIL image, an
``IPython.display.Image``, anything with ``_repr_png_`` / ``_repr_jpeg_`` / ``_repr_svg_``:
``nb_agent.pictures.from_value``) becomes ``[image N: a 640x480 PNG, 3 axes]`` in the prompt's text,
and the picture goes with the prompt (``pictures.attaching``): as an image to a model or ACP agent
that takes images, as that description to one that does not. Every other ``{name}`` is left for
``variables.interpolate``. At most ``MAX_ATTACHED`` pictures per prompt.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from nb_agent.kernel.variables import NAME_PATTERN
from nb_agent.pictures import Picture, from_value

log = logging.getLogger("nb_agent.kernel")

MAX_ATTACHED = 5


def attachments(prompt: str, namespace: Mapping[str, Any]) -> tuple[str, list[Picture]]:
    """``(the prompt with each picture named as [image N: ...], the pictures)``."""
    found: list[Picture] = []
    seen: dict[str, str] = {}

    def replace(match: Any) -> str:
        key = match.group(1)
        if key in seen:
            return seen[key]
        if key not in namespace or len(found) >= MAX_ATTACHED:
            return str(match.group(0))
        try:
            pic = from_value(namespace[key])
        except Exception as exc:  # a value that fails to draw stays a value
            log.info("%s could not be drawn as a picture: %s", key, exc)
            pic = None
        if pic is None:
            return str(match.group(0))
        found.append(pic)
        seen[key] = f"[image {len(found)}: {key}, {pic.description}]"
        return seen[key]

    return NAME_PATTERN.sub(replace, prompt), found


__all__ = ["MAX_ATTACHED", "attachments"]
