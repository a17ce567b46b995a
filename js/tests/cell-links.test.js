import { afterEach, describe, expect, it } from "vitest";
import { mountWidget } from "./helpers.js";

const cleanups = [];
afterEach(() => { while (cleanups.length) cleanups.pop()(); });

function setup() {
  return mountWidget(undefined, cleanups);
}

describe("cell links in workspace tool cards", () => {
  it("links each cell a workspace tool names, by a fragment the extension handles", () => {
    const { el, push } = setup();
    push({ type: "run_started", run_id: "r" },
      { type: "tool_call", tool_call_id: "a", name: "insert_cells", arguments: {} },
      { type: "tool_result", tool_call_id: "a", content: "inserted: cell 5f3a-b1, cell c9 (Ctrl+Z in the notebook undoes it)" },
      { type: "tool_call", tool_call_id: "b", name: "mcp__claude__run_cells", arguments: {} },
      { type: "tool_result", tool_call_id: "b", content: "## cell x1 [3]\nok" });
    const links = [...el.querySelectorAll(".nb-agent-cell-link")];
    expect(links.map((a) => [a.textContent, a.getAttribute("href")])).toEqual([
      ["cell 5f3a-b1", "#nb-agent-cell=5f3a-b1"], ["cell c9", "#nb-agent-cell=c9"], ["cell x1", "#nb-agent-cell=x1"],
    ]);
    const result = el.querySelector("[data-tool-call-id='a'] .nb-agent-result");
    expect(result.textContent).toBe("inserted: cell 5f3a-b1, cell c9 (Ctrl+Z in the notebook undoes it)");
  });

  it("leaves other tools' text alone (no markup from a result)", () => {
    const { el, push } = setup();
    push({ type: "run_started", run_id: "r" },
      { type: "tool_call", tool_call_id: "a", name: "run_code", arguments: {} },
      { type: "tool_result", tool_call_id: "a", content: "cell <b>x</b>" });
    expect(el.querySelectorAll("a")).toHaveLength(0);
    expect(el.querySelector(".nb-agent-result").textContent).toBe("cell <b>x</b>");
  });
});
