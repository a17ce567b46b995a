"""The package version, written once: pyproject.toml reads it (``[tool.hatch.version]``), and
modules that report it (MCP server and client info) import it from here rather than from the
package root, which would load the whole public API."""

__version__ = "0.1.0"
