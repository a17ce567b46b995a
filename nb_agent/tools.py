"""The tool contract's former path, kept for code written against the README's ``from nb_agent.tools
import tool``: a re-export of :mod:`nb_agent.tool_contract`, where it lives now."""

from nb_agent.tool_contract import (
    CURRENT_CALL,
    Preview,
    Risk,
    Tool,
    ToolArgumentsError,
    ToolOutput,
    function_tool,
    tool,
)

__all__ = ["CURRENT_CALL", "Preview", "Risk", "Tool", "ToolArgumentsError", "ToolOutput", "function_tool", "tool"]
