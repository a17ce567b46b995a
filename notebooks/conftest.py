"""The tutorials' stored sessions go to a temporary folder (kernels inherit this environment)."""

import os
import tempfile

os.environ["NB_AGENT_DATA_DIR"] = tempfile.mkdtemp(prefix="nb-agent-tutorials-")
