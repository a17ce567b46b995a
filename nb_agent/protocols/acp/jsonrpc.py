"""JSON-RPC 2.0 message checks for ACP, both ends: what is one well-formed message, and the error that says what is not.

The SDK's connection (``acp``) hands whatever ``json.loads`` returns to code that calls ``.get`` on
it and looks ids up in a dict, so one line holding a JSON array, or a response whose ``id`` is a
list or whose ``error`` is a number, kills a connection from either side. ``nb-agent acp``
(``agent/servers/acp/transport``) answers such a message with an error and goes on; the client
(``stdio``) does the same with what an agent sends. Checked against the specification,
https://www.jsonrpc.org/specification (sections 4, 5 and 5.1):

* not JSON: ``-32700 Parse error``, ``id`` null;
* JSON that is not one request, notification or response object (an array, i.e. a batch, which
  ACP does not use; a number; an object with neither ``method`` nor ``id``; a ``method`` that is
  not a string; an ``id`` that is not a string or an integer; ``params`` that are neither object
  nor array; a response without ``result`` or ``error``, or whose ``error`` is not an object with
  an integer ``code`` and a string ``message``): ``-32600 Invalid Request``, with the request's
  ``id`` when it had a usable one, else null.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
from collections.abc import Iterator
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
CANCEL_REQUEST = "$/cancel_request"  # https://agentclientprotocol.com/protocol/v1/cancellation
_SENT: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("nb_agent_acp_sent", default=None)


@contextlib.contextmanager
def requests_sent() -> Iterator[list[Any]]:
    """The ids of the requests a transport sends from inside this block (its tasks too, which copy the
    context): what a ``$/cancel_request`` names when the sender gives up on one."""
    ids: list[Any] = []
    token = _SENT.set(ids)
    try:
        yield ids
    finally:
        _SENT.reset(token)


def note_sent(message: Message) -> None:
    """A transport's ``send``: keep a request's id for the ``requests_sent()`` block it was sent in."""
    sent = _SENT.get()
    if sent is not None and "method" in message and "id" in message:
        sent.append(message["id"])


def cancel_request(request_id: Any) -> Message:
    return {"jsonrpc": "2.0", "method": CANCEL_REQUEST, "params": {"requestId": request_id}}


Message = dict[str, Any]


def error_response(code: int, message: str, request_id: Any = None, details: str | None = None) -> Message:
    """A JSON-RPC error response; ``data.details`` says what was wrong, for the client's log."""
    error: Message = {"code": code, "message": message}
    if details:
        error["data"] = {"details": details}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _usable_id(value: Any) -> bool:
    """A string or an integer (not a bool): what the SDK can echo and look up (section 4: numbers
    SHOULD NOT have fractions; null is for notifications' answers only)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _invalid(details: str, request_id: Any = None) -> Message:
    return error_response(INVALID_REQUEST, "Invalid Request", request_id, details)


def check_message(line: bytes | str) -> tuple[Message | None, Message | None]:
    """``(message, None)`` for a well-formed request, notification or response; ``(None, error)``
    with the error response to send back otherwise (``(None, None)`` for a blank line)."""
    if not line.strip():
        return None, None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        return None, error_response(PARSE_ERROR, "Parse error", None, f"not JSON: {str(exc)[:200]}")
    return check_value(value)


def check_value(value: Any) -> tuple[Message | None, Message | None]:
    """``check_message`` for a line already parsed."""
    if isinstance(value, list):
        return None, _invalid("a batch (JSON array): ACP sends one message per line")
    if not isinstance(value, dict):
        return None, _invalid(f"a JSON {type(value).__name__}, not a JSON-RPC object")
    request_id = value.get("id")
    echo = request_id if _usable_id(request_id) else None
    if "id" in value and request_id is not None and not _usable_id(request_id):
        return None, _invalid("the id must be a string or an integer")
    if "method" in value:
        if not isinstance(value["method"], str):
            return None, _invalid("the method must be a string", echo)
        if "params" in value and not isinstance(value["params"], (dict, list)):
            return None, _invalid("params must be an object or an array", echo)
        return value, None
    if not _usable_id(request_id):
        return None, _invalid("neither a request (method) nor a response (id)")
    if ("result" in value) == ("error" in value):
        return None, _invalid("a response holds exactly one of result and error", echo)
    if "error" in value:
        error = value["error"]
        code = error.get("code") if isinstance(error, dict) else None
        if not (isinstance(code, int) and not isinstance(code, bool) and isinstance(error.get("message"), str)):
            return None, _invalid("a response's error must be an object with an integer code and a message", echo)
    return value, None


async def read_line(reader: asyncio.StreamReader, limit: int, *, skip_overlong: bool) -> bytes | int | None:
    """One newline-delimited line (ACP's stdio framing), read in bounded pieces: ``None`` at EOF; past
    ``limit``, its size so far as an ``int``, at once (``skip_overlong=False``: the client ends such
    an agent) or once the rest of the line is read and dropped (the server answers and reads on).

    By hand because ``StreamReader.readline`` raises past its own limit and loses the line's place;
    the SDK's framing has no cap at all."""
    pieces: list[bytes] = []
    size = 0
    while True:
        try:
            piece = await reader.readuntil(b"\n")
            complete = True
        except asyncio.LimitOverrunError as exc:  # no newline in the buffer yet: take what is there
            piece = await reader.readexactly(exc.consumed)
            complete = False
        except asyncio.IncompleteReadError as exc:  # EOF: the last line had no newline
            if not exc.partial and not pieces and size <= limit:
                return None
            piece, complete = exc.partial, True
        size += len(piece)
        if size > limit:
            pieces.clear()  # drop what was read
            if not skip_overlong:
                return size
        else:
            pieces.append(piece)
        if complete:
            return size if size > limit else b"".join(pieces)


__all__ = [
    "CANCEL_REQUEST",
    "INVALID_REQUEST",
    "PARSE_ERROR",
    "Message",
    "cancel_request",
    "check_message",
    "check_value",
    "error_response",
    "note_sent",
    "read_line",
    "requests_sent",
]
