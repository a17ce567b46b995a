"""The built-in agent served as an ACP agent (``nb-agent acp``): the agent side of the protocol whose
client side is ``nb_agent.protocols.acp``.

``agent`` answers the protocol's calls, ``encode`` turns the agent's events into session updates,
``trust`` is what a client may ask for, ``transport`` the framing, ``stdio`` and ``ws`` the two ways
it is served (https://agentclientprotocol.com/protocol/overview).
"""
