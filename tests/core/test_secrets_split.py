"""Secrets that arrive in pieces, or in a form the first round missed, stay masked.

* A key a server or an ACP agent echoes in two deltas (``key[:8]``, ``key[8:]``) must not end up
  whole in ``_agent.text``, ``_agent.events``, the widget's saved transcript, the Markdown copy, the
  headless output, or the built-in agent's compaction.
* What the kernel's reading tools hand the model: a key after an escaped ``\\n`` in a repr, an
  environment value read from a file with its newline, a value split between a cell's stdout and
  stderr or printed over two lines (``run_code``, ``read_notebook``), a key lower-cased in a host.
* A key in the query of the URL the user typed is sent where it belongs and never shown.
"""

from __future__ import annotations

import json
import os
import secrets as pysecrets
import shlex
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm
from jupyter_client.manager import start_new_kernel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from nb_agent import secrets
from nb_agent.agent.compaction import transcript_for_summary
from nb_agent.agent.messages import Message
from nb_agent.conversation.controller import AgentResult
from nb_agent.events import parse_event
from nb_agent.kernel.toolset import kernel_tools
from nb_agent.protocols import make_client
from nb_agent.protocols.acp import ACPClient
from nb_agent.protocols.agui import AGUIClient
from nb_agent.render.transcript import to_markdown
from nb_agent.secret_stream import StreamRedactor
from nb_agent.ui.widget import ChatWidget
from tests.fake_workspace import MARK, FakeFrontEnd, cell
from tests.servers.serve import serve

HOSTILE = Path(__file__).parents[1] / "servers" / "acp_hostile_agent.py"
ROOT = Path(__file__).resolve().parents[2]


class QuietComm(BaseComm):  # type: ignore[misc]
    def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **k: Any) -> None:
        return None


@pytest.fixture
def no_kernel_comm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comm, "create_comm", QuietComm)


def user_key() -> str:
    return "Kx9-" + pysecrets.token_urlsafe(24)


def agui_echo(pieces: list[str]) -> Any:
    """An AG-UI server that streams ``pieces`` as the deltas of one message."""

    async def endpoint(_: Request) -> StreamingResponse:
        frames = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
        frames += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": p} for p in pieces]
        frames.append({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"})

        async def body() -> AsyncIterator[bytes]:
            for frame in frames:
                yield b"data: " + json.dumps(frame).encode() + b"\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(routes=[Route("/", endpoint, methods=["POST"])])


def everything_shown(result: AgentResult, widget: ChatWidget, streamed: str) -> str:
    return "\n".join(
        [
            result.text,
            json.dumps([e.model_dump(mode="json") for e in result.events]),
            json.dumps(widget.transcript),
            to_markdown(widget.transcript),
            streamed,
        ]
    )


async def shown_by(client: Any) -> str:
    result, widget, streamed = AgentResult("echo"), ChatWidget(), []
    async for ev in client.stream("echo"):
        result.events.append(ev)
        widget.push([ev])
        streamed.append(getattr(ev, "delta", ""))
    widget.finish_run()
    return everything_shown(result, widget, "".join(streamed))


# -- split across deltas ----------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["given", "shape"])
async def test_a_key_an_agui_server_echoes_in_two_deltas_is_masked_everywhere(kind: str, no_kernel_comm: None) -> None:
    key = user_key() if kind == "given" else "sk-proj-" + pysecrets.token_urlsafe(40)
    headers = {"X-Auth": key} if kind == "given" else {}
    with serve(agui_echo(["you sent ", key[:8], key[8:], " back"])) as url:
        async with AGUIClient(url, headers=headers) as client:
            seen = await shown_by(client)
    assert key not in seen
    assert key[8:] not in seen
    assert "you sent *** back" in seen


@pytest.mark.anyio
async def test_a_key_an_acp_agent_echoes_in_two_deltas_is_masked_everywhere(
    monkeypatch: pytest.MonkeyPatch, no_kernel_comm: None
) -> None:
    key = pysecrets.token_hex(20)
    monkeypatch.setenv("MY_SERVICE_TOKEN", key)  # the kernel knows it by its variable's name
    text = f"token={key} ok"
    command = shlex.join([sys.executable, str(HOSTILE), "split", text, str(len("token=") + 8)])
    async with ACPClient(command) as client:
        seen = await shown_by(client)
    assert key not in seen
    assert key[8:] not in seen
    assert "token=*** ok" in seen


def test_a_headless_cell_never_prints_a_key_split_across_deltas(
    ipython: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    key = user_key()
    ipython.user_ns["auth"] = key
    with serve(agui_echo(["echo: ", key[:5], key[5:12], key[12:], "."])) as url:
        ipython.run_line_magic("agent", f"--url {url} --protocol agui --header X-Auth:$auth --new --wait hi")
    out = capsys.readouterr().out
    assert "echo: ***." in out
    assert key[5:] not in out
    assert key not in ipython.user_ns["_agent"].text
    ipython.user_ns.pop("auth")


def test_streamed_text_is_held_only_while_it_may_become_a_secret() -> None:
    key = user_key()
    secrets.add(key)
    stream = StreamRedactor()
    sent = shown = ""
    for word in ["Hello", " world", ", all", " is good.", "\n"]:
        sent += word
        shown += stream.feed("m", word)
        assert sent.startswith(shown)
        assert len(sent) - len(shown) < len(word)  # ordinary text waits for one piece at most
    shown += stream.feed("m", "The ")
    assert shown == sent + "The "
    assert stream.feed("m", "key " + key[:3]) == "key "  # the key's first characters wait
    assert stream.feed("m", key[3:20]) == ""
    assert stream.feed("m", key[20:] + " and sk-") == "*** and "
    assert stream.feed("m", "proj-" + "x" * 30 + " end") == "*** end"
    assert stream.flush("m") == ""


def test_streamed_redaction_stays_linear_on_a_hostile_stream() -> None:
    def seconds(pieces: int) -> float:
        stream = StreamRedactor()
        started = time.perf_counter()
        out = [stream.feed("m", "sk-" if i == 0 else "a") for i in range(pieces)]
        out.append(stream.flush("m"))
        assert "".join(out).startswith("***")
        return time.perf_counter() - started

    small = seconds(20_000)
    assert seconds(80_000) < max(2.0, small * 8)  # 4x the pieces: about 4x the time


def test_text_joined_after_the_stream_is_masked_again() -> None:
    """A transcript saved before this release (or pushed as JSON) may hold the pieces: the Markdown
    copy, ``_agent.text`` and the built-in agent's compaction join them, and mask the key."""
    key = user_key()
    secrets.add(key)
    transcript = [
        {"type": "text_delta", "message_id": "m", "delta": f"key: {key[:8]}"},
        {"type": "usage", "input_tokens": 1},
        {"type": "text_delta", "message_id": "m", "delta": f"{key[8:]} end"},
    ]
    assert key[8:] not in to_markdown(transcript)
    assert "key: *** end" in to_markdown(transcript)
    result = AgentResult("x")
    result.events.extend(parse_event(raw) for raw in transcript)
    assert result.text == "key: *** end"
    older = [Message.user("what is my key?"), Message.assistant(f"It is {key}.")]
    assert key not in transcript_for_summary(older)
    assert "It is ***." in transcript_for_summary(older)


# -- what the kernel's tools hand the model ---------------------------------------------------


@pytest.mark.anyio
async def test_reading_tools_mask_keys_the_first_round_missed(
    ipython: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shaped = "sk-proj-" + pysecrets.token_urlsafe(40)
    env_value = pysecrets.token_hex(16)
    given = user_key()
    secrets.add(given)
    monkeypatch.setenv("MY_SERVICE_TOKEN", env_value + "\n")  # read from a file, newline and all
    (tmp_path / "token.txt").write_text(env_value + "\n")
    ipython.user_ns.update(escaped=f"first line\n{shaped}", token_file=str(tmp_path / "token.txt"))
    tools = {t.name: t for t in kernel_tools(ipython)}
    run_code = tools["run_code"]
    outputs = {
        "repr": (await tools["inspect_variable"].run({"name": "escaped"})).content,
        "file": (await run_code.run({"code": "print(open(token_file).read())"})).content,
        "split": (
            await run_code.run(
                {"code": f"import sys\nprint({env_value[:10]!r}, end='')\nprint({env_value[10:]!r}, file=sys.stderr)"}
            )
        ).content,
        "wrapped": (await run_code.run({"code": f"print({env_value[:12]!r})\nprint({env_value[12:]!r})"})).content,
        "host": (await run_code.run({"code": f"print('https://' + {given!r}.lower() + '.example.net/x')"})).content,
    }
    for where, text in outputs.items():
        for secret in (shaped, env_value, given, given.lower()):
            assert secret not in text, f"{where}: {text}"
            assert secret[-10:] not in text, f"{where}: {text}"
        assert "***" in text, where
    assert "first line" in outputs["repr"]
    assert outputs["host"].endswith("***.example.net/x")
    ipython.user_ns.pop("escaped")
    ipython.user_ns.pop("token_file")


@pytest.fixture
def front(tmp_path: Path) -> Iterator[tuple[FakeFrontEnd, str]]:
    """A real kernel whose environment holds a secret, and a fake JupyterLab on its comm."""
    value = pysecrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(tmp_path)
    env["WAREHOUSE_PASSWORD"] = value
    cells = [
        cell("split", "print(s[:10], end=''); print(s[10:], file=sys.stderr)", execution_count=1),
        cell("wrap", "print(s[:12]); print(s[12:])", execution_count=2),
        cell("agent", "%agent what is in this notebook?", execution_count=3),
    ]
    cells[0]["outputs"] = [
        {"output_type": "stream", "name": "stdout", "text": value[:10]},
        {"output_type": "stream", "name": "stderr", "text": value[10:] + "\n"},
    ]
    cells[1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": [value[:12] + "\n", value[12:] + "\n"]}]
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT), startup_timeout=60)
    try:
        yield FakeFrontEnd(kc, cells), value
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.timeout(180)
def test_read_notebook_masks_a_secret_split_between_outputs_or_lines(front: tuple[FakeFrontEnd, str]) -> None:
    fe, value = front
    setup = (
        "import json\nfrom nb_agent.kernel.toolset import kernel_tools\n"
        "T = {t.name: t for t in kernel_tools(get_ipython())}\n"
        "async def _call(name, args):\n"
        "    out = await T[name].run(args)\n"
        f"    print({MARK!r} + json.dumps({{'content': out.content, 'is_error': out.is_error}}))\n"
    )
    assert fe.execute("%load_ext nb_agent").error is None
    assert fe.execute(setup).error is None
    fe.settle()
    out = fe.execute("await _call('read_notebook', {})", cell_id="agent").tool()
    text = str(out["content"])
    assert out["is_error"] is False
    assert "id=split code" in text
    assert "id=wrap code" in text
    for piece in (value, value[:10], value[10:], value[12:]):
        assert piece not in text, text
    assert text.count("***") >= 2


# -- a key in the URL -------------------------------------------------------------------------


def recorder(seen: list[str]) -> Any:
    """Every request recorded (path and query as received); every answer a 404 echoing the URL."""

    async def any_path(request: Request) -> JSONResponse:
        seen.append(f"{request.url.path}?{request.url.query}")
        return JSONResponse({"error": f"nothing at {request.url}"}, status_code=404)

    methods = ["GET", "POST"]
    return Starlette(routes=[Route("/{path:path}", any_path, methods=methods), Route("/", any_path, methods=methods)])


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("protocol", "first"),
    [("goose", "/agent/start"), ("ntrp", "/session/history"), ("a2a", None), ("agui", "/"), ("cosmo", "/")],
)
async def test_a_key_in_the_url_query_goes_with_each_request_and_is_never_shown(
    protocol: str, first: str | None
) -> None:
    key = "qk-" + pysecrets.token_hex(12)
    seen: list[str] = []
    with serve(recorder(seen)) as url:
        options = {"session_id": "s1"} if protocol == "ntrp" else {}  # goose: no session, so /agent/start
        client = make_client(protocol, f"{url}/?api_key={key}", **options)
        events = [ev async for ev in client.stream("hello")]
        await client.aclose()
    shown = json.dumps([e.model_dump(mode="json") for e in events])
    assert events[-1].reason == "error"
    assert key not in shown
    assert "api_key=***" in shown
    assert seen
    for request in seen:
        path, _, query = request.partition("?")
        assert "api_key" not in path  # the path comes before the query, not after it
        assert f"api_key={key}" in query.split("&")  # the key still reaches the server the user typed
    if first is not None:
        assert seen[0].startswith(first + "?")
