"""AG-UI shared state: STATE_DELTA is RFC 6902 JSON Patch, every op, applied whole or not at all.

The client sends its state back to the server on the next run, so a patch that half applied (or an
op silently skipped) would hand the server a state neither side ever had.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from nb_agent.events import ErrorReported, Notification
from nb_agent.protocols.agui import AGUIClient
from nb_agent.protocols.agui.decode import AGUIMapper
from tests.conftest import collect
from tests.servers.serve import serve

SNAPSHOT = {"type": "STATE_SNAPSHOT", "snapshot": {"todo": ["a", "b"], "done": [], "meta": {"v": 1}}}


def test_move_copy_and_test_ops_apply() -> None:
    mapper = AGUIMapper(session_id="t")
    mapper.frame(SNAPSHOT)
    events = mapper.frame(
        {
            "type": "STATE_DELTA",
            "delta": [
                {"op": "test", "path": "/meta/v", "value": 1},
                {"op": "move", "from": "/todo/0", "path": "/done/-"},
                {"op": "copy", "from": "/meta", "path": "/previous"},
                {"op": "replace", "path": "/meta/v", "value": 2},
            ],
        }
    )
    assert mapper.state == {"todo": ["b"], "done": ["a"], "meta": {"v": 2}, "previous": {"v": 1}}
    assert [type(e) for e in events] == [Notification]


@pytest.mark.parametrize(
    ("op", "why"),
    [
        ({"op": "test", "path": "/meta/v", "value": 7}, "is not equal to tested value 7"),
        ({"op": "remove", "path": "/nowhere/x"}, "nowhere"),
        ({"op": "frobnicate", "path": "/todo"}, "Unknown operation 'frobnicate'"),
    ],
)
def test_a_failing_op_rejects_the_whole_patch(op: dict[str, Any], why: str) -> None:
    mapper = AGUIMapper(session_id="t")
    mapper.frame(SNAPSHOT)
    # The ops before the failing one would apply on their own: they must not apply either.
    events = mapper.frame({"type": "STATE_DELTA", "delta": [{"op": "move", "from": "/todo/0", "path": "/done/-"}, op]})
    assert mapper.state == SNAPSHOT["snapshot"]
    errors = [e for e in events if isinstance(e, ErrorReported)]
    assert len(errors) == 1
    assert errors[0].code == "state_delta"
    assert "STATE_DELTA" in errors[0].message
    assert why in errors[0].message
    assert not mapper.finished  # the run goes on
    mapper.frame({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/meta/w", "value": 3}]})
    assert mapper.state["meta"] == {"v": 1, "w": 3}


def test_a_delta_that_is_not_a_list_is_refused() -> None:
    mapper = AGUIMapper(session_id="t")
    mapper.frame(SNAPSHOT)
    events = mapper.frame({"type": "STATE_DELTA", "delta": {"op": "remove", "path": "/todo"}})
    assert mapper.state == SNAPSHOT["snapshot"]
    assert any(isinstance(e, ErrorReported) and "list of operations" in e.message for e in events)


@pytest.mark.anyio
async def test_the_patched_state_goes_back_to_the_server() -> None:
    """Two runs: the state the second request carries is the first run's state after its delta."""
    received: list[Any] = []
    deltas = [
        [{"op": "move", "from": "/todo/0", "path": "/done/-"}, {"op": "copy", "from": "/done/0", "path": "/last"}],
        [{"op": "test", "path": "/last", "value": "not a"}, {"op": "remove", "path": "/todo"}],
    ]

    async def run(request: Request) -> Response:
        body = await request.json()
        received.append(body["state"])
        delta = deltas[len(received) - 1]
        frames = [
            {"type": "RUN_STARTED", "threadId": body["threadId"], "runId": body["runId"]},
            *([SNAPSHOT] if len(received) == 1 else []),
            {"type": "STATE_DELTA", "delta": delta},
            {"type": "RUN_FINISHED", "threadId": body["threadId"], "runId": body["runId"]},
        ]

        async def gen() -> AsyncIterator[bytes]:
            for frame in frames:
                yield f"data: {json.dumps(frame)}\n\n".encode()

        return StreamingResponse(gen(), media_type="text/event-stream")

    with serve(Starlette(routes=[Route("/", run, methods=["POST"])])) as url:
        async with AGUIClient(url + "/") as client:
            await collect(client, "one")
            moved = {"todo": ["b"], "done": ["a"], "meta": {"v": 1}, "last": "a"}
            assert client.state == moved
            second = await collect(client, "two")
            assert client.state == moved  # the failed `test` kept the state whole
            assert [e.code for e in second if isinstance(e, ErrorReported)] == ["state_delta"]
    assert received == [{}, moved]
