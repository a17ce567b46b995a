"""The wire's fast paths (issue 24, item 5) decide exactly as the slow paths they stand in front of.

Each fast path answers "nothing to do here" for almost every frame or delta without the costly
check; these tests pin that it never says so where the costly check would have found something:
a lone surrogate the JSON decoder must scrub, a key shape still being written that the stream
redactor must hold back, a Goose frame the general walk would map differently.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from nb_agent.events import TextDelta, ToolCall
from nb_agent.protocols.goose.decode import GooseMapper
from nb_agent.secret_stream import _OPEN_SHAPE, _TOKEN, StreamRedactor, _may_open
from nb_agent.wire import jsondecode

REPLACEMENT = "\ufffd"


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        ('{"t":"a\\ud800b"}', "a" + REPLACEMENT + "b"),  # ASCII text, an escaped lone surrogate
        ('{"t":"a\\uDC00b"}', "a" + REPLACEMENT + "b"),  # upper-case hex
        (b'{"t":"a\\ud800b"}', "a" + REPLACEMENT + "b"),  # ASCII bytes
        ('{"t":"\u00e9\ud800"}', "\u00e9" + REPLACEMENT),  # not ASCII: a surrogate character itself
        ('{"t":"\u00e9\\ud800"}', "\u00e9" + REPLACEMENT),  # not ASCII, escaped
        (b'{"t":"\xc3\xa9\xed\xa0\x80"}', "\u00e9" + REPLACEMENT),  # UTF-8 bytes of a surrogate
        ('{"t":"\\ud83d\\ude00"}', "\U0001f600"),  # a valid pair: one character, kept
        ('{"t":"\u65e5\u672c\u8a9e"}', "\u65e5\u672c\u8a9e"),  # ordinary text that is not ASCII
        ('{"t":"line\\nnext"}', "line\nnext"),  # an escape that is no surrogate
    ],
)
def test_every_frame_decodes_to_encodable_text(frame: str | bytes, expected: str) -> None:
    value = jsondecode.loads(frame)
    assert value == {"t": expected}
    value["t"].encode("utf-8")  # what the widget, the CLI and the saved notebook do with it


def test_a_plain_frame_is_json_loads_own_answer() -> None:
    frame = json.dumps({"type": "Message", "message": {"content": [{"type": "text", "text": " quick"}]}})
    assert jsondecode.loads(frame) == json.loads(frame)
    with pytest.raises(ValueError, match="nested too deeply"):
        jsondecode.loads("[" * 100_000 + "]" * 100_000)


def test_the_open_shape_precheck_never_skips_a_text_the_regex_matches() -> None:
    """``_may_open`` stands in front of ``_OPEN_SHAPE``: whatever the regex matches, it lets through."""
    pieces = [*"sgAxheBbkK-_.~+/= \\nuz0139aryJIpoSfé\t"]
    pieces += ["Bearer ", "bearer ", "sk-", "ghp_", "github_pat_", "AKIA", "ASIA", "xoxb-", "AIza", "hf_", "eyJ"]
    pieces += ["\\x41", "\\u0041", "\\n"]
    rng = random.Random(24)
    matched = 0
    for _ in range(40_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 7)))
        run = len(text.rstrip(_TOKEN))
        if _OPEN_SHAPE.search(text, run - 8 if run > 8 else 0) is not None:
            matched += 1
            assert _may_open(text, run), text
    assert matched > 5_000  # the fuzz does reach the regex's matches


@pytest.mark.parametrize("start", ["sk-", "ghp_", "Bearer ", "AKIA", "eyJ", "xoxb-", "hf_", "AIza"])
@pytest.mark.parametrize("before", [" ", "x.", "\\n", "key=", "\t"])  # a boundary before it
def test_a_key_shape_split_after_its_start_is_still_masked(start: str, before: str) -> None:
    body = {"AKIA": "ABCDEFGHIJKLMNOP", "AIza": "B" * 35, "eyJ": "abcdefghij.eyJabcdefghij.abcdefghij"}.get(start, "")
    key = start + (body or "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6")
    stream = StreamRedactor()
    shown = stream.feed("m", "the key is" + before + key[:2])
    shown += stream.feed("m", key[2:])
    shown += stream.feed("m", " done") + stream.flush("m")
    assert key[2:] not in shown, shown
    assert shown.endswith(" done")


def test_a_one_text_goose_frame_maps_as_the_general_walk_does() -> None:
    text = {"type": "text", "text": " quick"}
    call = {"type": "toolRequest", "id": "c1", "toolCall": {"status": "success", "value": {"name": "t"}}}
    frames = [
        {"type": "Message", "message": {"id": "m1", "role": "assistant", "content": [text]}},
        {"type": "Message", "message": {"id": "m1", "role": "user", "content": [text]}},  # not shown
        {"type": "Message", "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": ""}]}},
        {"type": "Message", "message": {"role": "assistant", "content": [{"type": "text", "text": 7}]}},
        {"type": "Message", "message": {"id": "m2", "role": "assistant", "content": [text, call]}},
    ]
    events = [ev for data in frames for ev in GooseMapper().frame(data)]
    assert events[:2] == [
        TextDelta(message_id="m1", delta=" quick"),
        TextDelta(message_id="goose-assistant", delta="7"),
    ]
    assert events[2] == TextDelta(message_id="m2", delta=" quick")
    assert isinstance(events[3], ToolCall)


@pytest.mark.parametrize(
    "frame",
    [
        '{"a":1}',
        ' {"a":1}',
        '{"a":1} \n',
        '{"a":1}x',
        '{"a":1}{"b":2}',
        "1 2",
        "x",
        "",
        "[",
        '{"a":}',
        '"\\x"',
        "NaN",
        "true",
        "-",
        b'{"a":1}',
        b' {"a": [1, 2.5]} ',
    ],
)
def test_the_scanner_shortcut_gives_json_loads_value_or_error(frame: str | bytes) -> None:
    """``jsondecode`` calls the C scanner itself for a frame that is one value end to end; every
    other frame, and every error, is ``json.loads``'s own."""
    assert outcome(jsondecode.loads, frame) == outcome(json.loads, frame)


def outcome(decode: Callable[[str | bytes], Any], frame: str | bytes) -> tuple[str, str]:
    """What decoding ``frame`` gives: its value's repr (NaN compares by it), or the error's message."""
    try:
        return ("value", repr(decode(frame)))
    except ValueError as exc:
        return ("error", str(exc))
