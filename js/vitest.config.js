import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    environment: "jsdom",
    include: ["tests/**/*.test.js"],
    // the markdown stack is loaded on demand in the page (markdown.js loadMarkdown); tests render at once
    setupFiles: ["tests/setup.js"],
  },
});
