"""``{cell:ID}`` on a real kernel: hostile outputs read off a (fake) page, and a run with no page at all.

The page's side of reading cells is in tests/browser/test_cell_pictures_e2e.py (JupyterLab itself);
here the notebook's outputs are hostile (a PNG that is not one, an SVG with a script, a picture
larger than nb-agent reads), sent over the workspace comm as the extension sends them, and a headless
``%agent`` (no page, as under nbconvert) asks about a cell. See ``nb_agent/kernel/attach.py``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_client.manager import start_new_kernel

from tests.fake_workspace import MARK, FakeFrontEnd, cell
from tests.kernel.test_kernel_tools import _PROVIDER_VARS, ROOT, Kernel
from tests.servers.scripted_llm import ScriptedModel, Turn
from tests.servers.serve import serve

pytestmark = pytest.mark.timeout(180)

SCRIPT_SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="20" height="10"><script>alert(1)</script></svg>'
READ = f"""\
import json, nb_agent.pictures
from nb_agent.kernel.attach import attachments, read_cells
nb_agent.pictures.MAX_INPUT = 10_000  # what "too large" means here: the real bound is megabytes
cells = await read_cells(["bad", "svg", "big", "words", "nosuch"])
text, found = attachments("see {{cell:bad}} {{cell:svg}} {{cell:big}} {{cell:words}} {{cell:nosuch}}", {{}}, cells)
print({MARK!r} + json.dumps({{"text": text, "data": [p.data for p in found]}}))
"""


def shown(cell_id: str, data: dict[str, object]) -> dict[str, object]:
    return cell(cell_id, "", outputs=[{"output_type": "display_data", "data": data, "metadata": {}}])


def env_of(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARS and not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(tmp_path)
    return env


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    km, kc = start_new_kernel(kernel_name="python3", env=env_of(tmp_path), cwd=str(ROOT), startup_timeout=60)
    try:
        yield Kernel(km, kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_hostile_outputs_are_described_never_sent(kernel: Kernel) -> None:
    cells = [
        shown("bad", {"image/png": "AAAAAAAA", "text/plain": "<Figure size 640x480 with 2 Axes>"}),
        shown("svg", {"image/svg+xml": SCRIPT_SVG}),
        shown("big", {"image/png": "A" * 20_000}),
        cell("words", "", outputs=[{"output_type": "stream", "name": "stdout", "text": "iVBOR not a picture\n"}]),
    ]
    fe = FakeFrontEnd(kernel.kc, cells)
    assert fe.execute("%load_ext nb_agent").error is None
    fe.settle()
    out = fe.execute(READ, cell_id="words").tool()
    assert out["data"] == [None, None, None]  # nothing a model would be sent as an image
    assert out["text"] == (
        "see [image 1: cell bad, a PNG image, 2 axes] [image 2: cell svg, a 20x10 SVG]"
        " [image 3: cell big, a PNG image too large to read]"
        " [cell words: not attached: it shows no picture (no PNG, JPEG or SVG output)]"
        ' [cell nosuch: not attached: there is no cell with id "nosuch" in work/analysis.ipynb]'
    )


def test_a_headless_run_says_the_cell_was_not_attached(kernel: Kernel) -> None:
    scripted = ScriptedModel([Turn(text="I cannot see it.")])
    with serve(scripted.app) as url:
        env = {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test-key", "NB_AGENT_MODEL": "scripted-model"}
        kernel.ok(f"import os\nos.environ.update({env!r})\n%load_ext nb_agent")
        ran = kernel.run("%agent --wait what is wrong with {cell:plot} or {cell:table}", timeout=90)
    assert ran.error is None, ran.error
    note = "not attached: no notebook page is connected to this kernel"
    assert f"nb-agent: {{cell:plot}} {note}" in ran.stdout
    assert f"nb-agent: {{cell:table}} {note}" in ran.stdout
    assert "I cannot see it." in ran.stdout
    prompt = scripted.requests[0]["messages"][-1]["content"]
    assert prompt.startswith(f"what is wrong with [cell plot: {note}")
    assert f"or [cell table: {note}" in prompt
