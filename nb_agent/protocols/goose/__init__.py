"""Goose's server, goosed (https://github.com/block/goose): the client (``client``) and its frames
decoded (``decode``)."""

from nb_agent.protocols.goose.client import GooseClient

__all__ = ["GooseClient"]
