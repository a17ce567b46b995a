"""Modes and config options of an ACP session, set from code (``ACPClient.set_mode``) or ``--mode``.

A mode asked for before the agent runs is kept and set at the start of the next turn, once the
agent has said which modes it has (``session/new``); an id it does not offer is a clear error
listing the ones it does. Both calls answer nothing to show: the new state is shown from
``SessionState`` (the agent may also send ``current_mode_update`` / ``config_option_update``).
"""

from __future__ import annotations

from typing import Protocol

from acp.client.connection import ClientSideConnection

from nb_agent.errors import UsageError
from nb_agent.protocols.acp.session import SessionState


class ModesHost(Protocol):
    """What these calls need of ``acp_process.AgentProcess`` (a protocol, so neither imports the other)."""

    mode: str | None
    info: SessionState

    @property
    def session_id(self) -> str | None: ...

    async def start(self) -> ClientSideConnection: ...


def _check_mode(process: ModesHost, mode_id: str) -> None:
    ids = process.info.mode_ids()
    if not ids:
        raise UsageError(f"the ACP agent offers no modes, so mode {mode_id!r} cannot be set")
    if mode_id not in ids:
        raise UsageError(f"the ACP agent has no mode {mode_id!r}; its modes: {', '.join(ids)}")


async def apply_mode(process: ModesHost, conn: ClientSideConnection) -> None:
    """Set the mode asked for, if the agent is in another one."""
    wanted = process.mode
    current = process.info.modes.current if process.info.modes is not None else None
    if wanted is None or wanted == current:
        return
    _check_mode(process, wanted)
    await conn.set_session_mode(session_id=str(process.session_id), mode_id=wanted)
    process.info.set_mode(wanted)


async def set_mode(process: ModesHost, mode_id: str) -> None:
    """``session/set_mode`` now when the agent runs, else at the next turn's start."""
    process.mode = mode_id
    conn = await process.start()
    await apply_mode(process, conn)


async def set_config_option(process: ModesHost, config_id: str, value: str | bool) -> None:
    """``session/set_config_option``: the agent answers with every option's new state."""
    conn = await process.start()
    options = process.info.options.options if process.info.options is not None else []
    option = next((o for o in options if o.id == config_id), None)
    if option is None:
        ids = ", ".join(o.id for o in options) or "none"
        raise UsageError(f"the ACP agent has no config option {config_id!r}; its options: {ids}")
    if option.choices and value not in [c.value for c in option.choices]:
        values = ", ".join(c.value for c in option.choices)
        raise UsageError(f"{config_id!r} takes one of {values}, not {value!r}")
    answer = await conn.set_config_option(config_id=config_id, session_id=str(process.session_id), value=value)
    if answer is not None:
        process.info.set_options(answer.config_options)


__all__ = ["apply_mode", "set_config_option", "set_mode"]
