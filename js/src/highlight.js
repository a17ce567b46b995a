// highlight.js core with the few languages agents use most (keeps the bundle small).

import hljs from "highlight.js/lib/core";
import python from "highlight.js/lib/languages/python";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import bash from "highlight.js/lib/languages/bash";
import sql from "highlight.js/lib/languages/sql";
import markdown from "highlight.js/lib/languages/markdown";

/** The grammars, registered on first use: building them costs ~5 ms, kept out of module start-up. */
let registered = false;
export function registerLanguages() {
  if (registered) return;
  registered = true;
  hljs.registerLanguage("python", python);
  hljs.registerLanguage("javascript", javascript);
  hljs.registerLanguage("json", json);
  hljs.registerLanguage("bash", bash);
  hljs.registerLanguage("sql", sql);
  hljs.registerLanguage("markdown", markdown);
  hljs.registerAliases(["shell", "console", "terminal"], { languageName: "bash" });
  hljs.registerAliases(["ipython", "py3"], { languageName: "python" });
  hljs.registerAliases(["ts", "typescript", "tsx"], { languageName: "javascript" });
}

/** Above this size, unlabelled code is not auto-detected (detection tries every language). */
const AUTO_LIMIT = 20_000;

/** A fence's language tag, lowercased, or "" when it is not a plain name. @param {string} lang */
const cleanTag = (lang) => (/^[\w+#.-]+$/.test(lang) ? lang.toLowerCase() : "");

/** @param {string} s */
const escape = (s) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * Highlighted HTML for a code block (escaped: safe to sanitize and insert).
 * @param {string} code
 * @param {string} lang  the fence's language tag ("" when none)
 * @returns {{ html: string, language: string }}
 */
export function highlightCode(code, lang) {
  const tag = cleanTag(lang);
  registerLanguages();
  try {
    const known = tag ? hljs.getLanguage(tag) : undefined;
    if (known) {
      const language = known.name?.toLowerCase() ?? tag;
      return { html: hljs.highlight(code, { language: tag, ignoreIllegals: true }).value, language };
    }
    if (!tag && code.length <= AUTO_LIMIT) {
      const auto = hljs.highlightAuto(code);
      if (auto.language && auto.relevance >= 5) return { html: auto.value, language: auto.language };
    }
  } catch {
    // fall through: plain text
  }
  return { html: escape(code), language: tag };
}
