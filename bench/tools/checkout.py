"""Run against the checkout this file sits in: ``import crowdrank`` here and in every
process started from here loads this checkout, whichever one the environment has
installed.

Why: the repository root *is* the package ``crowdrank`` (``package-dir = {"crowdrank" =
"."}``), so no folder of the checkout is named ``crowdrank`` and putting the root on
``sys.path`` does not make it importable; ``import crowdrank`` then finds the installed
package, which for a clone or a ``git worktree`` sharing a virtual environment is the
*other* checkout the editable install points at. :func:`use` makes a folder that holds
only a link ``crowdrank -> <this checkout>`` (one per checkout, under the temporary
directory, reused), puts it first on ``sys.path`` and on ``PYTHONPATH`` (which the
processes started from here inherit: the README's commands, Dask workers, scripts); a
path entry is searched before setuptools' editable finder, so the link wins.

``tests/conftest.py`` calls it before anything imports ``crowdrank``; so do the tools of
this folder that import the package or start processes that do (``verify.py``,
``speed.py``, ``render_results.py``). Standard library only: it runs before ``crowdrank``
may be imported. ``python bench/tools/checkout.py`` prints the ``crowdrank`` it loads.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def shim(root: Path = ROOT) -> Path:
    """The folder holding ``crowdrank -> root`` (made on first use)."""
    key = hashlib.sha1(str(root).encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"crowdrank-checkout-{key}"
    link = folder / "crowdrank"
    if not (link.is_symlink() and link.resolve() == root):
        folder.mkdir(exist_ok=True)
        tmp = folder / f".crowdrank-{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(root, target_is_directory=True)
        os.replace(tmp, link)               # atomic: concurrent callers agree
    return folder


def env(base: dict | None = None, root: Path = ROOT) -> dict:
    """``base`` (default ``os.environ``) with the shim first on ``PYTHONPATH``."""
    out = dict(os.environ if base is None else base)
    first = str(shim(root))
    rest = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p != first]
    out["PYTHONPATH"] = os.pathsep.join([first, *rest])
    return out


def use(root: Path = ROOT) -> Path:
    """Make ``import crowdrank`` load ``root`` in this process and in its children.

    Returns the shim folder. A ``crowdrank`` already imported from elsewhere is an error
    (its modules would stay in ``sys.modules``)."""
    folder = shim(root)
    loaded = sys.modules.get("crowdrank")
    if loaded is not None and Path(loaded.__file__).resolve().parent != root:
        raise RuntimeError(f"crowdrank was imported from {loaded.__file__} before "
                           f"checkout.use() could point it at {root}")
    if sys.path[:1] != [str(folder)]:
        sys.path.insert(0, str(folder))
    os.environ["PYTHONPATH"] = env(root=root)["PYTHONPATH"]
    return folder


if __name__ == "__main__":
    use()
    import crowdrank

    print(crowdrank.__file__)
