"""``%agent_usage``: the notebook's usage ledger, by agent, model and session (``nb_agent.ui.usage``)."""

from __future__ import annotations

from typing import Any

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from nb_agent.ui import usage


@magics_class
class UsageMagics(Magics):
    @magic_arguments()
    @argument("--json", action="store_true", help="return the ledger as saved in the notebook (rows and totals)")
    @line_magic
    def agent_usage(self, line: str) -> Any:
        """Tokens, time and cost of every agent turn in this notebook, saved ones included."""
        args = parse_argstring(self.agent_usage, line)
        usage.adopt_saved()
        if args.json:
            return usage.LEDGER.saved()
        plain, html = usage.table()
        display({"text/plain": plain, "text/html": html}, raw=True)
        return None
