"""nb-agent: AI agents inside Jupyter, speaking the wire protocols of real agent servers."""

from typing import Any

from nb_agent.errors import AgentError, NbAgentError, UsageError
from nb_agent.events import Event, parse_event
from nb_agent.version import __version__

__all__ = ["AgentError", "Event", "NbAgentError", "UsageError", "__version__", "chat", "complete", "parse_event"]


def chat(prompt: str | None = None, **options: Any) -> Any:
    """The chat widget for a new conversation, without magics (marimo, scripts): see ``nb_agent.ui.chat.chat``."""
    from nb_agent.ui.chat import chat as make

    return make(prompt, **options)


def complete(prefix: str, suffix: str = "", **options: Any) -> str:
    """The inline completion at the cursor between ``prefix`` and ``suffix`` (what the notebook's
    ghost text would show), with this kernel's variables when called in one: see
    ``nb_agent.ui.completion.complete``."""
    from nb_agent.ui.completion import complete as run

    return run(prefix, suffix, **options)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """The Jupyter server extension: the inline completions' endpoint (enabled by the config file the
    wheel installs in ``etc/jupyter/jupyter_server_config.d/``)."""
    return [{"module": "nb_agent.completion.server"}]


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext nb_agent``: registers %agent, %%agent, %agent_config, %agent_mcp, %agent_verify,
    %agent_usage, %agent_models, %agent_undo and %agent_complete (a magic registered here gets its
    ``--help`` from ``nb_agent.ui.magic_help``)."""
    import asyncio

    from nb_agent.kernel import failures, summary_push
    from nb_agent.kernel.main_thread import set_kernel_loop
    from nb_agent.kernel.workspace import connect
    from nb_agent.ui import magic_help
    from nb_agent.ui.completion import CompletionMagics
    from nb_agent.ui.magics import AgentMagics
    from nb_agent.ui.mcp_magics import McpMagics
    from nb_agent.ui.models_magic import ModelsMagics
    from nb_agent.ui.questions import install
    from nb_agent.ui.undo_magic import UndoMagics
    from nb_agent.ui.usage_magic import UsageMagics
    from nb_agent.ui.verify_magic import VerifyMagics

    ipython.register_magics(AgentMagics)  # type: ignore[attr-defined]
    ipython.register_magics(McpMagics)  # type: ignore[attr-defined]
    ipython.register_magics(VerifyMagics)  # type: ignore[attr-defined]
    ipython.register_magics(UsageMagics)  # type: ignore[attr-defined]
    ipython.register_magics(ModelsMagics)  # type: ignore[attr-defined]
    ipython.register_magics(UndoMagics)  # type: ignore[attr-defined]
    ipython.register_magics(CompletionMagics)  # type: ignore[attr-defined]
    magic_help.install(ipython)  # after the magics: each answers --help, -h, ? and ?? with its usage
    install(ipython)  # prompts may end with "?"
    failures.install(ipython)  # the cells that fail, for %agent --fix
    connect(ipython)  # the notebook workspace: a comm to the front-end extension, when there is one
    summary_push.install(ipython)  # after each cell, the page learns what the kernel holds (completions)
    try:  # the kernel's loop runs on the main thread when idle: MCP calls are run there
        set_kernel_loop(asyncio.get_running_loop())
    except RuntimeError:  # terminal IPython: no loop between cells
        set_kernel_loop(None)
