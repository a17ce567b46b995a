"""The kernel as a tool: run code, insert cells, inspect variables, read the notebook's history."""
