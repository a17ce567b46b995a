"""The two events every streamed token becomes (``text_delta``, ``thinking``), made without a walk
through pydantic's validator when there is nothing to validate.

Validating ``TextDelta(message_id=m, delta=d)`` checks that ``m`` and ``d`` are strings, and cost
more (about 1 us) than decoding the frame the delta came in. When both already are exactly ``str``
(a JSON decoder makes nothing else, and the mappers call ``str()``), that check has nothing left to
refuse, so the event is built as pydantic's own ``model_construct`` would build it (the instance
dict, the set fields, no extras, no private attributes: https://docs.pydantic.dev/latest/api/base_model/#pydantic.BaseModel.model_construct),
without its per-field loop, which costs even more than validating. Anything else -- a subclass of
``str``, ``None`` where a string is due, a number -- goes through the model itself and is refused
or converted exactly as before. ``tests/wire/test_wire_speed.py`` holds the two paths to one answer.
"""

from __future__ import annotations

from pydantic import BaseModel

from nb_agent.events import TextDelta, Thinking

__all__ = ["text_delta", "thinking"]

_new = object.__new__
# the slots pydantic's BaseModel keeps beside the instance dict, set through their own descriptors
_FIELDS_SET = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_EXTRA = BaseModel.__dict__["__pydantic_extra__"].__set__
_PRIVATE = BaseModel.__dict__["__pydantic_private__"].__set__
# One set of set fields for every fast event of a kind, as ``model_construct(_fields_set=...)`` allows:
# events are frozen, so pydantic never adds to it (assignment is refused before it would, and
# ``model_copy`` copies the set first). A set per event was a container the cyclic collector tracked,
# alive with the rest of a network read's events: 0.1 us and a gen-0 collection every ~350 events.
_TEXT_FIELDS = {"message_id", "delta"}
_THINKING_FIELDS = {"delta", "message_id"}


def text_delta(message_id: str, delta: str) -> TextDelta:
    """``TextDelta(message_id=message_id, delta=delta)``, the same event."""
    if type(message_id) is not str or type(delta) is not str:
        return TextDelta(message_id=message_id, delta=delta)
    event: TextDelta = _new(TextDelta)
    event.__dict__.update(type="text_delta", message_id=message_id, delta=delta)
    _FIELDS_SET(event, _TEXT_FIELDS)
    _EXTRA(event, None)
    _PRIVATE(event, None)
    return event


def thinking(delta: str, message_id: str | None) -> Thinking:
    """``Thinking(delta=delta, message_id=message_id)``, the same event (both fields given)."""
    if type(delta) is not str or (message_id is not None and type(message_id) is not str):
        return Thinking(delta=delta, message_id=message_id)
    event: Thinking = _new(Thinking)
    event.__dict__.update(type="thinking", delta=delta, message_id=message_id)
    _FIELDS_SET(event, _THINKING_FIELDS)
    _EXTRA(event, None)
    _PRIVATE(event, None)
    return event
