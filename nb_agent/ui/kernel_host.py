"""What the notebook's kernel lends every run it starts (the run controller's ``Host``).

The run controller (``nb_agent.conversation``) knows no kernel: the front ends in a notebook (the
magics, the widget, ``nb_agent.chat()``) give their conversations this host. For each run it binds
the page that started it, so the run's workspace tools act on that page and no other
(``kernel.addressing``: captured from the request being handled when the run starts), and it names
the run under way, so the cells the run inserts or edits carry its provenance and a fix run's edit
of its cell runs the cell (``kernel.provenance``). A replay of an agent's recorded calls into the
kernel gets the kernel's tools from it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from nb_agent.conversation.controller import Host
from nb_agent.kernel import addressing
from nb_agent.kernel.provenance import RunInfo, running
from nb_agent.tool_contract import Tool


@contextlib.contextmanager
def _scope(info: RunInfo) -> Iterator[RunInfo]:
    with addressing.bound(addressing.capture()), running(info) as run:
        yield run


def _kernel_tools() -> list[Tool]:
    from IPython import get_ipython

    from nb_agent.kernel.toolset import kernel_tools

    shell = get_ipython()
    return kernel_tools(shell) if shell is not None else []


KERNEL = Host(scope=_scope, tools=_kernel_tools)

__all__ = ["KERNEL"]
