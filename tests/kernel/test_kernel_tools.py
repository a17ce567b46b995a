"""The kernel tools on a real Jupyter kernel (jupyter_client + ipykernel), and the built-in agent using them.

Cells in the kernel call the tools (top-level ``await T[name].run(args)``) and print their
output as one JSON line, which the test parses. The last test runs ``%agent`` headless against
the scripted model on loopback: the model asks for ``run_code``, the code runs in the kernel.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager, start_new_kernel

from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import serve

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parents[2]
MARK = "@@tool "
# a 2x2 RGBA PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAYAAABytg0kAAAAFklEQVR4nGP8z8DwnwEIGBn+MzAwAAAfBAH/0c3w4QAAAABJRU5ErkJggg=="
)
_PROVIDER_VARS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "NB_AGENT_PROVIDER", "NB_AGENT_MODEL")

SETUP = f"""\
import json, signal
from nb_agent.kernel.toolset import KernelToolSettings, kernel_tools
T = {{t.name: t for t in kernel_tools(get_ipython(), KernelToolSettings(timeout=30))}}
T1 = {{t.name: t for t in kernel_tools(get_ipython(), KernelToolSettings(timeout=1))}}  # a 1 s time limit
async def _call(tools, name, args):
    out = await tools[name].run(args)
    print({MARK!r} + json.dumps({{"content": out.content, "is_error": out.is_error, "images": out.images}}))
_kernel_alarm = signal.getsignal(signal.SIGALRM)
"""


@dataclass
class Cell:
    stdout: str = ""
    stderr: str = ""
    error: str | None = None  # "Name: value" of an uncaught exception
    traceback: str = ""  # its traceback as the front end shows it, without colours
    outputs: list[dict[str, Any]] = field(default_factory=list)  # display_data / execute_result contents
    reply: dict[str, Any] = field(default_factory=dict)


class Kernel:
    def __init__(self, km: KernelManager, kc: BlockingKernelClient) -> None:
        self.km, self.kc = km, kc

    def run(self, code: str, *, allow_stdin: bool = True, timeout: float = 30) -> Cell:
        """Execute a cell; its stream output, error, rich outputs and execute_reply."""
        msg_id = self.kc.execute(code, allow_stdin=allow_stdin)
        cell = Cell()
        deadline = time.monotonic() + timeout
        while True:
            msg = self.kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "status" and content["execution_state"] == "idle":
                break
            if kind == "stream":
                if content["name"] == "stdout":
                    cell.stdout += content["text"]
                else:
                    cell.stderr += content["text"]
            elif kind == "error":
                cell.error = f"{content['ename']}: {content['evalue']}"
                cell.traceback = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(content["traceback"]))
            elif kind in ("display_data", "execute_result"):
                cell.outputs.append(content)
        while True:
            reply = self.kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
            if reply["parent_header"].get("msg_id") == msg_id:
                cell.reply = reply["content"]
                return cell

    def ok(self, code: str, **kw: Any) -> str:
        """Run a cell that must not fail; its stdout."""
        cell = self.run(code, **kw)
        assert cell.error is None, cell.error
        return cell.stdout

    def value(self, expression: str) -> Any:
        """An expression evaluated in the kernel, through JSON."""
        return json.loads(self.ok(f"print(json.dumps({expression}))"))

    def tool(self, name: str, tools: str = "T", /, **args: Any) -> dict[str, Any]:
        """Call a kernel tool (from the dict ``tools`` in the kernel) in a cell; its {content, is_error, images}."""
        cell = self.run(f"await _call({tools}, {name!r}, {args!r})")
        assert cell.error is None, cell.error
        lines = cell.stdout.splitlines()
        found = [json.loads(line[len(MARK) :]) for line in lines if line.startswith(MARK)]
        assert len(found) == 1, cell.stdout[:500]
        assert len(lines) == 1, f"the tool's output leaked into the cell: {cell.stdout[:500]!r}"
        return found[0]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("nb-agent-data")


@pytest.fixture(scope="module")
def kernel(data_dir: Path) -> Iterator[Kernel]:
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARS and not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the venv's python
    env["NB_AGENT_DATA_DIR"] = str(data_dir)
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT), startup_timeout=60)
    k = Kernel(km, kc)
    try:
        assert k.ok("import sys; print(sys.executable)").strip().startswith(str(Path(sys.executable).parent))
        k.ok(SETUP)
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


# -- run_code ------------------------------------------------------------------------------------


def test_print_and_the_last_expression(kernel: Kernel) -> None:
    out = kernel.tool("run_code", code="print('hello')\n1 + 1")
    assert out == {"content": "hello\n2", "is_error": False, "images": []}


def test_only_the_codes_own_output_is_captured(kernel: Kernel) -> None:
    """Another thread printing while agent code runs (a run rendering its transcript on its own
    loop thread) keeps its output where it was going; none of it reaches the tool result."""
    code = "import time\nfor _ in range(5):\n    print('mine')\n    time.sleep(0.05)"
    cell = kernel.run(
        "import threading, time\n"
        "_stop = threading.Event()\n"
        "def _chatter():\n"
        "    while not _stop.is_set():\n"
        "        print('from another thread', flush=True); time.sleep(0.01)\n"
        "_t = threading.Thread(target=_chatter); _t.start()\n"
        f"try:\n    await _call(T, 'run_code', {{'code': {code!r}}})\nfinally:\n    _stop.set(); _t.join()"
    )
    assert cell.error is None, cell.error
    found = [json.loads(line[len(MARK) :]) for line in cell.stdout.splitlines() if line.startswith(MARK)]
    assert len(found) == 1
    assert found[0]["content"].split() == ["mine"] * 5
    assert "from another thread" in cell.stdout  # passed through to the cell, not swallowed


def test_variables_live_in_the_users_namespace(kernel: Kernel) -> None:
    assert kernel.tool("run_code", code="x = 41")["content"] == "(no output); it set x = int: 41"
    assert kernel.ok("print(x + 1)") == "42\n"  # the user sees the agent's variable
    kernel.ok("y = 'from the user'")
    assert kernel.tool("run_code", code="y.upper()")["content"] == "'FROM THE USER'"  # and the other way round


def test_a_run_that_printed_nothing_says_what_it_set(kernel: Kernel) -> None:
    """``m = ...`` prints nothing; the result names the values it set (a model that does not see
    the value makes one up), the last three top-level assignments, summarised as inspect_variable does."""
    out = kernel.tool("run_code", code="import statistics\nm = statistics.mean([1, 2, 4])\nm += 1\nlabel: str = 'top'")
    assert out["content"] == "(no output); it set m = float: 3.3333333333333335; label = str: 'top'"
    assert kernel.tool("run_code", code="for i in range(2):\n    pass")["content"] == "(no output)"
    assert kernel.tool("run_code", code="print('shown')\nz = 1")["content"] == "shown"
    failed = kernel.tool("run_code", code="w = 1\n1 / 0")
    assert failed["is_error"] is True
    assert "it set" not in failed["content"]


def test_an_exception_is_a_short_traceback(kernel: Kernel) -> None:
    out = kernel.tool("run_code", code="def lookup(d):\n    return d['missing']\n\nlookup({})")
    assert out["is_error"] is True
    text = out["content"]
    assert text.endswith("KeyError: 'missing'")
    assert "line 4: lookup({})" in text  # the agent's own lines, with their source
    assert "line 2: return d['missing']" in text
    assert "site-packages" not in text  # nothing of the machinery
    assert "nb_agent" not in text
    assert len(text) < 300
    # a function the agent defined, failing later in the user's cell: the kernel shows its source too
    cell = kernel.run("lookup({})")
    assert cell.error == "KeyError: 'missing'"
    assert "return d['missing']" in cell.traceback


def test_a_syntax_error(kernel: Kernel) -> None:
    out = kernel.tool("run_code", code="def broken(:\n    pass")
    assert out["is_error"] is True
    assert "SyntaxError" in out["content"]
    assert "def broken(:" in out["content"]


@pytest.mark.parametrize(
    "code",
    [
        "while True:\n    pass",
        "import time\ntime.sleep(100)",
        "try:\n    while True:\n        pass\nexcept Exception:\n    print('swallowed')",  # it is no Exception
    ],
    ids=["busy-loop", "sleep", "except-Exception"],
)
def test_runaway_code_is_stopped_and_the_kernel_lives_on(kernel: Kernel, code: str) -> None:
    started = time.monotonic()
    out = kernel.tool("run_code", "T1", code=code)
    elapsed = time.monotonic() - started
    assert out["is_error"] is True
    assert out["content"] == "TimeoutError: stopped after 1 s (the time limit)"
    assert 0.9 < elapsed < 10
    assert kernel.ok("print('alive')") == "alive\n"
    # the kernel's own SIGALRM handler is back, and no timer is left running
    assert kernel.value(
        "[signal.getsignal(signal.SIGALRM) is _kernel_alarm, signal.getitimer(signal.ITIMER_REAL)]"
    ) == [
        True,
        [0.0, 0.0],
    ]
    assert kernel.tool("run_code", "T1", code="2 * 21")["content"] == "42"


def test_huge_output_is_cut_with_a_note(kernel: Kernel) -> None:
    out = kernel.tool("run_code", code='print("x" * 10**6)')
    assert out["is_error"] is False
    assert out["content"].startswith("x" * 10_000 + "\n")
    assert out["content"].endswith("[output truncated: 990,000 more characters not shown]")
    assert len(out["content"]) < 10_100


def test_an_image_comes_back_as_an_image_part(kernel: Kernel) -> None:
    code = (
        "import base64\nfrom IPython.display import Image, display\n"
        f"display(Image(data=base64.b64decode({base64.b64encode(PNG).decode()!r})))"
    )
    cell = kernel.run(f"await _call(T, 'run_code', {{'code': {code!r}}})")
    assert cell.outputs == []  # captured for the model, not shown in the cell
    out = json.loads(cell.stdout[len(MARK) :])
    assert out["is_error"] is False
    assert out["content"] == "[image: a 2x2 PNG]"  # what the picture is, not its base64
    [(mime, data)] = out["images"]
    assert mime == "image/png"
    assert base64.b64decode(data) == PNG


def test_a_dataframe_comes_back_as_text_with_its_columns(kernel: Kernel) -> None:
    pytest.importorskip("pandas")
    kernel.ok("import pandas as pd\ndf = pd.DataFrame({'city': ['Oslo', 'Lima', 'Pune'], 'temp_c': [3.5, 19.0, 31.2]})")
    out = kernel.tool("run_code", code="df")
    assert out["is_error"] is False
    assert out["images"] == []
    for shown in ("city", "temp_c", "Lima"):
        assert shown in out["content"]
    assert "<table" not in out["content"]  # the text form, not the HTML


@pytest.mark.parametrize(
    "code",
    ["raise SystemExit(3)", "import sys\nsys.exit(1)", "exit()", "quit()"],
    ids=["raise", "sys.exit", "exit", "quit"],
)
def test_exiting_does_not_end_the_kernel(kernel: Kernel, code: str) -> None:
    out = kernel.tool("run_code", code=code)
    assert out["is_error"] is True
    assert "SystemExit" in out["content"]
    time.sleep(0.3)  # ipykernel stops its loop 0.1 s after being asked to exit
    assert kernel.km.is_alive()
    assert kernel.ok("print('still here')", timeout=10) == "still here\n"


def test_magics_and_shell_commands(kernel: Kernel) -> None:
    out = kernel.tool("run_code", code="%time 1 + 1")
    assert "Wall time" in out["content"]
    assert out["content"].endswith("\n2")
    out = kernel.tool("run_code", code="!echo hi from the shell")
    assert out == {"content": "hi from the shell", "is_error": False, "images": []}


# -- reading tools -------------------------------------------------------------------------------


def test_list_and_inspect_variables_never_dump_the_object(kernel: Kernel) -> None:
    np = pytest.importorskip("numpy")
    pytest.importorskip("pandas")
    kernel.ok(
        "import numpy as np, pandas as pd\n"
        "big = list(range(10**6))\n"
        "arr = np.zeros((1000, 3))\n"
        "frame = pd.DataFrame({'a': range(500), 'b': [1.5] * 500})"
    )
    listing = kernel.tool("list_variables")["content"]
    rows = dict(line.split(": ", 1) for line in listing.splitlines())
    assert rows["big"].startswith("list len 1000000, ")
    assert rows["arr"] == f"numpy.ndarray shape (1000, 3), {np.zeros((1000, 3)).nbytes:,} bytes"
    assert rows["frame"].startswith("pandas.DataFrame shape (500, 2), ")
    assert rows["frame"].endswith(" bytes, columns a, b")  # the columns' names, for code to use
    assert "T" in rows
    assert "_call" not in rows  # nor functions, modules, or private names
    assert "np" not in rows
    assert len(listing) < 2000

    big = kernel.tool("inspect_variable", name="big")
    assert big["is_error"] is False
    assert "len 1000000" in big["content"]
    assert len(big["content"]) < 1000  # a million elements, summarised
    arr = kernel.tool("inspect_variable", name="arr")["content"]
    assert arr.startswith("numpy.ndarray shape (1000, 3) dtype float64")
    assert len(arr) < 1000
    frame = kernel.tool("inspect_variable", name="frame")["content"]
    assert frame.startswith("pandas.DataFrame shape (500, 2)")
    assert "dtypes: a: int64, b: float64" in frame
    assert "statistics:" in frame
    assert "mean" in frame
    assert len(frame) < 3000
    missing = kernel.tool("inspect_variable", name="nope")
    assert missing == {"content": "there is no variable named 'nope'", "is_error": True, "images": []}


def test_read_cells_sees_what_the_user_ran(kernel: Kernel) -> None:
    kernel.ok("marker = 'read-cells-marker'")
    n = kernel.run("6 * 7").reply["execution_count"]
    text = kernel.tool("read_cells", count=3)["content"]
    assert text.startswith(f"In [{n - 1}]:\nmarker = 'read-cells-marker'\n\n")
    assert f"In [{n}]:\n6 * 7\nOut[{n}]: 42" in text
    assert f"In [{n + 1}]:\nawait _call(T, 'read_cells'" in text  # the cell asking is the last one
    assert f"In [{n - 2}]" not in text  # only the last three


@pytest.mark.parametrize(
    ("cells", "text"),
    [
        ([{"source": "df.describe()"}], "df.describe()"),
        ([{"source": "# Notes", "cell_type": "markdown"}], "%%markdown\n# Notes"),
        ([{"source": "a = 1"}, {"source": "b = a + 1"}], "a = 1\n\nb = a + 1"),
    ],
)
def test_insert_cells_without_a_front_end_sends_set_next_input(
    kernel: Kernel, cells: list[dict[str, str]], text: str
) -> None:
    """No page is linked to this kernel: the one insert tool proposes the cells through the kernel."""
    cell = kernel.run(f"await _call(T, 'insert_cells', {{'cells': {cells!r}}})")
    assert cell.error is None
    assert "proposed below the current one" in json.loads(cell.stdout[len(MARK) :])["content"]
    assert {"source": "set_next_input", "text": text, "replace": False} in cell.reply["payload"]


def test_the_model_is_offered_one_insert_tool(kernel: Kernel) -> None:
    names = kernel.ok("print([name for name in T if 'insert' in name])")
    assert names == "['insert_cells']\n"


# -- the built-in agent --------------------------------------------------------------------------


def test_the_builtin_agent_runs_code_in_the_kernel(kernel: Kernel, data_dir: Path) -> None:
    code = "total = sum(range(10))\nprint(total)"
    model = ScriptedModel(
        [
            Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": code}))]),
            Turn(text="The total is 45."),
        ]
    )
    with serve(model.app) as url:
        env = {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test-key", "NB_AGENT_MODEL": "scripted-model"}
        kernel.ok(f"import os\nos.environ.update({env!r})")
        kernel.ok("%load_ext nb_agent")
        # headless (allow_stdin=False, as jupyter execute and nbval send): the cell waits, streaming text
        out = kernel.ok("%agent --approve always Compute the total", allow_stdin=False, timeout=60)
    assert "⚙ Run Code\n    total = sum(range(10))\n    print(total)\n" in out  # the code as lines, not JSON
    assert "? the agent wants to run Run Code" in out
    assert "→ allow_once" in out
    assert "  ✓ 45" in out
    assert "The total is 45." in out
    assert kernel.value("total") == 45  # the agent's variable is the user's now

    assert len(model.requests) == 2
    first, second = model.requests
    assert first["model"] == "scripted-model"
    assert "run_code" in {t["function"]["name"] for t in first["tools"]}
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 1
    assert tool_messages[0]["content"] == "45"

    # what a widget would be fed: the run's events, kept in _agent
    seen = kernel.value(
        "{'types': [e.type for e in _agent.events], 'calls': [[c.name, c.arguments] for c in _agent.tool_calls],"
        " 'results': [[e.content, e.is_error] for e in _agent.events if e.type == 'tool_result'],"
        " 'text': _agent.text, 'reason': _agent.reason}"
    )
    assert seen["calls"] == [["run_code", {"code": code}]]
    assert seen["results"] == [["45", False]]
    types = seen["types"]
    assert types.index("tool_call") < types.index("approval_requested") < types.index("tool_result")
    assert types[-1] == "run_finished"
    assert seen["text"] == "The total is 45."
    assert seen["reason"] == "stop"
    assert list(data_dir.iterdir())  # the session was stored where NB_AGENT_DATA_DIR says
