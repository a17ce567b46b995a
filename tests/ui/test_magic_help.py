"""Every nb-agent magic answers ``--help``, ``-h``, ``?`` and ``??`` with its usage, in a real kernel.

A newcomer's first tries: ``%agent --help`` and ``%agent?`` (IPython's own convention for a magic's
help). Neither is a prompt: the cell prints the magic's usage (its options table) and no model is
contacted, which the scripted model's log of every request (``ScriptedModel.seen``) shows. The
requests go both as a headless run sends them and as JupyterLab does (``allow_stdin``: there a
top-level ``%agent`` cell waits for its run, ``nb_agent.ui.awaiting``). The magics are the ones the
extension registered in the kernel, found there: a magic added later is covered without a word here.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_client.manager import start_new_kernel

from tests.kernel.test_kernel_tools import _PROVIDER_VARS, ROOT, Kernel
from tests.servers.scripted_llm import ScriptedModel, Turn
from tests.servers.serve import serve

pytestmark = pytest.mark.timeout(300)

# What each magic's usage must show (its options, as the user reads them); a magic not listed here
# is still checked for its own usage line.
SHOWN = {
    "agent": ["%agent [--url URL]", "--model MODEL", "the model to ask for", "--new", "start a fresh conversation",
              "PROMPT"],
    "agent_config": ["%agent_config [--url URL]", "--reset", "back to the NB_AGENT_* environment defaults"],
    "agent_usage": ["%agent_usage [--json]", "return the ledger as saved in the notebook"],
    "agent_verify": ["%agent_verify [--timeout TIMEOUT] [path]", "seconds the whole verification may take"],
    "agent_mcp": ["%agent_mcp", "start", "stop", "approve", "--port PORT"],
}  # fmt: skip
ASKS = ["--help", "-h", "?", "??", " ?"]  # as typed after the magic's name: `%agent --help`, `%agent?`, ...


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    scripted = ScriptedModel([Turn(text="It is 6.")])
    with serve(scripted.app) as url:
        scripted.url = url  # type: ignore[attr-defined]
        yield scripted


@pytest.fixture(scope="module")
def kernel(model: ScriptedModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARS and not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(tmp_path_factory.mktemp("help-data"))
    env |= {"OPENAI_BASE_URL": f"{model.url}/v1", "OPENAI_API_KEY": "test-key", "NB_AGENT_MODEL": "scripted-model"}  # type: ignore[attr-defined]
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT), startup_timeout=60)
    k = Kernel(km, kc)
    try:
        k.ok("import json\n%load_ext nb_agent\ndata = [1, 2, 3]")
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def nb_agent_magics(kernel: Kernel) -> dict[str, list[str]]:
    """The kernel's nb-agent magics, by kind: what ``%load_ext nb_agent`` registered."""
    return kernel.value(  # type: ignore[no-any-return]
        "{kind: sorted(n for m in get_ipython().magics_manager.registry.values()"
        " if type(m).__module__.startswith('nb_agent.') for n in m.magics[kind])"
        " for kind in ('line', 'cell')}"
    )


def test_the_extension_registers_the_magics_the_readme_names(kernel: Kernel) -> None:
    magics = nb_agent_magics(kernel)
    assert set(SHOWN) <= set(magics["line"])
    assert "agent" in magics["cell"]


@pytest.mark.parametrize("front_end", [False, True], ids=["headless", "jupyterlab"])
def test_every_magics_help_prints_its_usage_and_runs_nothing(
    kernel: Kernel, model: ScriptedModel, front_end: bool
) -> None:
    magics = nb_agent_magics(kernel)
    for name in magics["line"]:
        for ask in ASKS:
            cell = kernel.run(f"%{name}{'' if ask.startswith(('?', ' ')) else ' '}{ask}", allow_stdin=front_end)
            shown = f"%{name}{ask}: {cell.stdout[:300]!r} {cell.error} {cell.reply.get('payload')}"
            assert cell.error is None, shown
            assert cell.outputs == [], shown  # no widget, no run
            assert cell.stdout.startswith("Usage:"), shown
            for part in SHOWN.get(name, [f"%{name}"]):
                assert part in cell.stdout, (part, shown)
    for name in magics["cell"]:  # %%agent --help, %%agent? (the cell's body is not a prompt then)
        for first in (f"%%{name} --help", f"%%{name}?", f"%%{name} -h"):
            cell = kernel.run(f"{first}\nwhat is in data?", allow_stdin=front_end)
            assert cell.error is None, (first, cell.error)
            assert cell.outputs == [], first
            assert cell.stdout.startswith("Usage:"), (first, cell.stdout[:300])
    assert model.seen == []  # no model was asked anything, not even its list of models


@pytest.mark.parametrize("front_end", [False, True], ids=["headless", "jupyterlab"])
def test_an_empty_agent_or_a_prompt_of_question_marks_prints_the_usage(
    kernel: Kernel, model: ScriptedModel, front_end: bool
) -> None:
    for code in ("%agent", "%agent   ", "%agent ???", "%%agent\n?\n", "%%agent --new\n  ?? \n"):
        cell = kernel.run(code, allow_stdin=front_end)
        assert cell.error is None, (code, cell.error)
        assert cell.outputs == [], code
        assert cell.stdout.startswith("Usage:"), (code, cell.stdout[:300])
        assert "--model MODEL" in cell.stdout, code
    assert model.seen == []


def test_a_question_ending_in_a_question_mark_is_still_a_prompt(kernel: Kernel, model: ScriptedModel) -> None:
    """Last in this module: it spends the model's one answer."""
    cell = kernel.run("%agent --wait what is the sum of {data}?", allow_stdin=False, timeout=120)
    assert cell.error is None, cell.error
    assert "It is 6." in cell.stdout
    asked = model.requests[-1]["messages"][-1]["content"]
    text = asked if isinstance(asked, str) else json.dumps(asked)
    assert "what is the sum of" in text
    assert text.rstrip().endswith("?"), text[-200:]
