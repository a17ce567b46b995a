"""Cosmo: the client (``client``); its documented chat events are all there is (``docs/wire-notes.md``,
"Cosmo")."""

from nb_agent.protocols.cosmo.client import CosmoClient

__all__ = ["CosmoClient"]
