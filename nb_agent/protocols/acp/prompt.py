"""A turn's prompt as ACP content blocks: the text, and the pictures attached to it.

ACP prompts are content blocks (https://agentclientprotocol.com/protocol/v1/content); images are
sent only to an agent that declares ``promptCapabilities.image`` (every agent must take text). To
another, or for a picture that could not be made a model's image (``pictures``), the prompt carries
its one-line description instead, and the run says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from acp import image_block, text_block
from acp.schema import (
    AudioContentBlock,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
)

from nb_agent.pictures import Picture

Attachment = Picture
Block = TextContentBlock | ImageContentBlock | AudioContentBlock | ResourceContentBlock | EmbeddedResourceContentBlock


def takes_images(agent_info: Mapping[str, Any]) -> bool:
    caps = agent_info.get("agentCapabilities")
    prompt = caps.get("promptCapabilities") if isinstance(caps, dict) else None
    return isinstance(prompt, dict) and prompt.get("image") is True


def prompt_blocks(
    text: str, attachments: Sequence[Attachment], agent_info: Mapping[str, Any]
) -> tuple[list[Block], list[str]]:
    """The blocks to send, and notes for the run (what went as a description, and why)."""
    if not attachments:
        return [text_block(text)], []
    images = takes_images(agent_info)
    blocks: list[Block] = []
    described: list[str] = []
    for n, pic in enumerate(attachments, 1):
        if images and pic.data is not None:
            blocks.append(image_block(pic.data, pic.mime_type))
        else:
            described.append(f"[image {n}: {pic.description}]")
    if described:
        text = "\n".join([text, *described])
    notes = []
    if described:
        why = (
            "the agent takes no images (promptCapabilities.image)" if not images else "they could not be sent as images"
        )
        notes.append(f"{len(described)} picture(s) sent as their description: {why}")
    return [text_block(text), *blocks], notes


__all__ = ["Attachment", "prompt_blocks", "takes_images"]
