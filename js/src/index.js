// The anywidget front-end module of nb-agent's chat widget.

import "./styles.css";
import { createWidget } from "./widget.js";

/** @typedef {import("./types").WidgetTraits} WidgetTraits */

/** @type {import("@anywidget/types").AnyWidget<WidgetTraits & Record<string, any>>} */
export default {
  render({ model, el }) {
    return createWidget({ model, el });
  },
};
