"""The WHATWG event-stream parser: spec cases, httpx-sse's known gaps, and properties."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nb_agent.errors import FrameError
from nb_agent.wire.parser import SSEParser


def parse(*chunks: bytes) -> list[tuple[str, str, str]]:
    p = SSEParser()
    out = []
    for c in chunks:
        out += [(e.event, e.data, e.id) for e in p.feed(c)]
    p.close()
    return out


def test_multiline_data_event_and_id() -> None:
    assert parse(b"event: x\nid: 7\ndata: a\ndata: b\n\n") == [("x", "a\nb", "7")]


@pytest.mark.parametrize("nl", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(nl: bytes) -> None:
    raw = b"data: one" + nl + nl + b"data: two" + nl + nl
    assert parse(raw) == [("message", "one", ""), ("message", "two", "")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    assert parse(b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n") == [("message", "a", ""), ("message", "b", "")]


def test_leading_bom_keeps_first_event() -> None:
    # httpx-sse 0.4.3 drops this event.
    assert parse(b"\xef\xbb\xbfdata: first\n\ndata: second\n\n") == [
        ("message", "first", ""),
        ("message", "second", ""),
    ]


def test_bom_split_across_chunks() -> None:
    assert parse(b"\xef\xbb", b"\xbfdata: x\n\n") == [("message", "x", "")]


def test_id_only_block_moves_cursor_without_dispatch() -> None:
    p = SSEParser()
    assert p.feed(b"id: 41\n\n") == []  # httpx-sse dispatches this
    assert p.last_event_id == "41"
    [ev] = p.feed(b"data: x\n\n")
    assert ev.id == "41"


def test_cursor_waits_for_the_end_of_the_block() -> None:
    p = SSEParser()
    p.feed(b"id: 1\ndata: a\n\nid: 2\ndata: b")
    assert p.last_event_id == "1"  # event 2 is not complete: resuming must ask for it again
    p.feed(b"\n\n")
    assert p.last_event_id == "2"


def test_comments_field_without_colon_nul_id_bad_retry() -> None:
    p = SSEParser()
    evs = p.feed(b": ping\ndata\nid: a\x00b\nretry: 12x\ndata:no-space\n\n")
    assert [(e.data, e.id) for e in evs] == [("\nno-space", "")]
    assert p.retry is None
    assert p.comments == 1
    p.feed(b"retry: 2500\n\n")
    assert p.retry == 2500


def test_unicode_digits_are_not_a_retry() -> None:
    p = SSEParser()
    p.feed("retry: ²³\n\n".encode())
    assert p.retry is None


def test_unterminated_event_at_eof_is_discarded() -> None:
    assert parse(b"data: done\n\ndata: partial") == [("message", "done", "")]


def test_truncated_utf8_never_crashes() -> None:
    snowman = "☃".encode()
    assert parse(b"data: " + snowman[:2], b"\n\n") == [("message", "\ufffd", "")]
    assert parse(b"data: " + snowman[:1], snowman[1:] + b"\n\n") == [("message", "☃", "")]


def test_one_megabyte_data_line_in_small_chunks() -> None:
    big = b"x" * 1_000_000
    raw = b"data: " + big + b"\n\n"
    chunks = [raw[i : i + 4096] for i in range(0, len(raw), 4096)]
    [(_, data, _)] = parse(*chunks)
    assert len(data) == 1_000_000


def test_oversized_event_is_a_clear_error() -> None:
    p = SSEParser(max_event_bytes=1000)
    with pytest.raises(FrameError, match="exceeds 1000"):
        p.feed(b"data: " + b"y" * 2000)
    p = SSEParser(max_event_bytes=1000)
    with pytest.raises(FrameError):
        p.feed(b"data: " + b"y" * 600 + b"\ndata: " + b"y" * 600 + b"\n")


def _feed_many(p: SSEParser, chunk: bytes, times: int) -> None:
    for _ in range(times):
        p.feed(chunk)


def test_empty_data_lines_count_towards_the_cap() -> None:
    # Each empty ``data:`` line holds a list slot but no character: a server sending them forever
    # (300 MB received grew the process by 444 MB) must hit the cap like one long line does.
    p = SSEParser(max_event_bytes=64 * 1024)
    with pytest.raises(FrameError, match="exceeds 65536"):
        _feed_many(p, b"data:\n" * 4096, 1000)  # 24 MB at most; the cap must trip long before


def test_held_memory_stays_under_the_cap() -> None:
    cap = 1024 * 1024
    p = SSEParser(max_event_bytes=cap)
    tracemalloc.start()
    try:
        with pytest.raises(FrameError):
            _feed_many(p, b"data: ab\n" * 4096, 2000)  # two-character lines: a string object each
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * cap


# -- properties ----------------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_characters="\r\n\x00", blacklist_categories=("Cs",)), max_size=40)
_events = st.lists(
    st.tuples(
        st.one_of(st.just(""), st.from_regex(r"[a-z_]{1,10}", fullmatch=True)),
        st.lists(_text, min_size=1, max_size=3),
        st.one_of(st.just(""), st.from_regex(r"[0-9]{1,5}", fullmatch=True)),
    ),
    max_size=12,
)


def _serialize(events: list[tuple[str, list[str], str]], nl: str) -> bytes:
    out = []
    for name, lines, eid in events:
        if name:
            out.append(f"event: {name}{nl}")
        if eid:
            out.append(f"id: {eid}{nl}")
        out.extend(f"data: {line}{nl}" for line in lines)
        out.append(nl)
    return "".join(out).encode()


@settings(max_examples=300, deadline=None)
@given(_events, st.sampled_from(["\n", "\r\n", "\r"]), st.lists(st.integers(1, 50), max_size=30), st.booleans())
def test_round_trip_under_any_chunking(
    events: list[tuple[str, list[str], str]], nl: str, cuts: list[int], bom: bool
) -> None:
    raw = (b"\xef\xbb\xbf" if bom else b"") + _serialize(events, nl)
    chunks, pos = [], 0
    for c in cuts:
        chunks.append(raw[pos : pos + c])
        pos += c
    chunks.append(raw[pos:])
    expected, last_id = [], ""
    for name, lines, eid in events:
        last_id = eid or last_id
        expected.append((name or "message", "\n".join(lines), last_id))
    assert parse(*chunks) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=20))
def test_arbitrary_bytes_never_crash(chunks: list[bytes]) -> None:
    p = SSEParser(max_event_bytes=4096)
    for c in chunks:
        for ev in p.feed(c):
            assert isinstance(ev.data, str)
    p.close()
