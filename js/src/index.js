// The anywidget front-end module of nb-agent's chat widget.

import "./styles.css";
import { createWidget } from "./widget.js";
import { loadMarkdown } from "./markdown.js";

/** @typedef {import("./types").WidgetTraits} WidgetTraits */

/** @type {import("@anywidget/types").AnyWidget<WidgetTraits & Record<string, any>>} */
export default {
  // the widget listens at once; its first render waits for the markdown stack, loaded in tasks of
  // its own (markdown.js loadMarkdown), and anywidget's render resolves once it is there
  async render({ model, el }) {
    const cleanup = createWidget({ model, el });
    await loadMarkdown();
    return cleanup;
  },
};
