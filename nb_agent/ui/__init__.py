"""The notebook face of nb-agent: the chat widget, the magics, the IPython hooks (runs: ``nb_agent.conversation``)."""
