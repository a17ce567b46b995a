"""``nb-agent acp``'s pure parts: what a hostile or unusual client answer or prompt becomes.

The subprocess tests (``test_acp_serve*.py``) cover the ordinary paths end to end; these pin the
edges a client nobody here wrote can send: option ids never offered, prompts with resources.
"""

from __future__ import annotations

from acp import text_block
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextResourceContents,
)

from nb_agent.agent.servers.acp.agent import prompt_text
from nb_agent.agent.servers.acp.encode import PERMISSION_OPTIONS, decision_of, stop_reason
from nb_agent.events import RunFinished


def test_every_offered_option_means_what_its_kind_says() -> None:
    answers = {
        o.kind: decision_of(AllowedOutcome(outcome="selected", option_id=o.option_id)) for o in PERMISSION_OPTIONS
    }
    assert answers == {
        "allow_once": ("allow_once", False),
        "allow_always": ("allow_always", False),
        "reject_once": ("deny", False),
        "reject_always": ("deny", True),
    }


def test_an_option_never_offered_or_a_cancel_is_a_denial() -> None:
    assert decision_of(AllowedOutcome(outcome="selected", option_id="yes-please")) == ("deny", False)
    assert decision_of(DeniedOutcome(outcome="cancelled")) == ("deny", False)


def test_stop_reasons() -> None:
    assert stop_reason(RunFinished(reason="stop"), None) == "end_turn"
    assert stop_reason(RunFinished(reason="length"), None) == "max_tokens"
    assert stop_reason(RunFinished(reason="cancel"), None) == "cancelled"
    assert stop_reason(RunFinished(reason="error"), "max_turns") == "max_turn_requests"
    assert stop_reason(RunFinished(reason="error"), "provider_http") is None  # answered as a JSON-RPC error


def test_prompt_text_keeps_resources_and_leaves_out_what_was_not_declared() -> None:
    blocks = [
        text_block("Look at "),
        ResourceContentBlock(type="resource_link", name="data.csv", uri="file:///home/u/data.csv"),
        text_block(" and this:"),
        EmbeddedResourceContentBlock(
            type="resource", resource=TextResourceContents(uri="file:///home/u/a.py", text="x = 1")
        ),
        ImageContentBlock(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
    ]
    assert prompt_text(blocks) == (
        "Look at [data.csv](file:///home/u/data.csv) and this:\nfile:///home/u/a.py:\nx = 1\n"
    )
