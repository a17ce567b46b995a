"""The tutorials' stored sessions go to a temporary folder, and no local model server is looked for
(kernels inherit this environment)."""

import os
import tempfile

os.environ["NB_AGENT_DATA_DIR"] = tempfile.mkdtemp(prefix="nb-agent-tutorials-")
# the embedded model, not a model server someone runs on this machine (nb_agent/agent/providers/lookup.py)
os.environ["NB_AGENT_LOOKUP"] = "off"
