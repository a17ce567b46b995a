"""llama-cpp-python's own OpenAI-compatible server (``python -m llama_cpp.server``), loading its
model as nb-agent's embedded provider does: weights in plain CPU buffers
(``nb_agent.agent.providers.local_model.plain_cpu_weights``), because llama.cpp's AMX kernels crash in
some virtual machines and the server has no option to turn them off. Arguments are the server's.
"""

from __future__ import annotations

import runpy

from nb_agent.agent.providers.local_model import plain_cpu_weights

if __name__ == "__main__":
    with plain_cpu_weights():
        runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
