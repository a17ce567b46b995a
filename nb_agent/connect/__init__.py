"""Connecting to an agent: the configuration, the clients built from it, the approval policy.

One home for what the magics, ``nb_agent.chat()``, the CLI and ``nb-agent serve`` share: a layer
above the protocols, the built-in agent and the kernel, below the run controller (``conversation/``), the
notebook face (``ui/``) and the CLI.
"""
