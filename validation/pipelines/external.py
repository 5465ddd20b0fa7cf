"""An approximation computed elsewhere, read for the audit: ``--approx file:PATH``.

Two kinds of file:

* **a CSV of per-item marginals** — columns ``parameter,mean,sd`` or ``item,mu,sigma``
  (also ``id``/``name`` for the id column): what openskill, TrueSkill or a production
  rating service keeps per item. The audit assumes independent **Gaussian marginals**
  ``λ_i ~ N(mean_i, sd_i²)`` (:data:`CSV_FAMILY`; ``metrics.json`` and the log say so).
  An id may be written bare (``it3``) or as ``lambda[it3]``. Only item-only models (BT,
  PL) take a CSV: a model with worker parameters needs their family, which a table of
  means and sds does not give.
* **a NetCDF of draws** (``.nc``) in the layout of ``posterior.nc``
  (docs/contracts.md): read with its draws
  (:meth:`crowdrank.inference.posterior.Posterior.from_tree`).

Ids are matched to the data's by name: an id the data do not have is an error naming the
file and its line; a data item the file lacks is an error naming the file and the ids.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from crowdrank.models.data import DataError

PREFIX = "file:"
CSV_FAMILY = "Gaussian marginals (independent normal λ_i from the file's mean and sd)"
_ID = ("parameter", "item", "id", "name")
_MEAN = ("mean", "mu")
_SD = ("sd", "sigma")


def is_external(method: str) -> bool:
    return str(method).startswith(PREFIX)


def _column(header: list[str], names: tuple[str, ...], path: Path) -> int:
    low = [h.strip().lower() for h in header]
    for n in names:
        if n in low:
            return low.index(n)
    raise DataError(f"no column {' or '.join(names)} in the header {header} (expected "
                    "parameter,mean,sd or item,mu,sigma)", str(path), 1)


def _bare(pid: str) -> str:
    """``lambda[it3]`` → ``it3``; a bare id unchanged."""
    pid = pid.strip()
    if pid.startswith("lambda[") and pid.endswith("]"):
        return pid[len("lambda["):-1]
    return pid


def read_marginals_csv(path, items) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, sd)`` in the order of ``items`` from a CSV (module docstring)."""
    path = Path(path)
    known = {str(i) for i in items}
    got: dict[str, tuple[float, float]] = {}
    with open(path, newline="") as fh:
        rows = csv.reader(fh)
        try:
            header = next(rows)
        except StopIteration:
            raise DataError("empty file", str(path)) from None
        ci, cm, cs = (_column(header, n, path) for n in (_ID, _MEAN, _SD))
        for line, row in enumerate(rows, start=2):
            if not row or not any(c.strip() for c in row):
                continue
            pid = _bare(row[ci])
            if pid not in known:
                raise DataError(f"unknown id {pid!r}: not an item of the data", str(path),
                                line)
            if pid in got:
                raise DataError(f"id {pid!r} given twice", str(path), line)
            try:
                m, s = float(row[cm]), float(row[cs])
            except (ValueError, IndexError):
                raise DataError(f"{pid}: mean and sd must be numbers", str(path),
                                line) from None
            if not (math.isfinite(m) and math.isfinite(s) and s > 0):
                raise DataError(f"{pid}: mean must be finite and sd > 0", str(path), line)
            got[pid] = (m, s)
    missing = [str(i) for i in items if str(i) not in got]
    if missing:
        raise DataError(f"{len(missing)} item(s) of the data are not in the file, e.g. "
                        f"{missing[:5]}", str(path))
    ms = np.array([got[str(i)] for i in items], float)
    return ms[:, 0], ms[:, 1]


def read_external(method: str, data, model):
    """The :class:`~crowdrank.inference.posterior.Posterior` of ``file:PATH`` for
    ``model`` (a name or its spec) on ``data`` (module docstring)."""
    from crowdrank.inference.posterior import Posterior
    from crowdrank.models.registry import as_spec

    spec = as_spec(model)
    model = spec.name
    path = Path(method[len(PREFIX):] if is_external(method) else method)
    if not path.exists():
        raise DataError("no such file (--approx file:PATH)", str(path))
    if path.suffix == ".nc":
        return _read_tree(path, data, model)
    if spec.has_eta:
        raise DataError(f"a CSV of item marginals cannot audit {model} (its worker "
                        "parameters have no family in the file): give a NetCDF of draws, "
                        "or audit --model bt or pl", str(path))
    mean, sd = read_marginals_csv(path, data.items)
    return Posterior.from_marginals(
        model, method, items=[str(i) for i in data.items], mu=mean, sigma2=sd ** 2,
        diagnostics={"assumed_family": CSV_FAMILY, "source": str(path)},
        algorithm="external CSV")


def _read_tree(path: Path, data, model: str):
    import xarray as xr

    from crowdrank.inference.posterior import Posterior

    tree = xr.open_datatree(path, engine="h5netcdf").load()
    if "posterior" not in tree or "lambda" not in tree["posterior"]:
        raise DataError("no posterior group with 'lambda' (the layout of posterior.nc)",
                        str(path))
    ids = [str(v) for v in tree["posterior"]["item"].values]
    unknown = sorted(set(ids) - {str(i) for i in data.items})
    missing = [str(i) for i in data.items if str(i) not in set(ids)]
    if unknown or missing:
        raise DataError(f"the file's items do not match the data's: unknown "
                        f"{unknown[:5]}, missing {missing[:5]}", str(path))
    post = Posterior.from_tree(tree, model=model, method=f"{PREFIX}{path}")
    post.diagnostics.update({"assumed_family": "draws (as in the file)",
                             "source": str(path)})
    return post
