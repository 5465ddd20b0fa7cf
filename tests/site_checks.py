"""The tutorials' pages of the documentation site, rendered from notebooks the suite has
already executed (tests/test_tutorials.py) and checked as a reader meets them.

Executing the four notebooks takes minutes (NUTS in two PPLs); the suite does it once, in
tests/test_tutorials.py, and this renders those executed notebooks with the site's own
configuration (docs/conf.py with ``CROWDRANK_DOCS_ONLY=tutorials``: the same MyST-NB
settings, notebook execution off) and checks the pages with docs/_ext/check_site.py: each
page holds a figure, and every image decodes in headless Chromium.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))
import check_site

sys.path.remove(str(DOCS / "_ext"))


def render_tutorials(notebooks: dict[str, nbformat.NotebookNode], tmp: Path) -> Path:
    """Build the tutorial pages of ``notebooks`` (file name -> executed notebook) into
    ``tmp/html``; a Sphinx warning fails (``-W``). Returns the built site."""
    src = tmp / "src"
    (src / "tutorials").mkdir(parents=True)
    shutil.copy(DOCS / "conf.py", src / "conf.py")
    shutil.copytree(DOCS / "_static", src / "_static")
    shutil.copy(DOCS / "tutorials" / "README.md", src / "tutorials" / "README.md")
    for name, nb in notebooks.items():
        nbformat.write(nb, src / "tutorials" / name)
    env = dict(os.environ, CROWDRANK_DOCS_ONLY="tutorials")
    out = tmp / "html"
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W",
                           "--keep-going", "-d", str(tmp / "doctrees"), str(src), str(out)],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    if proc.returncode != 0 or "WARNING" in proc.stderr:
        raise AssertionError(f"sphinx failed or warned on the tutorials:\n{proc.stderr[-4000:]}")
    return out


def tutorial_page_errors(site: Path, names: list[str]) -> list[str]:
    """The figure check of ``make docs`` (check_site.tutorial_figure_errors) on the pages
    of ``names`` (notebook stems) only."""
    return [e for e in check_site.tutorial_figure_errors(site)
            if any(e.startswith(f"tutorials/{n}.html") for n in names)]
