"""A2A (https://a2a-protocol.org/latest/specification/): the client (``client``), its frames decoded
(``decode``) and an artifact's text as blocks (``block``)."""

from nb_agent.protocols.a2a.client import A2AClient, A2AVersion

__all__ = ["A2AClient", "A2AVersion"]
