"""Pictures in the built-in agent's conversation: attached to a prompt, returned by a tool, sent to a model.

A prompt's pictures (``{fig}`` in ``%agent``, an ACP client's image blocks: ``pictures.attached``)
join the user's message as image parts; a tool's images (a plot ``run_code`` or ``read_notebook``
returned, already bounded by ``pictures``) join its result. A model that takes images gets them as
the provider's image parts; one that does not (``Provider.sees_images``) gets, in their place, the
one-line description ("[image: a 640x480 PNG, 3 axes]"), never the base64 as text. ``tokens`` counts
them for the context meter until the provider reports real numbers.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence

from nb_agent.agent.messages import ImagePart, Message, Part, TextPart
from nb_agent.pictures import Picture, describe, picture, size_of


def prompt_parts(prompt: str, pictures: Sequence[Picture]) -> Message:
    """The user's message: the prompt, then each picture (its description where it is no image)."""
    parts: list[Part] = [TextPart(text=prompt)]
    for pic in pictures:
        if pic.data is not None:
            parts.append(ImagePart(mime_type=pic.mime_type, data=pic.data, description=pic.description))
        else:
            parts.append(TextPart(text=f"\n[image: {pic.description}]"))
    return Message(role="user", content=parts)


def tool_parts(images: Sequence[tuple[str, str]]) -> list[Part]:
    """A tool's images as parts, bounded (a tool of the user's own may return any size)."""
    out: list[Part] = []
    for mime_type, data in images:
        pic = picture(mime_type, data)
        if pic.data is not None:
            out.append(ImagePart(mime_type=pic.mime_type, data=pic.data, description=pic.description))
        else:
            out.append(TextPart(text=f"\n[image: {pic.description}]"))
    return out


def _described(part: ImagePart) -> str:
    if part.description:
        return part.description
    try:
        raw = base64.b64decode(part.data[:64], validate=False)
    except (binascii.Error, ValueError):
        raw = b""
    return describe(part.mime_type, size_of(part.mime_type, raw))


def for_model(messages: list[Message], sees_images: bool) -> list[Message]:
    """``messages`` as this model takes them: unchanged for a model with vision; otherwise each
    image replaced by its description (the same list when there is none: no copy)."""
    if sees_images or not any(isinstance(p, ImagePart) for m in messages for p in m.content):
        return messages
    out: list[Message] = []
    for message in messages:
        if any(isinstance(p, ImagePart) for p in message.content):
            parts = [
                TextPart(text=f"\n[image: {_described(p)}]") if isinstance(p, ImagePart) else p for p in message.content
            ]
            message = message.model_copy(update={"content": parts})
        out.append(message)
    return out


def tokens(messages: list[Message]) -> int:
    """What the images cost in context (Anthropic's rule: width x height / 750; 1,000 when unknown)."""
    total = 0
    for message in messages:
        for part in message.content:
            if isinstance(part, ImagePart):
                try:
                    size = size_of(part.mime_type, base64.b64decode(part.data[:64], validate=False))
                except (binascii.Error, ValueError):
                    size = None
                total += max(1, size[0] * size[1] // 750) if size else 1_000
    return total


__all__ = ["for_model", "prompt_parts", "tokens", "tool_parts"]
