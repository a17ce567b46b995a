"""The built-in agent: Goose's architecture (providers, tools, permissions, retries, compaction,
subagents, recipes, sessions), emitting nb-agent's unified events like any agent server."""
