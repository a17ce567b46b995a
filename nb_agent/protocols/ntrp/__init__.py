"""ntrp: the client (``client``) and its frames decoded (``decode``); the wire as nb-agent reads it is
in ``docs/wire-notes.md`` ("ntrp")."""

from nb_agent.protocols.ntrp.client import NtrpClient

__all__ = ["NtrpClient"]
