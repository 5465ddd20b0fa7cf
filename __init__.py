"""crowdrank: COUPLE, CrowdBT, Plackett-Luce and Bradley-Terry by NUTS (PyMC, NumPyro) beside
fast approximations, with a validation layer that audits each approximation against NUTS.

The repository root is this package (``pyproject.toml`` maps ``crowdrank`` to it), so the
folders ``models/``, ``inference/``, ``validation/`` and ``reports/`` are its subpackages
``crowdrank.models`` ... ``crowdrank.reports``; an install puts nothing else at top level.
Layers import downwards only: models <- inference <- validation <- reports.
"""

__version__ = "0.1.0"


class _NoFolderPackages:
    """Refuse ``crowdrank.tests``, ``crowdrank.bench``, ``crowdrank.docs``, ...: the
    checkout's folders without an ``__init__.py``, which the editable install (it maps
    ``crowdrank`` to the repository root) would otherwise import as namespace packages
    that no wheel has. Every real subpackage has an ``__init__.py`` and is listed in
    pyproject.toml (tests/test_packaging.py), so the editable install and the installed
    distribution expose the same modules."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname.startswith(__name__ + ".") and path is not None:
            from importlib.machinery import PathFinder

            spec = PathFinder.find_spec(fullname, path)
            if spec is not None and spec.origin is None and spec.submodule_search_locations:
                raise ModuleNotFoundError(
                    f"No module named {fullname!r}: {fullname.rsplit('.', 1)[1]}/ is a "
                    "folder of the checkout, not a part of the crowdrank package",
                    name=fullname)


def _install_finder() -> None:
    import sys

    if not any(getattr(f, "__qualname__", "") == _NoFolderPackages.__qualname__
               and getattr(f, "__module__", "") == __name__ for f in sys.meta_path):
        sys.meta_path.insert(0, _NoFolderPackages)


_install_finder()
