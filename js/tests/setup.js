// Load the markdown stack before each test file: the widget loads it on demand, in tasks of its own
// (src/markdown.js loadMarkdown), and renders once it is there; tests render synchronously.
import { loadMarkdown } from "../src/markdown.js";

await loadMarkdown();
