"""Sphinx configuration: MyST pages, the tutorials executed by myst-nb, the API from docstrings.

Built by ``python -m sphinx -W --keep-going -n -b html docs docs/_build/html`` (``.ci/run``; the
``docs`` extra installs the tools). Why these tools, and how the tutorials run: docs/contributing.md.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

from nb_agent.version import __version__  # noqa: E402

project = "nb-agent"
author = "the nb-agent authors"
copyright = "the nb-agent authors"  # noqa: A001 (Sphinx's name)
version = release = __version__

extensions = [
    "myst_nb",  # MyST Markdown pages and notebooks (it brings myst_parser)
    "autodoc2",  # the API reference, from the source's docstrings without importing it
    "sphinx.ext.intersphinx",
    "nb_agent_reference",  # the configuration reference, generated from the code (docs/_ext)
    "nb_agent_tutorials",  # notebooks/ as docs/tutorials/, executed; the API pages lenient on references
]

# --- pages
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**/.ipynb_checkpoints"]
myst_enable_extensions = ["colon_fence", "deflist", "fieldlist", "attrs_inline"]
myst_heading_anchors = 3  # [text](page.md#a-heading) links are checked like any other reference
suppress_warnings = ["ref.python"]  # an attribute name many API classes share (`type`): ambiguous, not broken
nitpicky = True  # every reference must resolve; external names we cannot resolve are listed below

# --- the tutorials (docs/tutorials is notebooks/): executed at every build, offline, from their recordings.
# A tutorial that no longer runs, or whose agent cells no longer replay exactly, fails the build:
# NB_AGENT_REPLAY=strict sends nothing to a model or an agent, and a cell without a recording, or
# whose run diverges from it, is an error. Kernels inherit this process's environment.
nb_execution_mode = os.environ.get("NB_AGENT_DOCS_EXECUTE", "force")  # "off": a quick look at the pages only
nb_execution_timeout = 900  # seconds per cell: 04 runs the embedded model in-process once
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
nb_ipywidgets_js: dict[str, dict[str, str]] = {}  # no widget script from a CDN: a widget shows its text
nb_output_stderr = "remove"  # logging from the demo servers' threads is not part of the lesson
os.environ["NB_AGENT_REPLAY"] = "strict"
os.environ["NB_AGENT_LOOKUP"] = "off"  # the embedded model, not a model server someone runs here
os.environ["HF_HUB_OFFLINE"] = "1"  # 04's pull says there is no network, without trying one
os.environ.setdefault("NB_AGENT_DATA_DIR", tempfile.mkdtemp(prefix="nb-agent-docs-"))  # the tutorials' sessions

# --- the API reference
autodoc2_packages = [{"path": "../nb_agent", "auto_mode": True}]
autodoc2_render_plugin = "myst"
autodoc2_docstring_parser_regexes = [(r".*", "nb_agent_docstrings")]  # reST, Google-style Args: read as napoleon reads them (docs/_ext)
autodoc2_hidden_objects = ["private", "inherited", "dunder"]
autodoc2_output_dir = "api"

# --- links into the ecosystem's docs: resolved from their inventories, which the build cannot
# download here, so none is configured (the names are listed in nitpick_ignore_regex instead)
intersphinx_mapping: dict[str, tuple[str, str | None]] = {}
intersphinx_disabled_reftypes = ["*"]
nitpick_ignore_regex = [
    (r"py:.*", r"(httpx|pydantic|asyncio|argparse|collections|typing|typing_extensions|pathlib|enum|"
     r"datetime|contextlib|concurrent|threading|subprocess|dataclasses|types|os|re|io|json|sqlite3|"
     r"logging|ipywidgets|anywidget|IPython|acp|mcp|starlette|uvicorn|jupyter_client|nbformat|"
     r"llama_cpp|huggingface_hub|abc|builtins|weakref|functools|signal|socket|ssl|queue|tempfile)(\..*)?"),
]

# --- the page
html_theme = "pydata_sphinx_theme"
html_title = "nb-agent"
html_static_path: list[str] = []
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": [],
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False
# the search index and the pages only: no font or script from a CDN (the pages work offline)
linkcheck_ignore = [r"https?://.*"]  # external links are not reachable from the build machines
