"""%agent / %%agent / %agent_config through a real IPython shell (globalipapp), headless path."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from nb_agent.connect.config import AgentConfig
from nb_agent.conversation.controller import AgentResult, Conversation
from nb_agent.errors import UsageError
from nb_agent.kernel.variables import interpolate, summarize
from nb_agent.ui.headless import LoopThread
from nb_agent.ui.magics import split_options
from tests.servers.goose_server import make_goose_app
from tests.servers.serve import serve

GOOSE = "--protocol goose --header X-Secret-Key:test"


@pytest.fixture(scope="module")
def goose() -> Iterator[str]:
    with serve(make_goose_app(ping_interval=0.2)) as url:
        yield url


@pytest.fixture
def ip(ipython: Any) -> Any:
    return ipython


def test_line_magic_streams_plain_text_and_sets_agent(ip: Any, goose: str, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("agent", f"--url {goose} {GOOSE} hello there")
    out = capsys.readouterr().out
    assert "Hello! You said: there." in out
    result = ip.user_ns["_agent"]
    assert isinstance(result, AgentResult)
    assert result.done
    assert result.text == "Hello! You said: there."
    assert result.reason == "stop"
    assert result.usage is not None
    assert f"this turn: {result.usage.input_tokens:,} in / {result.usage.output_tokens:,} out · " in out  # one line
    assert "tokens " not in out


def test_cell_magic_takes_the_body_as_the_prompt(ip: Any, goose: str, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_cell_magic("agent", f"--url {goose} {GOOSE} --new", "hello from a cell\n")
    assert ip.user_ns["_agent"].text == "Hello! You said: from a cell."
    assert "Hello! You said: from a cell." in capsys.readouterr().out


def test_tool_approval_policies_without_a_front_end(ip: Any, goose: str, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("agent", f"--url {goose} {GOOSE} --approve always tool")
    out = capsys.readouterr().out
    assert "⚙ Developer: Shell" in out
    assert "→ allow_once" in out
    assert ip.user_ns["_agent"].text.endswith("Done.")
    ip.run_line_magic("agent", f"--url {goose} {GOOSE} tool")  # ask, but nobody can answer
    out = capsys.readouterr().out
    assert "no front end to ask: denied Developer: Shell" in out
    assert "Tool call denied." in ip.user_ns["_agent"].text


def test_quiet_prints_nothing(ip: Any, goose: str, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("agent", f"--url {goose} {GOOSE} --quiet hello quietly")
    assert capsys.readouterr().out == ""
    assert ip.user_ns["_agent"].text == "Hello! You said: quietly."


def test_server_errors_are_a_message_not_a_traceback(ip: Any, goose: str, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("agent", f"--url {goose} --protocol goose --header X-Secret-Key:wrong hello")
    out = capsys.readouterr().out
    assert "error: HTTP 401" in out
    assert "Traceback" not in out
    assert ip.user_ns["_agent"].reason == "error"


def test_no_server_means_the_built_in_agent_on_the_embedded_model(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "NB_AGENT_PROVIDER", "NB_AGENT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    ip.run_line_magic("agent_config", "--reset")
    capsys.readouterr()
    ip.run_line_magic("agent", "--session embedded Say hello.")
    out = capsys.readouterr().out
    badge = (
        "[model: SmolLM2-135M-Instruct (local · embedded default (no model downloaded; `%agent_models pull qwen3-8b`; "
        "local server lookup off) · tool calls by grammar"
    )
    assert f"{badge} · context 8,192 from" in out
    result = ip.user_ns["_agent"]
    assert result.reason == "stop"
    assert result.text.strip()
    assert result.usage is not None
    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens > 0


def test_no_server_and_no_model_says_what_was_tried(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "NB_AGENT_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(
        "nb_agent.agent.providers.local_model.local_available", lambda: "llama-cpp-python is not installed"
    )
    ip.run_line_magic("agent_config", "--reset")
    capsys.readouterr()
    ip.run_line_magic("agent", "--new --session nowhere hello")
    out = capsys.readouterr().out
    assert "no model provider is available" in out
    assert "OPENAI_API_KEY" in out
    assert "ANTHROPIC_API_KEY" in out
    assert "llama-cpp-python is not installed" in out
    assert "--url" in out
    assert "Traceback" not in out


def test_agent_config_sets_defaults_and_masks_secrets(
    ip: Any, goose: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_GOOSE_KEY", "test")
    ip.run_line_magic(
        "agent_config", f"--url {goose} --protocol goose --api-key-env MY_GOOSE_KEY --header Authorization:Bearer-zzz"
    )
    shown = capsys.readouterr().out
    assert "MY_GOOSE_KEY (set in the environment)" in shown
    assert "Bearer-zzz" not in shown
    assert "***" in shown
    ip.run_line_magic("agent", "--new hello configured")  # the key comes from the environment
    assert ip.user_ns["_agent"].text == "Hello! You said: configured."
    ip.run_line_magic("agent_config", "--reset")


def test_replay_is_an_option_of_the_magic_the_config_and_the_environment(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ip.run_line_magic("agent_config", "--replay strict --replay-approvals")
    assert "replay:      strict  (recorded approvals answered as recorded)" in capsys.readouterr().out
    ip.run_line_magic("agent_config", "--replay sometimes")
    assert "invalid choice: 'sometimes'" in capsys.readouterr().out
    monkeypatch.setenv("NB_AGENT_REPLAY", "off")
    ip.run_line_magic("agent_config", "--reset")
    assert "replay:      off\n" in capsys.readouterr().out
    monkeypatch.setenv("NB_AGENT_REPLAY", "maybe")
    with pytest.raises(UsageError, match="NB_AGENT_REPLAY must be one of auto, strict, off, got 'maybe'"):
        AgentConfig.from_env()
    monkeypatch.delenv("NB_AGENT_REPLAY")
    ip.run_line_magic("agent_config", "--reset")


def test_variables_are_summarised_into_the_prompt(ip: Any, goose: str) -> None:
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"city": ["Paris", "Lima"] * 5000, "temp": range(10000)})
    ns = {"df": df, "xs": list(range(100000))}
    prompt = interpolate("Look at {df} and {xs}; keep {unknown} and {{braces}}.", ns)
    assert "pandas.DataFrame shape (10000, 2)" in prompt
    assert "city: object" in prompt or "city: str" in prompt
    assert "Paris" in prompt
    assert "list (len 100000)" in prompt
    assert "{unknown}" in prompt
    assert "{braces}" in prompt
    assert len(prompt) < 3000  # never the whole object
    assert len(summarize("x" * 100000)) < 2100


def test_options_stop_at_the_prompt() -> None:
    assert split_options("--url http://x --new what's in {df} ?") == (
        ["--url", "http://x", "--new"],
        "what's in {df} ?",
    )
    assert split_options('--header "Authorization:Bearer a b" --approve always go') == (
        ["--header", "Authorization:Bearer a b", "--approve", "always"],
        "go",
    )
    assert split_options("--url=http://h:1/a?k=1&x=$y tell") == (["--url", "http://h:1/a?k=1&x=$y"], "tell")
    assert split_options("tell me --url x") == ([], "tell me --url x")


def test_quoted_header_values_reach_the_server_unquoted(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("agent_config", '--header "Authorization:Bearer demo-not-a-secret" --url http://127.0.0.1:9')
    shown = capsys.readouterr().out
    assert "'Authorization': '***'" in shown
    magics = ip.magics_manager.registry["AgentMagics"]
    assert magics.defaults.headers["Authorization"] == "Bearer demo-not-a-secret"
    ip.run_line_magic("agent_config", "--reset")


def test_dollar_names_in_options_and_braces_in_a_line_prompt(ip: Any, goose: str) -> None:
    pd = pytest.importorskip("pandas")
    ip.user_ns["GOOSE_URL"] = goose
    ip.user_ns["frame"] = pd.DataFrame({"a": [1, 2, 3]})
    ip.run_line_magic("agent", "--url $GOOSE_URL --protocol goose --header X-Secret-Key:test --new what's in {frame} ")
    result = ip.user_ns["_agent"]
    assert result.reason == "stop"
    assert "pandas.DataFrame shape (3, 1)" in result.prompt  # our summary, not str(frame)


def test_environment_defaults() -> None:
    cfg = AgentConfig.from_env(
        {
            "NB_AGENT_URL": "http://h",
            "NB_AGENT_PROTOCOL": "a2a",
            "NB_AGENT_HEADERS": "A:1; B:2",
            "NB_AGENT_APPROVE": "never",
        }
    )
    assert (cfg.url, cfg.protocol, cfg.headers, cfg.approve) == ("http://h", "a2a", {"A": "1", "B": "2"}, "never")


def test_a_conversation_survives_moving_between_loops(goose: str) -> None:
    """A waited run (private loop) then a live one (another loop): same client, same session."""
    conv = Conversation(AgentConfig(url=goose, protocol="goose", headers={"X-Secret-Key": "test"}))
    first = LoopThread().run(conv.run("hello one", AgentResult("x"), lambda _e: None, ask=lambda _e: "deny"), _noop)
    client, session = conv.client, conv.client.session_id if conv.client else None
    second = asyncio.run(conv.run("hello two", AgentResult("y"), lambda _e: None, ask=lambda _e: "deny"))
    assert (first.text, second.text) == ("Hello! You said: one.", "Hello! You said: two.")
    assert conv.client is client
    assert conv.client is not None
    assert conv.client.session_id == session


async def _noop() -> None:
    return None


def test_a_kernel_interrupt_cancels_the_waiting_run(goose: str) -> None:
    conv = Conversation(AgentConfig(url=goose, protocol="goose", headers={"X-Secret-Key": "test"}))
    loop_thread = LoopThread()
    result = AgentResult("slow")
    pushed: list[dict[str, Any]] = []

    async def stop() -> None:
        assert conv.client is not None
        await conv.client.cancel()

    def interrupt_when_ticking() -> None:
        while sum(e.get("type") == "text_delta" for e in pushed) < 3:
            threading.Event().wait(0.01)
        os.kill(os.getpid(), signal.SIGINT)  # what the kernel's interrupt sends

    # what ipykernel installs while a cell executes (whatever the process had before: a test run's
    # earlier tests may leave another handler, and the interrupt would then not reach the run)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt_when_ticking, daemon=True).start()
        done = loop_thread.run(
            conv.run(
                "slow", result, lambda batch: pushed.extend(e.model_dump(mode="json") for e in batch),
                ask=lambda _e: "deny",
            ),
            stop,
        )  # fmt: skip
    finally:
        signal.signal(signal.SIGINT, inherited)
    assert done.reason == "cancel", f"SIGINT's handler before the test: {inherited!r}"
    assert done.text.startswith("tick 0 tick 1 tick 2")
    asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop_thread.loop).result(5)


def test_a_line_prompt_may_end_with_a_question_mark(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """IPython would read `%agent ... DataFrame?` as a help request ("Object not found")."""
    transformed = ip.transform_cell("%agent what is a DataFrame?\n")
    assert transformed == "get_ipython().run_line_magic('agent', 'what is a DataFrame?')\n"
    assert ip.transform_cell("%%agent\nwhy?\n").startswith("get_ipython().run_cell_magic('agent'")
    assert ip.transform_cell("  %agent --new why?").strip() == "get_ipython().run_line_magic('agent', '--new why?')"
    assert ip.transform_cell("x?") != "x?"  # help requests elsewhere are untouched
    assert "pinfo" in ip.transform_cell("x?")


def test_the_option_splitter_reads_the_magics_own_argparse_definitions() -> None:
    """An option added to %agent's parser is an option on the line too: one declaration, no drift."""
    from IPython.core.magic_arguments import MagicArgumentParser

    from nb_agent.ui.magics import AgentMagics, option_names

    parser = AgentMagics.agent.parser
    valued, flags = option_names(parser)
    assert {"--url", "--header", "--acp"} <= valued
    assert {"--new", "--no-kernel"} <= flags
    declared = {name for action in parser._actions for name in action.option_strings}
    assert valued | flags == declared
    extra = MagicArgumentParser(add_help=False)
    extra.add_argument("--colour")
    extra.add_argument("--loud", action="store_true")
    assert option_names(extra) == (frozenset({"--colour"}), frozenset({"--loud"}))
    assert split_options("--no-kernel --acp 'opencode acp' hi") == (["--no-kernel", "--acp", "opencode acp"], "hi")


def test_a_numpy_scalar_is_summarised_as_its_value() -> None:
    # what run_code says it set (`x = temps.mean()`), and the embedded model's stated answer with it
    np = pytest.importorskip("numpy")
    assert summarize(np.array([21.5, 23.0, 25.1]).max()) == "numpy.float64: 25.1"
    assert summarize(np.int64(7)) == "numpy.int64: 7"
    assert summarize(np.array([1, 2])).startswith("numpy.ndarray shape (2,) dtype int64")
