"""The notebook face of nb-agent: the chat widget, the magics and the run controller."""
