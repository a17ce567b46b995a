// An agent's questions (elicitation) and its slash commands in the widget: a form with typed
// fields answered, declined and cancelled; a URL offered with its host, opened only on a click;
// hostile shapes bounded; the "/" menu filtered, moved with the arrows and picked with Enter.
import { afterEach, describe, expect, it, vi } from "vitest";
import { reduceAll } from "../src/reducer.js";
import { mountWidget } from "./helpers.js";

const cleanups = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()();
  vi.restoreAllMocks();
});

const started = { type: "run_started", run_id: "r" };
const form = {
  type: "elicitation_requested", elicitation_id: "q1", message: "How should I refactor?", source: "Claude Agent",
  fields: [
    { name: "strategy", kind: "choice", title: "Strategy", required: true,
      choices: [{ value: "safe", title: "Conservative" }, { value: "bold", title: "Aggressive" }] },
    { name: "steps", kind: "integer", title: "Steps", minimum: 1, maximum: 9, default: 3 },
    { name: "tests", kind: "boolean", title: "Run the tests", default: true },
    { name: "note", kind: "string", title: "Note <b>x</b>" },
    { name: "api_key", kind: "string", title: "API key", sensitive: true, default: "sk-should-not-show" },
  ],
};

describe("questions in the widget", () => {
  it("draws the form and sends the answer typed, once", () => {
    const { push, $, $$, model } = mountWidget({ status: "running" }, cleanups);
    push(started, form);
    const card = $(".nb-agent-question");
    expect(card.querySelector(".nb-agent-question-source").textContent).toBe("Claude Agent asks:");
    expect(card.querySelector(".nb-agent-question-message").textContent).toBe("How should I refactor?");
    expect($$(".nb-agent-question-field label").map((l) => l.textContent))
      .toEqual(["Strategy *", "Steps", "Run the tests", "Note <b>x</b>", "API key"]);
    expect(card.querySelector("b")).toBeNull(); // the agent's text is text
    const secret = card.querySelector('input[name="api_key"]');
    expect(secret.type).toBe("password");
    expect(secret.value).toBe(""); // never prefilled
    expect(card.querySelector(".nb-agent-question-sensitive")).not.toBeNull();
    card.querySelector('select[name="strategy"]').value = "bold";
    card.querySelector('input[name="note"]').value = "carefully";
    card.querySelector(".nb-agent-question-accept").click();
    const sent = model.sent.filter((m) => m.type === "elicit");
    expect(sent).toEqual([{ type: "elicit", elicitation_id: "q1", action: "accept",
      content: { strategy: "bold", steps: 3, tests: true, note: "carefully" } }]);
    card.querySelector(".nb-agent-question-decline").click(); // disabled now: no second answer
    expect(model.sent.filter((m) => m.type === "elicit")).toHaveLength(1);
    push({ type: "elicitation_answered", elicitation_id: "q1", action: "accept", content: { strategy: "bold" } });
    expect(card.dataset.answered).toBe("true");
    expect(card.querySelector(".nb-agent-question-status").textContent).toBe("Answered");
  });

  it("an answered form drawn again (a reopened notebook) shows what was sent", () => {
    const { push, $ } = mountWidget({ status: "idle" }, cleanups);
    push(started, form, { type: "elicitation_answered", elicitation_id: "q1", action: "accept",
      content: { strategy: "bold", steps: 4, tests: false, api_key: "***" } }, { type: "run_finished", reason: "stop" });
    const card = $(".nb-agent-question");
    expect(card.querySelector('select[name="strategy"]').value).toBe("bold");
    expect(card.querySelector('input[name="steps"]').value).toBe("4");
    expect(card.querySelector('input[name="tests"]').checked).toBe(false);
    expect(card.querySelector(".nb-agent-question-accept").disabled).toBe(true);
  });

  it("declines and cancels; a question left open closes with its run", () => {
    const { push, $, model } = mountWidget({ status: "running" }, cleanups);
    push(started, form, { ...form, elicitation_id: "q2" });
    const [first, second] = document.querySelectorAll(".nb-agent-question");
    first.querySelector(".nb-agent-question-decline").click();
    expect(model.sent.at(-1)).toMatchObject({ type: "elicit", elicitation_id: "q1", action: "decline" });
    push({ type: "elicitation_answered", elicitation_id: "q1", action: "decline" },
      { type: "run_finished", reason: "stop" });
    expect(first.querySelector(".nb-agent-question-status").textContent).toBe("Declined");
    expect(second.querySelector(".nb-agent-question-status").textContent).toBe("Not answered: the run ended.");
    expect(second.querySelector(".nb-agent-question-accept").disabled).toBe(true);
    expect($(".nb-agent-question")).toBe(first);
  });

  it("a required field left empty is not sent", () => {
    const { push, model } = mountWidget({ status: "running" }, cleanups);
    push(started, form);
    document.querySelector(".nb-agent-question-accept").click();
    expect(model.sent.filter((m) => m.type === "elicit")).toEqual([]);
  });

  it("offers a URL with its host and opens it only on the click", () => {
    const open = vi.spyOn(window, "open").mockImplementation(() => null);
    const { push, $, model } = mountWidget({ status: "running" }, cleanups);
    push(started, { type: "elicitation_requested", elicitation_id: "oauth-1", message: "Connect GitHub",
      mode: "url", url: "https://xn--gthub-n4a.com/login?x=1", host: "xn--gthub-n4a.com" });
    const card = $(".nb-agent-question");
    expect(card.querySelector(".nb-agent-question-host").textContent).toBe("xn--gthub-n4a.com");
    expect(card.querySelector(".nb-agent-question-href").textContent).toBe("https://xn--gthub-n4a.com/login?x=1");
    expect(card.querySelector("a")).toBeNull(); // no link the page could follow by itself
    expect(open).not.toHaveBeenCalled();
    card.querySelector(".nb-agent-question-accept").click();
    expect(open).toHaveBeenCalledWith("https://xn--gthub-n4a.com/login?x=1", "_blank", "noopener,noreferrer");
    expect(model.sent.at(-1)).toEqual({ type: "elicit", elicitation_id: "oauth-1", action: "accept", content: null });
  });

  it("draws the agent's words through the card normaliser: hidden characters as marked escapes", () => {
    const { push, $, $$ } = mountWidget({ status: "running" }, cleanups);
    const rlo = "\u202e";
    push(started, { type: "elicitation_requested", elicitation_id: "q2", source: `Agent${rlo}`,
      message: `Delete the backup?\rNo, keep it ${rlo}txt.exe`,
      fields: [{ name: "ok", kind: "choice", title: `Sure\u200b`, description: `read ${rlo}me`,
        choices: [{ value: "y", title: `yes${rlo}` }] },
      { name: "tags", kind: "choices", choices: [{ value: "a", title: `a\u200bb` }] }] });
    const card = $(".nb-agent-question");
    const message = card.querySelector(".nb-agent-question-message");
    expect(message.querySelectorAll(".nb-agent-line")).toHaveLength(2); // a lone CR is a line break, shown
    expect(message.textContent).toBe("Delete the backup?\\r\nNo, keep it \\u202etxt.exe");
    expect(message.querySelector(".nb-agent-unseen").textContent).toBe("\\r");
    expect(card.querySelector(".nb-agent-question-source").textContent).toBe("Agent\\u202e asks:");
    expect($$(".nb-agent-question-field > label").map((l) => l.textContent)).toEqual(["Sure\\u200b", "tags"]);
    expect(card.querySelector(".nb-agent-question-help").textContent).toBe("read \\u202eme");
    expect(card.querySelector('select option[value="y"]').textContent).toBe("yes\\u202e");
    expect(card.querySelector(".nb-agent-question-choice").textContent).toBe(" a\\u200bb");
    expect(card.textContent).not.toContain(rlo);
    expect(card.dataset.unseen).toBe("true");
    expect(card.querySelector(".nb-agent-question-warning").textContent).toContain("shown as an escape");
  });

  it("a link's host and address are drawn with their hidden characters shown", () => {
    const { push, $ } = mountWidget({ status: "running" }, cleanups);
    push(started, { type: "elicitation_requested", elicitation_id: "q3", mode: "url", message: "Sign in",
      url: "https://example.org/a\u200bb", host: "example.org" });
    const card = $(".nb-agent-question");
    expect(card.querySelector(".nb-agent-question-href").textContent).toBe("https://example.org/a\\u200bb");
    expect(card.dataset.unseen).toBe("true");
  });

  it("bounds and filters hostile questions", () => {
    const fields = Array.from({ length: 500 }, (_, i) => ({ name: `f${i}`, kind: "string" }));
    const state = reduceAll([started,
      { type: "elicitation_requested", elicitation_id: "h", message: "m", fields: [...fields, { name: 1 }, null] },
      { type: "elicitation_requested", elicitation_id: "u", message: "m", mode: "url", url: "javascript:alert(1)" },
      { type: "elicitation_answered", elicitation_id: "h", action: "explode" },
      { type: "elicitation_answered", elicitation_id: "nope", action: "accept" }]);
    const [h, u] = state.turns[0].items;
    expect(h.fields).toHaveLength(20);
    expect(h.action).toBeNull();
    expect(u.mode).toBe("form"); // not a web URL: nothing to open
    expect(u.url).toBeNull();
  });
});

describe("the / menu", () => {
  const commands = { type: "commands_changed", commands: [
    { name: "review", description: "Review my changes", hint: "optional instructions" },
    { name: "review-branch", description: "Review against a branch", hint: "branch name" },
    { name: "init", description: "Create AGENTS.md" },
  ] };

  it("lists the commands as / is typed, filters, and picks with the keys", () => {
    const { push, $, $$ } = mountWidget({}, cleanups);
    push(started, commands, { type: "run_finished", reason: "stop" });
    const input = $(".nb-agent-input");
    const type = (text) => { input.value = text; input.dispatchEvent(new Event("input")); };
    type("/");
    expect($$(".nb-agent-slash-item").map((li) => li.dataset.command)).toEqual(["review", "review-branch", "init"]);
    expect($$(".nb-agent-slash-description").map((d) => d.textContent)[1]).toBe("Review against a branch");
    expect(input.getAttribute("aria-expanded")).toBe("true");
    type("/rev");
    expect($$(".nb-agent-slash-item")).toHaveLength(2);
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowDown", bubbles: true }));
    expect($$(".nb-agent-slash-item")[1].getAttribute("aria-selected")).toBe("true");
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    expect(input.value).toBe("/review-branch ");
    expect($(".nb-agent-slash-menu").hidden).toBe(true);
    expect(input.hasAttribute("aria-expanded")).toBe(false);
    expect($(".nb-agent-slash-hint").textContent).toBe("/review-branch branch name");
    type("/x");
    expect($(".nb-agent-slash-menu").hidden).toBe(true);
  });

  it("draws each command's name, description and hint with hidden characters as escapes", () => {
    const { push, $ } = mountWidget({}, cleanups);
    push(started, { type: "commands_changed", commands: [
      { name: "fix", description: "Fix it\u202e now", hint: "what\u200b" }] }, { type: "run_finished", reason: "stop" });
    const input = $(".nb-agent-input");
    input.value = "/";
    input.dispatchEvent(new Event("input"));
    const item = $(".nb-agent-slash-item");
    expect(item.querySelector(".nb-agent-slash-description").textContent).toBe("Fix it\\u202e now");
    expect(item.querySelector(".nb-agent-slash-input").textContent).toBe(" what\\u200b");
    expect(item.querySelector(".nb-agent-slash-description .nb-agent-unseen")).not.toBeNull();
    input.value = "/fix ";
    input.dispatchEvent(new Event("input"));
    expect($(".nb-agent-slash-hint").textContent).toBe("/fix what\\u200b");
  });

  it("Enter on an open menu picks, it does not send", () => {
    const { push, $, model } = mountWidget({}, cleanups);
    push(started, commands, { type: "run_finished", reason: "stop" });
    const input = $(".nb-agent-input");
    input.value = "/in";
    input.dispatchEvent(new Event("input"));
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    expect(model.sent.filter((m) => m.type === "send")).toEqual([]);
    input.value += "now";
    input.dispatchEvent(new Event("input"));
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    expect(model.sent.filter((m) => m.type === "send")).toEqual([{ type: "send", text: "/init now" }]);
  });
});
