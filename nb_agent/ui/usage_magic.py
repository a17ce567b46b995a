"""``%agent_usage``: the notebook's usage ledger, by agent, model and session (``nb_agent.conversation.usage``).

Where the kernel can wait (``nb_agent.ui.awaiting``), a top-level ``%agent_usage`` runs as
:meth:`UsageMagics.usage_in_cell`: it waits briefly for a page that is connecting (right after
``%load_ext nb_agent`` the page's link, which brings the saved ledger, is on its way), as the
workspace tools do.
"""

from __future__ import annotations

from typing import Any

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from nb_agent.conversation import usage


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

    async def usage_in_cell(self, line: str) -> Any:
        """``%agent_usage`` in a cell that may wait: the page's link first, when one is on its way."""
        from nb_agent.kernel.workspace import workspace

        await workspace().ready()
        return self.agent_usage(line)
