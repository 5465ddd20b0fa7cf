"""Sphinx configuration of crowdrank's documentation site (``make docs`` → docs/_build/html).

Why Sphinx + MyST-NB + the PyData theme: it is the stack PyMC and ArviZ publish with, so a
student who reads their documentation finds the same layout here; MyST reads the Markdown
pages of ``docs/`` as they are (the same files GitHub renders), MyST-NB executes the tutorial
notebooks at build time (they are stored without outputs, ``docs/tutorials/README.md``) and
caches each one with jupyter-cache, so an unchanged notebook is not re-run; autodoc with
napoleon reads the numpydoc docstrings the code is written in. The site's own pieces
(options from the CLI's parser, results split by study, citation keys linked to
``references.md``) are in ``docs/_ext/crowdrank_docs.py``.

Environment:

- ``CROWDRANK_DOCS_EXECUTE=off`` builds without executing the notebooks (the site test);
  ``force`` re-runs them all; anything else (the default) uses the cache.
- ``CROWDRANK_DOCS_EXAMPLES``: which rendered reports the gallery gets
  (``docs/_ext/report_examples.py``): ``all`` (default), ``off`` or a list of names.
- ``CROWDRANK_DOCS_ONLY=tutorials``: the tutorial pages alone, from notebooks that already
  hold their outputs (``tests/site_checks.py`` renders the notebooks the suite executed with
  this configuration, so the figures a reader sees are checked without a second run).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = "crowdrank"
author = "the crowdrank authors"
copyright = "crowdrank authors"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx_design",
    "sphinxarg.ext",
    "crowdrank_docs",
]

# guide.md is split into the command pages cli/*.md (docs/_ext/crowdrank_docs.py)
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "guide.md", "story.json",
                    # what the executed tutorials write beside them (examples/, below)
                    "tutorials/story-out", "tutorials/prior-out", "tutorials/audit-tutorial"]

source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"

# --- MyST ----------------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist", "attrs_inline"]
# links like guide.md#running-grids-on-a-dask-cluster, written for GitHub's anchors
myst_heading_anchors = 4

# --- notebooks -----------------------------------------------------------------------
_execute = os.environ.get("CROWDRANK_DOCS_EXECUTE", "cache").lower()
nb_execution_mode = {"off": "off", "force": "force"}.get(_execute, "cache")
nb_execution_cache_path = str(HERE / "_build" / ".jupyter_cache")
nb_execution_timeout = 900
# the notebooks run in docs/tutorials/ (git-ignored outputs there): the reports they write
# (story.html, the audit's report.html) are published as the gallery's examples/
nb_execution_in_temp = False
nb_execution_raise_on_error = True   # a failing notebook fails the build
nb_merge_streams = True
# warnings and progress bars of the libraries (tqdm, PyMC's sampler, multiprocessing) go to
# stderr: a student reads the results, the tests (tests/test_tutorials.py) see everything
nb_output_stderr = "remove"
# The kernels inherit this environment: with MPLBACKEND=Agg (as the tests set it) a plot is
# drawn but never displayed, so the page would have no figure; without it ipykernel's
# inline backend puts each figure in the cell's output.
os.environ.pop("MPLBACKEND", None)

if os.environ.get("CROWDRANK_DOCS_ONLY") == "tutorials":
    # the notebooks' own settings above, without the pages they link to (the links are
    # checked by the whole site's build) nor the extensions that generate those pages
    extensions = ["myst_nb", "sphinx.ext.mathjax", "sphinx_design"]
    root_doc = "tutorials/README"
    nb_execution_mode = "off"
    suppress_warnings = ["myst.xref_missing", "toc.not_included"]

# --- autodoc -------------------------------------------------------------------------
autodoc_default_options = {"members": True, "member-order": "bysource",
                           "undoc-members": False}
autodoc_typehints = "description"
autodoc_preserve_defaults = True
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False
# a dataclass's fields are described once, by its numpydoc "Attributes" section
# (docs/_ext/crowdrank_docs.py skips them as members)

# --- HTML ----------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "crowdrank"
html_static_path = ["_static"]
html_css_files = ["crowdrank.css"]
html_theme_options = {
    "navigation_depth": 3,
    "header_links_before_dropdown": 7,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_show_sourcelink = False
html_last_updated_fmt = None
