// highlight.js core with the few languages agents use most (keeps the bundle small), loaded on
// demand (markdown.js `loadMarkdown`): its modules are not evaluated with the widget's own.

/** @type {import("highlight.js").HLJSApi | null} */
let hljs = null;
/** @type {Record<string, import("highlight.js").LanguageFn>} */
let grammars = {};

/** Evaluate highlight.js and its grammars' modules (a task of their own, before first use). */
export async function loadHighlighter() {
  if (hljs) return;
  const [core, python, javascript, json, bash, sql, markdown] = await Promise.all([
    import("highlight.js/lib/core"),
    import("highlight.js/lib/languages/python"),
    import("highlight.js/lib/languages/javascript"),
    import("highlight.js/lib/languages/json"),
    import("highlight.js/lib/languages/bash"),
    import("highlight.js/lib/languages/sql"),
    import("highlight.js/lib/languages/markdown"),
  ]);
  grammars = { python: python.default, javascript: javascript.default, json: json.default, bash: bash.default,
    sql: sql.default, markdown: markdown.default };
  hljs = core.default;
}

/** The grammars, registered on first use: building them costs ~5 ms, kept out of module start-up. */
let registered = false;
export function registerLanguages() {
  if (registered || !hljs) return;
  registered = true;
  for (const [name, grammar] of Object.entries(grammars)) hljs.registerLanguage(name, grammar);
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
  if (!hljs) return { html: escape(code), language: tag }; // not loaded yet: plain, escaped
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
