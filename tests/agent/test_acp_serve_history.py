"""``nb-agent acp``'s history to the official TypeScript client: ``session/list``, ``session/resume`` and
``session/close`` for the sessions it made (the same scoping as ``session/load``), across a restart of
the server, and ``$/cancel_request`` ending a prompt. The SDK: ``tests/.acp-ts`` (as for
``test_acp_serve_clients``); the model: the scripted one on loopback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.acp_harness import COMMAND, agent_env
from tests.agent.test_acp_serve_clients import TS_PREFIX, _missing
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import Turn

CLIENT = Path(__file__).parents[1] / "clients" / "acp_ts_history.mjs"


def test_the_typescript_client_lists_resumes_and_closes_nb_agents_sessions(running: Running, tmp_path: Path) -> None:
    if not (TS_PREFIX / "node_modules" / "@agentclientprotocol" / "sdk").is_dir():
        _missing("the TypeScript ACP SDK: npm install --prefix tests/.acp-ts @agentclientprotocol/sdk (see .ci/run)")
    turns = [
        Turn(text="Noted."),
        Turn(text="The word was tangerine."),
        Turn(text=" ".join(f"part{i}" for i in range(400)), chunk_size=6, delay=0.05),
    ]
    config = {"command": COMMAND, "cwd": str(tmp_path)}
    with running(*turns) as (model, url):
        env = {**agent_env(url), "NB_AGENT_DATA_DIR": str(tmp_path / "data")}
        done = subprocess.run(["node", str(CLIENT), str(TS_PREFIX), json.dumps(config)], env=env,
                              capture_output=True, text=True, timeout=180, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    first, second = report["first"], report["second"]
    caps = first["init"]["agentCapabilities"]["sessionCapabilities"]
    assert {"list", "resume", "close"} <= set(caps)
    sid = first["sessionId"]
    (listed,) = first["listed"]["sessions"]
    assert (listed["sessionId"], listed["cwd"], listed["title"]) == (sid, str(tmp_path), "remember tangerine")
    assert listed["_meta"] == {"nb-agent/firstPrompt": "remember tangerine"}
    assert listed["updatedAt"].endswith("Z")
    assert first["elsewhere"]["sessions"] == []  # filtered by the folder
    assert first["badCursor"]["error"]["code"] == -32602
    assert first["closed"] == {}
    assert first["afterClose"]["error"]["code"] == -32002  # closed: not an active session any more
    # a new server process, as after an editor restart: the same sessions, this one resumed
    assert [s["sessionId"] for s in second["listed"]["sessions"]] == [sid]
    assert second["stranger"]["error"]["code"] == -32002  # not one of its own: answered as missing
    assert second["turn"]["stopReason"] == "end_turn"
    assert second["cancelled"].get("stopReason") == "cancelled", second["cancelled"]  # $/cancel_request honoured
    assert second["closed"] == {}
    assert "".join(report["texts"]).startswith("Noted.The word was tangerine.part0")  # no replay on resume
    said = json.dumps(model.requests[1]["messages"])
    assert "remember tangerine" in said  # the resumed session kept its history for the model
