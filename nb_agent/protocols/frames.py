"""Decoding one SSE frame's JSON, tolerantly: a bad frame is skipped and logged, never fatal."""

from __future__ import annotations

import json
import logging
from typing import Any

from httpx_sse import ServerSentEvent

log = logging.getLogger("nb_agent.protocols")


def decode_frame(sse: ServerSentEvent, protocol: str) -> dict[str, Any] | None:
    """The frame's JSON object, or ``None`` (with a warning) when it is not one."""
    try:
        data = json.loads(sse.data)
    except ValueError:
        log.warning("%s: skipped a frame that is not JSON: %.120r", protocol, sse.data)
        return None
    if not isinstance(data, dict):
        log.warning("%s: skipped a frame that is not a JSON object: %.120r", protocol, sse.data)
        return None
    return data
