"""Human-readable tool names, following Cosmo's display rules, for every renderer.

``cosmo_tasks_create`` -> "Tasks: Create", ``mcp__notion__search`` -> "Notion: Search",
``web_search`` -> "Web Search", and Goose's ``developer__shell`` -> "Developer: Shell".
"""

from __future__ import annotations

from functools import lru_cache


def _words(part: str) -> str:
    return " ".join(w[:1].upper() + w[1:] for w in part.replace("-", "_").split("_") if w)


@lru_cache(maxsize=1024)
def format_tool_name(name: str) -> str:
    """Turn a wire tool name into a short label; unknown shapes are title-cased."""
    if name.startswith("mcp__"):
        parts = [p for p in name[len("mcp__") :].split("__") if p]
        if len(parts) >= 2:
            return f"{_words(parts[0])}: {_words('_'.join(parts[1:]))}"
        return _words(parts[0]) if parts else name
    if "__" in name:  # Goose extension tools: extension__tool
        ext, _, tool = name.partition("__")
        if ext and tool:
            return f"{_words(ext)}: {_words(tool)}"
    if name.startswith("cosmo_"):
        rest = name[len("cosmo_") :]
        group, _, action = rest.partition("_")
        if group and action:
            return f"{_words(group)}: {_words(action)}"
        return _words(rest) or name
    return _words(name) or name
