"""Secrets never leak: ``nb_agent.secrets.redact`` and every way out it guards.

A loopback server echoes the user's keys back in the forms real servers use (raw, JSON-escaped,
URL-encoded, base64 of ``user:key``, a truncated prefix), in an error body and inside a stream;
the keys travel in headers whose names say nothing (``X-Auth``, ``X-Auth-Key``,
``Ocp-Apim-Subscription-Key``). What the user sees (CLI stdout/stderr, ``_agent.events``,
``%agent_config``, logs) must hold none of them. The kernel's reading tools run on the session's
IPython shell with keys in variables, in ``os.environ`` and in a cell's source.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets as pysecrets
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest

from nb_agent import secrets
from nb_agent.cli import main
from nb_agent.kernel.toolset import kernel_tools
from tests.servers.serve import serve

HEADERS = ("X-Auth", "X-Auth-Key", "Ocp-Apim-Subscription-Key")
FORMS: dict[str, Callable[[str], str]] = {
    "raw": lambda k: k,
    "json": lambda k: json.dumps(k)[1:-1],
    "url": lambda k: quote(k, safe=""),
    "base64": lambda k: base64.b64encode(f"apikey:{k}".encode()).decode(),
    "prefix": lambda k: k[:20] + "...",
}


def new_key() -> str:
    """A key whose JSON, URL and base64 forms all differ from it (quote, slash, plus, backslash)."""
    return f'k/{pysecrets.token_hex(6)}+"q\\{pysecrets.token_hex(8)}='


def leaked(text: str, keys: list[str]) -> list[str]:
    """The (form, key) pairs found in ``text``; the prefix form is looked for without its dots."""
    found = []
    for key in keys:
        for name, form in FORMS.items():
            shown = form(key).removesuffix("...")
            if shown in text:
                found.append(f"{name} of {key!r}")
    return found


def echo_app(form: Callable[[str], str]) -> Any:
    """``/status``: HTTP 401 whose body echoes the keys; ``/stream``: an AG-UI run that does."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        echoed = " ".join(f"{name}={form(headers.get(name.lower(), ''))}" for name in HEADERS)
        if scope["path"].endswith("/status"):
            body = ('{"error": {"message": "invalid credentials: ' + echoed + '"}}').encode()
            status, ctype = 401, b"application/json"
        else:
            frames = [
                {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
                {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": f"you sent {echoed}"},
                {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
                {"type": "RUN_ERROR", "message": f"rejected {echoed}"},
            ]
            body = "".join(f"data: {json.dumps(f)}\n\n" for f in frames).encode()
            status, ctype = 200, b"text/event-stream"
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", ctype)]})
        await send({"type": "http.response.body", "body": body})

    return app


@pytest.fixture(params=list(FORMS))
def echo(request: pytest.FixtureRequest) -> Iterator[str]:
    with serve(echo_app(FORMS[request.param])) as url:
        yield url


@pytest.fixture
def keys() -> list[str]:
    return [new_key() for _ in HEADERS]


# -- what a user sees ----------------------------------------------------------------------


@pytest.mark.parametrize("where", ["status", "stream"])
@pytest.mark.parametrize("jsonl", [False, True])
def test_the_cli_never_shows_an_echoed_key(
    echo: str,
    keys: list[str],
    where: str,
    jsonl: bool,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    argv = ["stream", f"{echo}/{where}", "hello", "--protocol", "agui"]
    for name, key in zip(HEADERS, keys, strict=True):
        argv += ["--header", f"{name}:{key}"]
    assert main([*argv, "--jsonl"] if jsonl else argv) == 1
    out = capsys.readouterr()
    seen = out.out + out.err + caplog.text
    assert "X-Auth-Key=" in seen  # the server's answer is shown, the key is not
    assert "***" in seen
    assert not leaked(seen, keys)


def test_magics_never_show_an_echoed_key(
    ipython: Any,
    echo: str,
    keys: list[str],
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    ipython.user_ns.update(k1=keys[0], k2=keys[1], k3=keys[2])
    headers = " ".join(f"--header {name}:${var}" for name, var in zip(HEADERS, ("k1", "k2", "k3"), strict=True))
    shown = []
    for where in ("status", "stream"):
        ipython.run_line_magic("agent", f"--url {echo}/{where} --protocol agui {headers} --new --wait hello")
        events = ipython.user_ns["_agent"].events
        assert events[-1].reason == "error"
        shown.append(json.dumps([e.model_dump(mode="json") for e in events], ensure_ascii=False))
    ipython.run_line_magic("agent_config", f"--url {echo}/status {headers}")
    ipython.run_line_magic("agent_config", "--reset")
    out = capsys.readouterr()
    seen = "\n".join([*shown, out.out, out.err, caplog.text])
    assert "X-Auth-Key=" in seen
    assert "***" in seen
    assert "'Ocp-Apim-Subscription-Key': '***'" in out.out  # %agent_config
    assert not leaked(seen, keys)


def test_an_error_about_an_option_shows_the_name_not_the_expanded_value(
    ipython: Any, keys: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    ipython.user_ns["k1"] = keys[0]
    ipython.run_line_magic("agent", "--header $k1 --url http://127.0.0.1:9 hello")  # no NAME:
    ipython.run_line_magic("agent", "--protocol $k1 hello")  # not a protocol
    ipython.run_line_magic("agent", "--url $k1 hello")  # not a URL
    ipython.run_line_magic("agent_config", "--api-key-env $k1")  # a key where its variable's name goes
    ipython.run_line_magic("agent_config", "--reset")
    out = capsys.readouterr().out
    assert out.count("nb-agent:") == 4
    assert "$k1" in out
    assert not leaked(out, keys[:1])


def test_a_malformed_cli_header_is_not_echoed(keys: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["stream", "http://127.0.0.1:9", "hi", "--header", keys[0]])
    err = capsys.readouterr().err
    assert "NAME:VALUE" in err
    assert not leaked(err, keys[:1])


# -- the kernel's reading tools --------------------------------------------------------------


@pytest.mark.anyio
async def test_kernel_tools_mask_keys_from_variables_the_environment_and_cells(
    ipython: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    openai = "sk-proj-" + pysecrets.token_urlsafe(32)  # a well-known shape
    plain = pysecrets.token_hex(16)  # no shape: known by its variable's name
    custom = pysecrets.token_hex(16)  # known because the user named the variable
    literal = "hf_" + pysecrets.token_hex(17)  # typed into a cell
    monkeypatch.setenv("OPENAI_API_KEY", openai)
    monkeypatch.setenv("MY_SERVICE_TOKEN", plain)
    monkeypatch.setenv("DATABASE_URL", f"postgres://me:{custom}@db/prod")
    monkeypatch.setenv("NB_AGENT_SECRET_NAMES", "DATABASE_*")
    ipython.run_cell(
        "import os\n"
        "key = os.environ['OPENAI_API_KEY']\n"
        "tok = os.environ['MY_SERVICE_TOKEN']\n"
        "cfg = {'db': os.environ['DATABASE_URL'], 'retries': 3}\n"
        f"hf = {literal!r}\n"
        "os.environ['LATE_VALUE'] = key[::-1]\n"
        "(key, tok)",
        store_history=True,
    )
    tools = {t.name: t for t in kernel_tools(ipython)}
    outputs = [(await tools["read_cells"].run({"count": 3})).content]
    outputs.append((await tools["list_variables"].run({})).content)
    for name in ("key", "tok", "cfg", "hf"):
        outputs.append((await tools["inspect_variable"].run({"name": name})).content)
    outputs.append((await tools["run_code"].run({"code": "print(key, tok, cfg, hf)"})).content)
    text = "\n".join(outputs)
    for secret in (openai, plain, custom, literal):
        assert secret not in text
        assert secret[:12] not in text
    assert "'retries': 3" in text  # the rest of the variable is still there
    assert "***" in outputs[2]
    for name in ("key", "tok", "cfg", "hf"):
        ipython.user_ns.pop(name, None)


# -- redact itself ---------------------------------------------------------------------------


def test_every_echoed_form_is_masked_and_ordinary_text_is_not() -> None:
    key = new_key()
    secrets.add(key, "short")  # below MIN_CHARS: ignored, it would mangle text
    for form in FORMS.values():
        assert not leaked(secrets.redact(f"the server said <{form(key)}>"), [key])
    b64_inside = base64.b64encode(f"user-name-of-any-length:{key}:and-more".encode()).decode()
    assert key not in base64.b64decode(secrets.redact(b64_inside) + "==", validate=False).decode("latin-1")
    prose = "A short story about a shorter key, a token, and a secret password."
    assert secrets.redact(prose) == prose


def test_authorization_values_mask_their_credential_too() -> None:
    token = pysecrets.token_hex(12)
    user_pass = base64.b64encode(f"ada:{token}".encode()).decode()
    secrets.add_headers({"Authorization": f"Basic {user_pass}", "X-Other": f"Token {token[::-1]}"})
    assert secrets.redact(f"password {token}, reversed {token[::-1]}") == "password ***, reversed ***"


@pytest.mark.parametrize(
    "shape",
    [
        "sk-" + "a1B2" * 12,
        "sk-proj-" + "Zz09_-" * 8,
        "sk-ant-api03-" + "x" * 90,
        "ghp_" + "A1b2" * 9,
        "github_pat_11" + "A" * 70,
        "AKIA" + "ABCDEFGHIJ234567",
        "xoxb-" + "1234567890-abcdefghij",
        "AIza" + "S" * 35,
        "hf_" + "q" * 34,
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc\n-----END RSA PRIVATE KEY-----",
    ],
)
def test_well_known_key_shapes(shape: str) -> None:
    assert secrets.redact(f"before {shape} after") == "before *** after"


def test_bearer_tokens_and_names_added_by_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    assert secrets.redact("Authorization: Bearer abcdefghijklmnop1234") == "Authorization: Bearer ***"
    monkeypatch.setenv("CORP_THING", "value-of-corp-thing")
    assert secrets.redact("x value-of-corp-thing", fresh_env=True) == "x value-of-corp-thing"
    secrets.add_names("CORP_*")
    assert secrets.redact("x value-of-corp-thing") == "x ***"


def test_logs_are_redacted_whatever_the_handler(caplog: pytest.LogCaptureFixture) -> None:
    key = new_key()
    secrets.add(key)
    log = logging.getLogger("nb_agent.anything")
    try:
        raise RuntimeError(f"failed with {key}")
    except RuntimeError:
        log.exception("while sending %s", key)
    assert caplog.records
    assert not leaked(caplog.text, [key])


def test_redaction_is_linear_on_long_hostile_text() -> None:
    secrets.add(*("ab" * 20 + f"{i:03d}" for i in range(100)))  # 100 keys sharing a 40-character start
    hostile = "ab" * 20_000 + "eyJ" * 20_000 + "sk-" * 20_000 + "-----BEGIN " * 5_000 + "ghp_" + "A" * 20_000

    def seconds(text: str) -> float:
        started = time.perf_counter()
        secrets.redact(text)
        return time.perf_counter() - started

    small = seconds(hostile)
    assert seconds(hostile * 8) < max(1.0, small * 30)  # 8x the text: about 8x the time, not 64x
