"""The built-in agent working in the kernel, as the chat widget sees it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import comm
import pytest

from nb_agent.agent.loop import Agent
from nb_agent.agent.permissions import Permissions
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.connect.config import AgentConfig
from nb_agent.conversation.controller import AgentResult, Conversation
from nb_agent.kernel.toolset import kernel_tools
from nb_agent.ui.widget import ChatWidget
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ToolCallSpec, Turn
from tests.ui.test_widget import RecordingComm, custom

pytestmark = pytest.mark.anyio
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


async def test_a_run_code_call_shows_its_card_output_and_image_in_the_widget(
    ipython: Any, running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(comm, "create_comm", RecordingComm)
    code = (
        "import base64\nfrom IPython.display import Image, display\n"
        f"display(Image(data=base64.b64decode({PNG!r})))\nshared_total = sum(range(5))\nprint('total', shared_total)"
    )
    turns = [Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": code}), "call_1")]), Turn(text="It is 10.")]
    with running(*turns) as (model, url):
        widget = ChatWidget()
        conv = Conversation(AgentConfig(approve="ask"))
        provider = OpenAIProvider("scripted-model", base_url=f"{url}/v1", api_key="test-key")
        conv.client = Agent(provider, tools=kernel_tools(ipython), permissions=Permissions(mode="approve"))
        conv._loop = asyncio.get_running_loop()

        def push(events: list[dict[str, Any]]) -> None:
            widget.push(events)

        result = AgentResult("sum it")
        await conv.run("sum it", result, push, ask=lambda _ev: "allow_once")
        widget.finish_run()

    shown = widget.transcript
    kinds = [e["type"] for e in shown]
    assert kinds.index("tool_call") < kinds.index("approval_requested") < kinds.index("tool_result")
    card = next(e for e in shown if e["type"] == "tool_call")
    assert card["display_name"] == "Run Code"
    assert card["arguments"]["code"] == code
    output = next(e for e in shown if e["type"] == "tool_result")
    assert output["content"].startswith("total 10")
    assert not output["is_error"]
    image = next(e for e in shown if e["type"] == "media")
    assert image["mime_type"] == "image/png"
    assert image["data"] == PNG
    assert any(b["type"] == "events" for b in custom(widget))  # streamed live, not only saved
    assert ipython.user_ns["shared_total"] == 10  # it ran in the user's namespace
    tool_message = model.requests[1]["messages"][-2]
    assert tool_message["role"] == "tool"
    assert tool_message["content"].startswith("total 10")
    assert model.requests[1]["messages"][-1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
