"""A fake notebook front end speaking the nb-agent-workspace comm protocol to a real kernel.

It holds a notebook (nbformat cells) and answers the kernel's requests as the JupyterLab extension
(labextension/src/index.ts) does, over the same Jupyter messages: ``comm_open`` / ``comm_msg`` /
``comm_close`` on the shell channel, the kernel's on IOPub. ``run`` sends real execute requests
(with the cell's id in their metadata, as JupyterLab does) and collects the outputs they produce.
One loop (:meth:`FakeFrontEnd.execute`) drives everything, as a browser's event loop would.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from jupyter_client.blocking.client import BlockingKernelClient

TARGET = "nb_agent.workspace"
MARK = "@@tool "


def cell(cell_id: str, source: str, kind: str = "code", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": cell_id, "cell_type": kind, "source": source, "metadata": {}}
    if kind == "code":
        out |= {"execution_count": None, "outputs": []}
    return out | extra


@dataclass
class Executed:
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    reply: dict[str, Any] = field(default_factory=dict)

    def tool(self) -> dict[str, Any]:
        assert self.error is None, self.error
        found = [json.loads(line[len(MARK) :]) for line in self.stdout.splitlines() if line.startswith(MARK)]
        assert len(found) == 1, self.stdout[:800]
        return found[0]


@dataclass
class _Run:
    request_id: str
    cells: list[dict[str, Any]]
    done: list[dict[str, Any]] = field(default_factory=list)
    msg_id: str | None = None


class FakeFrontEnd:
    def __init__(self, kc: BlockingKernelClient, cells: list[dict[str, Any]]) -> None:
        self.kc = kc
        self.cells = cells
        self.active: str | None = None
        self.typing_in: str | None = None  # the cell whose editor has the focus in edit mode
        self.comm_id: str | None = None
        self.extension = True  # False: a front end without the extension (closes the kernel's comm)
        self.requests: list[dict[str, Any]] = []
        self._run: _Run | None = None
        self.path = "work/analysis.ipynb"
        self.kept: dict[str, list[dict[str, Any]]] = {}  # cell id -> its outputs when its execution started
        self.metadata: dict[str, Any] = {}  # the notebook's own (nb_agent.usage: the usage ledger)

    # -- messages out ----------------------------------------------------------------------------
    def _send(self, msg_type: str, content: dict[str, Any], metadata: dict[str, Any] | None = None) -> str:
        msg = self.kc.session.msg(msg_type, content)
        if metadata:
            msg["metadata"].update(metadata)
        self.kc.shell_channel.send(msg)
        return str(msg["header"]["msg_id"])

    def hello(self) -> dict[str, Any]:
        usage = self.metadata.get("nb_agent", {}).get("usage")
        return {"type": "hello", "protocol": 1, "path": self.path, "usage": usage}

    def open_comm(self) -> None:
        """What the extension does on connecting to a kernel (where nb_agent may already be loaded)."""
        self.comm_id = uuid.uuid4().hex
        self._send("comm_open", {"comm_id": self.comm_id, "target_name": TARGET, "data": self.hello()})

    def close_comm(self) -> None:
        if self.comm_id:
            self._send("comm_close", {"comm_id": self.comm_id, "data": {}})
            self.comm_id = None

    def _reply(self, request_id: str, result: Any = None, error: str | None = None) -> None:
        data = {"type": "reply", "id": request_id, "ok": error is None}
        data |= {"result": result} if error is None else {"error": error}
        self._send("comm_msg", {"comm_id": self.comm_id, "data": data})

    # -- the notebook ----------------------------------------------------------------------------
    def index(self, cell_id: Any) -> int:
        for i, c in enumerate(self.cells):
            if c["id"] == cell_id:
                return i
        raise KeyError(f"there is no cell with id {json.dumps(cell_id)} in {self.path}")

    def _not_typing(self, ids: list[str]) -> None:
        if self.typing_in in ids:
            raise KeyError(f"the user is typing in cell {self.typing_in}: it was not changed")

    def _handle(self, request: dict[str, Any]) -> None:
        self.requests.append(request)
        op, args, rid = request["op"], request.get("args") or {}, request["id"]
        try:
            if op == "run":
                self._run = _Run(rid, [self.cells[self.index(i)] for i in args["cell_ids"]])
                self._next_run()
                return
            result = self._apply(op, args)
        except KeyError as exc:
            self._reply(rid, error=str(exc.args[0]))
            return
        self._reply(rid, result)

    def _apply(self, op: str, args: dict[str, Any]) -> Any:
        if op == "read":
            ids = args.get("cell_ids")
            chosen = self.cells if ids is None else [self.cells[self.index(i)] for i in ids]
            return {"path": self.path, "active_cell_id": self.active, "cells": copy.deepcopy(chosen)}
        if op == "insert":
            at = self.index(args["after"]) + 1 if args.get("after") else len(self.cells)
            made = [cell(uuid.uuid4().hex[:8], c["source"], c["cell_type"]) for c in args["cells"]]
            for c in made:  # the extension writes the provenance with the change (provenance.ts)
                if args.get("provenance"):
                    c["metadata"]["nb_agent"] = {"provenance": args["provenance"]}
            self.cells[at:at] = made
            return {"cell_ids": [c["id"] for c in made]}
        if op == "edit":
            target = self.cells[self.index(args["cell_id"])]
            self._not_typing([target["id"]])
            before = {"source": target["source"], "metadata": copy.deepcopy(target["metadata"])}  # undo.ts replaced
            target["source"] = args["source"]
            if args.get("provenance"):
                target["metadata"]["nb_agent"] = {
                    **target["metadata"].get("nb_agent", {}),
                    "provenance": args["provenance"],
                }
            return {"cell_ids": [target["id"]], "before": before}
        if op == "recordings":  # what the cell's outputs carried when its execution started (recordings.ts)
            target = self.cells[self.index(args["cell_id"])]
            kept = self.kept.get(target["id"], target.get("outputs") or [])
            found = [o["metadata"]["nb_agent"]["recording"] for o in kept if "nb_agent" in o.get("metadata", {})]
            return {"recordings": found}
        if op == "delete":
            indices = sorted((self.index(i) for i in args["cell_ids"]), reverse=True)
            self._not_typing(args["cell_ids"])
            before = [{"cell": copy.deepcopy(self.cells[i]), "index": i} for i in indices]  # undo.ts removed
            for i in indices:
                del self.cells[i]
            return {"cell_ids": args["cell_ids"], "before": before}
        if op == "move":
            start = self.index(args["cell_id"])
            moving = self.cells.pop(start)
            self.cells.insert(max(0, min(len(self.cells), args["position"])), moving)
            return {"cell_ids": [moving["id"]], "from": start}
        if op == "revert":  # undo.ts revert: each operation in turn, what is gone or back already skipped
            return self._revert(args.get("operations") or [])
        if op == "usage":
            if isinstance(args.get("set"), dict):
                self.metadata["nb_agent"] = {**self.metadata.get("nb_agent", {}), "usage": copy.deepcopy(args["set"])}
            return {"usage": self.metadata.get("nb_agent", {}).get("usage")}
        if op == "set_outputs":
            target = self.cells[self.index(args["cell_id"])]
            if target["cell_type"] == "code":
                target["outputs"] = args["outputs"]
            return {"cell_ids": [target["id"]]}
        raise KeyError(f"this front end cannot do {op!r}")

    def _revert(self, operations: list[dict[str, Any]]) -> dict[str, Any]:
        done, skipped = 0, []
        for op in operations:
            ident = op.get("cell_id") or (op.get("cell") or {}).get("id")
            at = next((i for i, c in enumerate(self.cells) if c["id"] == ident), -1)
            if op.get("op") == "insert":
                if at >= 0:
                    skipped.append(f"cell {ident} is already there")
                    continue
                self.cells.insert(max(0, min(len(self.cells), op.get("index", len(self.cells)))), op["cell"])
            elif at < 0:
                skipped.append(f"cell {ident} is gone")
                continue
            elif op.get("op") == "delete":
                del self.cells[at]
            elif op.get("op") == "source":
                self.cells[at]["source"] = op.get("source") or ""
                if isinstance(op.get("metadata"), dict):
                    self.cells[at]["metadata"] = op["metadata"]
            elif op.get("op") == "move":
                self.cells.insert(max(0, min(len(self.cells) - 1, op["position"])), self.cells.pop(at))
            done += 1
        return {"done": done, "skipped": skipped}

    def _next_run(self) -> None:
        run = self._run
        assert run is not None
        while run.cells and run.cells[0]["cell_type"] != "code":
            c = run.cells.pop(0)
            run.done.append({"id": c["id"], "cell_type": c["cell_type"], "execution_count": None, "outputs": []})
        if not run.cells:
            self._run = None
            self._reply(run.request_id, {"cells": run.done})
            return
        target = run.cells[0]
        target["outputs"] = []
        content = {"code": target["source"], "silent": False, "store_history": True, "user_expressions": {},
                   "allow_stdin": False, "stop_on_error": True}  # fmt: skip
        run.msg_id = self._send("execute_request", content, {"cellId": target["id"]})

    def _on_run_output(self, kind: str, content: dict[str, Any]) -> None:
        run = self._run
        assert run is not None
        target = run.cells[0]
        if kind in ("stream", "display_data", "execute_result", "error"):
            target["outputs"].append({"output_type": kind, **content})
        elif kind == "execute_input":
            target["execution_count"] = content["execution_count"]
        elif kind == "status" and content["execution_state"] == "idle":
            run.cells.pop(0)
            run.done.append(
                {"id": target["id"], "cell_type": "code", "execution_count": target["execution_count"],
                 "outputs": copy.deepcopy(target["outputs"])}
            )  # fmt: skip
            self._next_run()

    # -- the loop --------------------------------------------------------------------------------
    def pump(self, msg: dict[str, Any]) -> None:
        """Handle one IOPub message the way the extension would."""
        kind, content = msg["msg_type"], msg["content"]
        if kind == "comm_open" and content.get("target_name") == TARGET:
            if not self.extension:  # JupyterLab without the extension: no such target
                self._send("comm_close", {"comm_id": content["comm_id"], "data": {}})
                return
            # the kernel's call reaches every page: answer with a comm of this page's own, as the extension does
            self._send("comm_close", {"comm_id": content["comm_id"], "data": {}})
            self.open_comm()
        elif kind == "comm_msg" and content.get("comm_id") == self.comm_id:
            data = content.get("data") or {}
            if data.get("type") == "request":
                self._handle(data)
        elif self._run is not None and msg["parent_header"].get("msg_id") == self._run.msg_id:
            self._on_run_output(kind, content)

    def execute(self, code: str, *, cell_id: str | None = None, timeout: float = 60) -> Executed:
        """Run a cell (from cell ``cell_id``), serving the kernel's requests until it is done."""
        msg_id = self._send(
            "execute_request",
            {"code": code, "silent": False, "store_history": True, "user_expressions": {}, "allow_stdin": True,
             "stop_on_error": True},
            {"cellId": cell_id} if cell_id else None,
        )  # fmt: skip
        result = Executed()
        idle = False
        deadline = time.monotonic() + timeout
        while not (idle and result.reply and self._run is None):
            assert time.monotonic() < deadline, f"no answer in {timeout}s: {result}"
            try:
                msg = self.kc.get_iopub_msg(timeout=0.05)
            except Exception:  # queue.Empty
                msg = None
            if msg is not None:
                self.pump(msg)
                if msg["parent_header"].get("msg_id") == msg_id:
                    kind, content = msg["msg_type"], msg["content"]
                    if kind == "stream" and content["name"] == "stdout":
                        result.stdout += content["text"]
                    elif kind == "stream":
                        result.stderr += content["text"]
                    elif kind == "error":
                        result.error = f"{content['ename']}: {content['evalue']}"
                    elif kind == "status" and content["execution_state"] == "idle":
                        idle = True
            while self.kc.shell_channel.msg_ready():
                reply = self.kc.get_shell_msg(timeout=1)
                if reply["parent_header"].get("msg_id") == msg_id:
                    result.reply = reply["content"]
        return result

    def serve(self, future: Any, timeout: float = 60) -> Any:
        """Be the page while something else (an MCP client's thread) waits on ``future``."""
        deadline = time.monotonic() + timeout
        while not future.done():
            assert time.monotonic() < deadline, "no answer in time"
            self.settle(0.05)
        return future.result()

    def settle(self, seconds: float = 0.5) -> None:
        """Serve messages for a while (a comm being opened or closed)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                self.pump(self.kc.get_iopub_msg(timeout=0.05))
            except Exception:  # queue.Empty
                continue
