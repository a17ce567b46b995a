"""The terminal is not the agent's to control: ``nb-agent stream`` against an agent whose every string
carries escape sequences (``tests/servers/acp_terminal_agent.py``, on the ACP SDK's agent side).

Assertions are on the bytes the terminal receives: stdout and stderr through pipes, and the whole
``--approve ask`` exchange on a pty (output post-processing off, so the bytes read are the bytes
written). ``--jsonl`` keeps every character, JSON-escaped.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import termios
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from nb_agent.render.terminal import strip_controls
from tests.servers.acp_terminal_agent import ATTACKS, EVIL, WORDS

AGENT = f"{sys.executable} {Path(__file__).parents[1] / 'servers' / 'acp_terminal_agent.py'}"
COMMAND = [sys.executable, "-m", "nb_agent.cli", "stream", "--agent", AGENT, "hi"]
# what a terminal obeys: C0 but tab and newline, DEL, and C1 (as UTF-8: C2 80 .. C2 9F)
CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")
# what a terminal draws out of order or not at all (Trojan Source, CVE-2021-42574)
REORDERING = re.compile("[\u202a-\u202e\u2066-\u2069\u200b\u2060\ufeff]")
# what only a sequence carries: had the sequences' bodies leaked, these would show
PAYLOADS = ["cm0gLXJmIH4=", "pwned title", "c1 title", "31m"]


def outside_arguments(text: str) -> str:
    """``text`` without the tool's arguments, which are shown as JSON (``\\u001b``: printable, on purpose:
    the user sees what will run), so the sequences' bodies are visible there, and only there."""
    return re.sub(r'\{"path": ".*"\}', "{...}", text)


def run(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*COMMAND, *args],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )


def test_no_control_character_reaches_the_terminal() -> None:
    done = run("--approve", "always")
    for stream in (done.stdout, done.stderr):
        assert CONTROL_BYTES.findall(stream) == []
        assert REORDERING.findall(stream.decode()) == []
    out = done.stdout.decode()
    assert "hello-word\\u202e\\u2066\\u200b" in out  # the agent's prose: each one shown as its escape
    for word in WORDS:  # everything around the sequences is still shown
        assert word in out, (word, out)
    for payload in PAYLOADS:  # whole sequences go, not just their ESC
        assert payload not in outside_arguments(out), (payload, out)
    assert '"arg-word\\u001b]52;c;' in out  # the arguments: escaped, not stripped
    assert re.search(r"^⚙ tool[- ]word[ \\]", out, re.IGNORECASE | re.MULTILINE)  # the title, as is or formatted
    assert "→ allow_once" in out
    assert done.returncode == 1  # the agent ended the turn with an error, shown cleanly
    assert b"nb-agent: run finished: error" in done.stderr


def test_the_approval_question_on_a_terminal() -> None:
    master, slave = pty.openpty()
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST  # no \n -> \r\n: read exactly what nb-agent wrote
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    proc = subprocess.Popen(
        [*COMMAND, "--approve", "ask"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 30
    try:
        while b"[N]o: " not in seen:  # the question, waiting for the user
            assert time.monotonic() < deadline, seen
            if select.select([master], [], [], 0.5)[0]:
                seen += os.read(master, 65536)
        os.write(master, b"y\n")
        while True:  # the rest, until the process closes the terminal
            assert time.monotonic() < deadline + 30, seen
            if select.select([master], [], [], 0.5)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the other end is closed
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        proc.wait(30)
    finally:
        os.close(master)
    assert CONTROL_BYTES.findall(seen) == []
    text = seen.decode()
    assert REORDERING.findall(text) == []
    question = next(line for line in text.splitlines() if "[y]es / " in line and "[N]o:" in line)
    assert "arg-word" in question
    assert question.startswith("Allow ")
    for payload in PAYLOADS:
        assert payload not in outside_arguments(text), (payload, text)
    assert "→ allow_once" in text  # the answer reached the agent, and the run went on
    assert "result-word" in text


def test_jsonl_keeps_every_character_escaped() -> None:
    done = run("--approve", "always", "--jsonl")
    assert CONTROL_BYTES.findall(done.stdout) == []
    assert REORDERING.findall(done.stdout.decode()) == []  # escaped in the JSON text, the same value
    events = [json.loads(line) for line in done.stdout.decode().splitlines()]
    text = "".join(e["delta"] for e in events if e["type"] == "text_delta")
    assert text == f"hello-word{EVIL} split-word\x1b]52;c;c3BsaXQ=\x07 and on\n"  # exactly what the agent sent
    assert any(e["type"] == "tool_result" and e["content"] == f"result-word{EVIL}" for e in events)


# -- the function itself ----------------------------------------------------------------------------
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@given(st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x2FF), max_size=200))
def test_nothing_a_terminal_obeys_survives(text: str) -> None:
    assert CONTROL.search(strip_controls(text)) is None


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc",)) | st.sampled_from("\n\t"), max_size=200))
def test_text_without_controls_is_left_alone(text: str) -> None:
    assert strip_controls(text) == text


def test_sequences_go_whole_and_the_text_around_them_stays() -> None:
    for name, sequence in ATTACKS.items():
        assert strip_controls(f"a{sequence}b") == "ab", name
    assert (
        strip_controls("tab\tand\nnewline stay; so does é, 中, and 🙂")
        == "tab\tand\nnewline stay; so does é, 中, and 🙂"
    )
    assert strip_controls("\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\") == "link"  # OSC 8 hyperlink
    assert strip_controls("\x1bP+q544e\x1b\\x") == "x"  # DCS (a terminfo query)
    assert strip_controls("unterminated \x1b]52;c;AAAA") == "unterminated "
    assert strip_controls("\x1b[?1049h\x1b[38;2;255;0;0mred") == "red"
