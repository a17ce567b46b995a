"""One home for connecting (``nb_agent.connect``): a protocol and an option are each added in one place.

The toy protocol below is registered with one ``register`` call and is then reachable from
``%agent``, ``%agent_config``, ``nb_agent.chat()`` and ``nb-agent stream``, its key in the header
its class declares; a toy option is added with one ``options.add`` and reaches the same four, and
the client that names it in ``config_options``. Nothing else in the package is touched.
"""

from __future__ import annotations

import subprocess
import sys
import time
import warnings
from collections.abc import AsyncGenerator, Iterator
from typing import Any, ClassVar

import pytest

import nb_agent
from nb_agent import cli
from nb_agent.connect import options
from nb_agent.connect.config import AgentConfig
from nb_agent.errors import UsageError
from nb_agent.events import Event, RunFinished, RunStarted, TextDelta
from nb_agent.gate import approve_word
from nb_agent.protocols import AgentClient, register, unregister

URL = "http://127.0.0.1:9/toy"  # never dialled: the toy client answers by itself


class ToyClient(AgentClient):
    """A protocol in one class: it says what it heard, at which level, and whether its key came."""

    protocol = "toy"
    api_key_header = ("X-Toy-Key", "{key}")
    config_options: ClassVar[dict[str, str]] = {"level": "toy_level"}

    def __init__(self, url: str, *, level: str | None = None, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self.level = level

    async def _events(self, prompt: str) -> AsyncGenerator[Event, None]:
        yield RunStarted(run_id="toy-run", session_id=self.session_id)
        keyed = self.headers.get("X-Toy-Key") == "toy-secret-key-1234"
        yield TextDelta(message_id="toy-1", delta=f"toy heard {prompt} at level {self.level} keyed={keyed}\n")
        yield RunFinished(reason="stop")


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TOY_KEY", "toy-secret-key-1234")
    register("toy", ToyClient)  # the one place a protocol is added
    try:
        yield
    finally:
        unregister("toy")


@pytest.fixture
def toy_option(toy: None) -> Iterator[None]:
    options.add(options.Option("toy_level", "--toy-level", "the toy's level", surfaces=options.SURFACES))
    try:
        yield
    finally:
        options.remove("--toy-level")


def _magic(ip: Any, capsys: pytest.CaptureFixture[str], line: str) -> str:
    capsys.readouterr()
    ip.run_line_magic("agent", line)
    return capsys.readouterr().out


def _stream(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main(["stream", *args])
    return code, capsys.readouterr().out


def _chat_text(**config: Any) -> tuple[AgentConfig, str]:
    widget = nb_agent.chat("from chat", **config)
    live = widget.chat
    deadline = time.monotonic() + 20
    while not (live.results and live.results[0].done):
        assert time.monotonic() < deadline, "the chat's run did not finish"
        time.sleep(0.02)
    return live.conv.config, live.results[0].text


def test_a_protocol_registered_in_one_place_is_reachable_from_the_magic_chat_and_cli(
    ipython: Any, capsys: pytest.CaptureFixture[str], toy: None
) -> None:
    out = _magic(ipython, capsys, f"--url {URL} --protocol toy --api-key-env TOY_KEY --new --wait hello")
    assert "toy heard hello at level None keyed=True" in out  # the key went where ToyClient says

    code, out = _stream(capsys, URL, "hi", "--protocol", "toy")
    assert code == 0
    assert "toy heard hi at level None keyed=False" in out

    _config, text = _chat_text(url=URL, protocol="toy")
    assert "toy heard from chat" in text

    ipython.run_line_magic("agent_config", "--protocol toy")
    try:
        assert "protocol:    toy" in capsys.readouterr().out
    finally:
        ipython.run_line_magic("agent_config", "--reset")

    unregister("toy")  # gone from every surface with it
    out = _magic(ipython, capsys, f"--url {URL} --protocol toy --new --wait hello")
    assert "invalid choice: 'toy'" in out
    with pytest.raises(UsageError, match="unknown protocol"):
        AgentConfig().merged(protocol="toy")


def test_an_option_added_in_one_place_reaches_the_magics_chat_cli_and_the_client(
    ipython: Any, capsys: pytest.CaptureFixture[str], toy_option: None
) -> None:
    out = _magic(ipython, capsys, f"--url {URL} --protocol toy --toy-level 7 --new --wait hello")
    assert "toy heard hello at level 7" in out

    ipython.run_line_magic("agent_config", "--toy-level 8")
    try:
        assert "toy_level:   8" in capsys.readouterr().out
        assert "at level 8" in _magic(ipython, capsys, f"--url {URL} --protocol toy --new --wait hello")
    finally:
        ipython.run_line_magic("agent_config", "--reset")

    config, text = _chat_text(url=URL, protocol="toy", toy_level="9")
    assert config.option("toy_level") == "9"
    assert "at level 9" in text

    code, out = _stream(capsys, URL, "hi", "--protocol", "toy", "--toy-level", "5")
    assert code == 0
    assert "toy heard hi at level 5" in out

    options.remove("--toy-level")  # and gone again
    out = _magic(ipython, capsys, f"--url {URL} --protocol toy --toy-level 7 --new --wait hello")
    assert "at level 7" not in out


def test_the_approval_words_are_one_set_and_the_old_ones_still_work_with_a_note() -> None:
    assert options.options("stream")  # nb-agent stream takes --approve from the same table as %agent
    with pytest.warns(FutureWarning, match="--approve all is deprecated: say --approve always"):
        assert approve_word("all") == "always"
    with pytest.warns(FutureWarning, match="say --approve never"):
        assert approve_word("none") == "never"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert approve_word("always") == "always"
    with pytest.warns(FutureWarning):
        assert AgentConfig.from_env({"NB_AGENT_APPROVE": "none"}).approve == "never"
    help_text = subprocess.run(
        [sys.executable, "-m", "nb_agent.cli", "stream", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "{ask,always,never}" in help_text


@pytest.mark.anyio
async def test_a_registered_protocol_is_named_when_detection_finds_none(toy: None) -> None:
    """``--protocol auto`` finds only A2A; its error names every protocol to pass instead, the toy too."""
    import httpx

    from nb_agent.protocols.detect import detect_protocol

    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda _r: httpx.Response(404))) as http:
        with pytest.raises(UsageError, match=r"pass --protocol goose, agui, ntrp, cosmo or toy\."):
            await detect_protocol("http://agent.test/", {}, http)
