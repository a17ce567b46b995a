// ACP cards that tell the truth: an agent's title shown verbatim (not made into a readable tool
// name), and a card the run left open closed as not completed, its unanswered approval expired.
import { afterEach, describe, expect, it } from "vitest";
import { mountWidget } from "./helpers.js";

const cleanups = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()();
});

const started = { type: "run_started", run_id: "r" };
const options = [
  { option_id: "ok", name: "Allow", kind: "allow_once" },
  { option_id: "no", name: "Reject", kind: "reject_once" },
];

describe("ACP cards", () => {
  it("shows an agent's title verbatim on the tool card and the approval, not the readable name", () => {
    const { push, $ } = mountWidget({ status: "running" }, cleanups);
    const title = "echo acp-$((6*7)) | tee bash-out.txt";
    // display_name as an older kernel would have made it: the title is what the card shows
    push(started, { type: "tool_call", tool_call_id: "t", name: title, title, display_name: "Echo acp $((6*7))" },
      { type: "approval_requested", tool_call_id: "t", name: title, title, display_name: "Echo acp $((6*7))",
        options });
    expect($(".nb-agent-tool .nb-agent-tool-name").textContent).toBe(title);
    expect($(".nb-agent-approval .nb-agent-tool-name").textContent).toBe(title);
    push({ type: "tool_call", tool_call_id: "m", name: "mcp__notion__search", display_name: "Notion: Search" });
    expect($('[data-tool-call-id="m"] .nb-agent-tool-name').textContent).toBe("Notion: Search");
  });

  it("a card the run left open reads not completed, and its unanswered approval says the run ended", () => {
    const { push, $ } = mountWidget({ status: "running" }, cleanups);
    push(started, { type: "tool_call", tool_call_id: "r", name: "Edit a.txt" },
      { type: "approval_requested", tool_call_id: "r", name: "Edit a.txt", options },
      { type: "tool_updated", tool_call_id: "r", status: "incomplete" },
      { type: "tool_result", tool_call_id: "r", is_error: true,
        content: "not completed: the turn ended before the agent reported this call's end" },
      { type: "run_finished", reason: "stop" });
    const card = $(".nb-agent-tool");
    expect(card.dataset.status).toBe("error");
    expect(card.dataset.acpStatus).toBe("incomplete");
    expect(card.querySelector(".nb-agent-result").textContent).toContain("not completed: the turn ended");
    expect($(".nb-agent-approval .nb-agent-approval-answer").textContent).toBe("The run ended before an answer");
  });

});
