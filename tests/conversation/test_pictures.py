"""A plot reaches a model as an image, never as base64 text: bounded, described, counted, attached.

The built-in agent's ``run_code`` draws a real matplotlib figure in the kernel; the scripted model
(OpenAI chat completions) must receive it as an ``image_url`` part, and the tool result's text must
say what it is ("a 640x480 PNG, 3 axes"); a model without vision gets that description instead of the
image. A ``{fig}`` in a prompt attaches the figure itself. Sizes, bounds and hostile data: ``pictures``.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
from typing import Any

import pytest

from nb_agent.agent.compaction import estimate_tokens
from nb_agent.agent.images import for_model, prompt_parts
from nb_agent.agent.loop import Agent
from nb_agent.agent.messages import ImagePart, Message, TextPart
from nb_agent.agent.permissions import Permissions
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.connect.config import AgentConfig
from nb_agent.conversation.controller import Conversation
from nb_agent.conversation.result import AgentResult
from nb_agent.kernel.attach import MAX_ATTACHED, NOT_AWAITED, attachments
from nb_agent.kernel.toolset import kernel_tools
from nb_agent.pictures import MAX_INPUT, MAX_SIDE, Picture, from_value, picture, size_of
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ToolCallSpec, Turn

pytestmark = pytest.mark.anyio
plt = pytest.importorskip("matplotlib.pyplot")
PLOT = (  # what the inline backend does in a notebook: a PNG display of the figure
    "import matplotlib\n"
    "matplotlib.use('Agg')\n"
    "import matplotlib.pyplot as plt\n"
    "from IPython.core.pylabtools import select_figure_formats\n"
    "select_figure_formats(get_ipython(), {'png'})\n"
    "get_ipython().display_formatter.formatters['image/png'].enabled = True\n"  # a test shell has it off
    "fig, axes = plt.subplots(1, 3)\n"
    "for i, ax in enumerate(axes):\n"
    "    ax.plot([0, 1, 2], [i, i * 2, i * 3])\n"
    "display(fig)\n"
    "plt.close(fig)\n"
)


def png(width: int, height: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(out, format="PNG")
    return out.getvalue()


# -- pictures ------------------------------------------------------------------------------------------
def test_sizes_come_from_the_files_own_header() -> None:
    from PIL import Image

    jpeg = io.BytesIO()
    Image.new("RGB", (320, 200)).save(jpeg, format="JPEG")
    assert size_of("image/png", png(640, 480)) == (640, 480)
    assert size_of("image/jpeg", jpeg.getvalue()) == (320, 200)
    assert size_of("image/svg+xml", b'<svg xmlns="http://www.w3.org/2000/svg" width="460.8pt" height="345.6pt">') == (
        461,
        346,
    )
    assert size_of("image/png", b"not a png") is None


def test_a_large_picture_is_downscaled_to_the_bound_and_described_as_it_was() -> None:
    big = picture("image/png", base64.b64encode(png(4000, 1000)).decode())
    assert big.data is not None
    assert (big.width, big.height) == (MAX_SIDE, 392)
    assert size_of("image/png", base64.b64decode(big.data)) == (MAX_SIDE, 392)
    assert big.description == "a 4000x1000 PNG"
    assert big.tokens() == MAX_SIDE * 392 // 750


def test_hostile_or_unshowable_pictures_are_described_not_sent() -> None:
    assert picture("image/png", "%%%not base64%%%").data is None
    svg = picture("image/svg+xml", b'<svg width="10" height="20"><script>x</script></svg>')
    assert svg.data is None or svg.mime_type == "image/png"  # rasterised only where cairosvg is installed
    assert svg.description == "a 10x20 SVG"
    tiff = picture("image/tiff", b"II*\x00")
    assert (tiff.data, tiff.description) == (None, "a image/tiff image")


def test_a_figure_value_is_a_picture_with_its_axes() -> None:
    fig, axes = plt.subplots(1, 3)
    try:
        pic = from_value(fig)
        assert pic is not None
        assert pic.description == "a 640x480 PNG, 3 axes"
        assert from_value(axes[0]) is not None  # an Axes: its figure
        assert from_value(42) is None
        assert from_value("a string") is None
    finally:
        plt.close(fig)


def test_a_prompts_figure_is_attached_and_named_in_its_text() -> None:
    fig = plt.figure()
    try:
        text, found = attachments("what is wrong with this chart? {fig} and {n} {missing}", {"fig": fig, "n": 3})
    finally:
        plt.close(fig)
    assert text == "what is wrong with this chart? [image 1: fig, a 640x480 PNG, 0 axes] and {n} {missing}"
    assert [p.mime_type for p in found] == ["image/png"]


def test_a_cells_pictures_are_numbered_after_the_figures_and_bounded_in_number() -> None:
    fig, told = plt.figure(), []
    plot = picture("image/png", png(30, 20))
    cells = {"p": [plot, plot], "many": [plot] * 4, "gone": 'there is no cell with id "gone"'}
    try:
        text, found = attachments(
            "{fig} {cell:p} {cell:many} {cell:gone} {cell:p} {{cell:p}}", {"fig": fig}, cells, told.append
        )
    finally:
        plt.close(fig)
    assert text == (
        "[image 1: fig, a 640x480 PNG, 0 axes] [image 2: cell p, a 30x20 PNG] [image 3: cell p, a 30x20 PNG]"
        " [image 4: cell many, a 30x20 PNG] [image 5: cell many, a 30x20 PNG]"  # MAX_ATTACHED in all
        ' [cell gone: not attached: there is no cell with id "gone"]'
        " [image 2: cell p, a 30x20 PNG] [image 3: cell p, a 30x20 PNG] {{cell:p}}"  # named twice, sent once
    )
    assert len(found) == MAX_ATTACHED
    assert told == ['{cell:gone} not attached: there is no cell with id "gone"']


def test_a_cell_is_not_attached_where_the_page_cannot_be_read() -> None:
    told: list[str] = []
    text, found = attachments("what is wrong with {cell:c4}?", {}, None, told.append)  # %agent inside a def
    assert (text, found) == (f"what is wrong with [cell c4: not attached: {NOT_AWAITED}]?", [])
    assert told == [f"{{cell:c4}} not attached: {NOT_AWAITED}"]


def test_picture_data_beyond_the_bound_is_not_decoded() -> None:
    huge = "A" * (MAX_INPUT + 1)
    assert picture("image/png", huge) == Picture("image/png", None, None, None, "a PNG image too large to read")
    assert picture("image/png", "AAAAAAAA").data is None  # base64, but no PNG: a provider would refuse it


def test_a_model_without_vision_gets_descriptions_and_the_meter_counts_images() -> None:
    pic = picture("image/png", png(750, 100))
    messages = [prompt_parts("look", [pic])]
    assert for_model(messages, True) is messages
    (shown,) = for_model(messages, False)
    assert [type(p) for p in shown.content] == [TextPart, TextPart]
    assert shown.content[1].text == "\n[image: a 750x100 PNG]"  # type: ignore[union-attr]
    assert estimate_tokens(messages) >= 100  # 750 x 100 / 750 for the image alone
    assert estimate_tokens([Message.user("look")]) < 10


# -- a plot through the built-in agent ------------------------------------------------------------------
async def plot_run(ipython: Any, running: Running, prompt: str = "plot it", attach: tuple[Any, ...] = ()) -> Any:
    turns = [Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": PLOT}), "call_1")]), Turn(text="Done.")]
    with running(*turns) as (model, url):
        conv = Conversation(AgentConfig(approve="always"))
        provider = OpenAIProvider("scripted-model", base_url=f"{url}/v1", api_key="test-key")
        conv.client = Agent(provider, tools=kernel_tools(ipython), permissions=Permissions(mode="auto"))
        conv._loop = asyncio.get_running_loop()
        conv.attach = attach
        await conv.run(prompt, AgentResult(prompt), lambda _events: None, ask=lambda _ev: "allow_once")
    return model


def parts_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for m in request["messages"] if isinstance(m.get("content"), list) for p in m["content"]]


async def test_a_plot_reaches_the_model_as_an_image_part(ipython: Any, running: Running) -> None:
    model = await plot_run(ipython, running)
    second = model.requests[1]
    tool = next(m for m in second["messages"] if m["role"] == "tool")
    (said,) = re.findall(r"\[image: a (\d+)x(\d+) PNG, 3 axes\]", tool["content"])  # the inline backend crops
    assert "iVBOR" not in json.dumps([m.get("content") for m in second["messages"] if m["role"] == "tool"])
    images = [p for p in parts_of(second) if p.get("type") == "image_url"]
    assert len(images) == 1
    raw = base64.b64decode(images[0]["image_url"]["url"].split(",", 1)[1])
    assert size_of("image/png", raw) == (int(said[0]), int(said[1]))


async def test_a_model_without_vision_gets_the_plots_description(
    ipython: Any, running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NB_AGENT_VISION", "off")
    fig = plt.figure(figsize=(3, 2))
    try:
        text, found = attachments("what is wrong with this chart? {fig}", {"fig": fig})
    finally:
        plt.close(fig)
    model = await plot_run(ipython, running, text, tuple(found))
    second = model.requests[1]
    assert [p for p in parts_of(second) if p.get("type") == "image_url"] == []
    said = json.dumps(second["messages"])
    assert "iVBOR" not in said  # no image, not even as text
    assert re.search(r"\[image: a \d+x\d+ PNG, 3 axes\]", said)  # the tool result's own words
    prompt = second["messages"][1]
    assert prompt["role"] == "user"
    assert prompt["content"] == f"{text}\n[image: a 300x200 PNG, 0 axes]"


async def test_a_figure_named_in_the_prompt_goes_to_the_model_as_an_image(ipython: Any, running: Running) -> None:
    fig = plt.figure(figsize=(3, 2))
    try:
        text, found = attachments("what is wrong with this chart? {fig}", {"fig": fig})
    finally:
        plt.close(fig)
    model = await plot_run(ipython, running, text, tuple(found))
    first = model.requests[0]["messages"][-1]
    assert first["role"] == "user"
    assert first["content"][0] == {
        "type": "text",
        "text": "what is wrong with this chart? [image 1: fig, a 300x200 PNG, 0 axes]",
    }
    assert first["content"][1]["type"] == "image_url"


def test_an_image_part_keeps_its_description_in_a_saved_session() -> None:
    part = ImagePart(mime_type="image/png", data="AAAA", description="a 1x1 PNG")
    assert ImagePart.model_validate_json(part.model_dump_json()) == part
    assert ImagePart.model_validate({"type": "image", "mime_type": "image/png", "data": "AAAA"}).description is None
