"""The built-in agent for ``%agent`` when no server is configured, with its session on disk.

Each notebook conversation is a stored session (SQLite under the user's data directory, or
``NB_AGENT_DATA_DIR``): ``--session NAME`` resumes the stored session with that id or name, so
a conversation survives a kernel restart. A store that cannot be opened (a read-only home)
costs persistence, not the answer: the agent runs in memory and says so in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial

from nb_agent.agent.loop import Agent
from nb_agent.agent.permissions import Permissions
from nb_agent.agent.recipes import load_recipe
from nb_agent.agent.select import builtin_agent
from nb_agent.agent.sessions import SessionStore
from nb_agent.connect.config import AgentConfig
from nb_agent.errors import UsageError
from nb_agent.tool_contract import Tool

log = logging.getLogger("nb_agent.ui")


def open_store() -> SessionStore | None:
    try:
        return SessionStore()
    except (OSError, UsageError) as exc:
        log.warning("sessions will not be saved: %s", exc)
        return None
    except Exception as exc:  # sqlite3 errors: a locked or corrupt file
        log.warning("sessions will not be saved: %s", exc)
        return None


def _kernel_tools() -> tuple[list[Tool], Callable[[], Awaitable[str]] | None]:
    """The notebook as tools, and what each run is told about the kernel, when there is one."""
    from IPython import get_ipython

    from nb_agent.kernel.context import kernel_context
    from nb_agent.kernel.toolset import kernel_tools

    shell = get_ipython()
    if shell is None:
        return [], None
    tools = kernel_tools(shell)
    return tools, kernel_context(shell, tools)


def make_builtin(config: AgentConfig, session: str | None, store: SessionStore | None, *, fresh: bool = False) -> Agent:
    """An agent for ``config``; ``session`` names a stored session to resume (or to create;
    ``fresh``: always create, the name then refers to the newest)."""
    recipe = load_recipe(config.recipe, config.params) if config.recipe else None
    messages = []
    notice = None
    session_id = None
    on_message = on_replace = None
    if store is not None:
        info = None
        if session and not fresh:
            info = next((s for s in store.list() if session in (s.id, s.name)), None)
        if info is None:
            info = store.create(name=session, metadata={"source": "notebook"})
        session_id = info.id
        resumed = store.resume(info.id)  # unreadable rows are set aside, with a notice for the run
        messages, notice = resumed.messages, resumed.notice
        on_message = partial(store.append, info.id)
        on_replace = partial(store.replace, info.id)
    tools, context = _kernel_tools()
    agent = builtin_agent(
        tools=tools,
        context=context,
        model=config.model,
        provider=None if config.provider == "auto" else config.provider,
        recipe=recipe,
        permissions=Permissions(mode=config.mode),  # type: ignore[arg-type]
        lookup=config.lookup,
        messages=messages,
        session_id=session_id,
        on_message=on_message,
        on_replace=on_replace,
        taped=True,  # a notebook's runs are recorded, and replayed from a cell's recording
    )
    if notice:
        agent.notices.append(notice)
    return agent
