"""``mat``: a MATLAB file whose variable ``var`` (default ``data``) is a numeric matrix with
the worker in the first column and the items best first in the others; 0 pads shorter
rankings (``BabyFace.mat``). See ``docs/data.md``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data import DataError
from ._base import Builder

NAME = "mat"
EXTENSIONS = (".mat",)


def parse(path: Path, b: Builder, var: str = "data"):
    """Feed the matrix rows of ``path`` to ``b`` ("line" = 1-based matrix row)."""
    from scipy.io import loadmat

    try:
        m = loadmat(str(path))
    except Exception as exc:  # noqa: BLE001 - any unreadable .mat is bad input
        raise DataError(f"not a readable MATLAB file ({exc})", b.source) from None
    if var not in m:
        raise DataError(f"no variable {var!r} in the file (has "
                        f"{[k for k in m if not k.startswith('__')]})", b.source)
    a = np.asarray(m[var])
    if a.ndim != 2 or a.shape[1] < 3:
        raise DataError(f"variable {var!r} must be a matrix worker,item1,item2,...; got "
                        f"shape {a.shape}", b.source)
    if not np.all(np.isfinite(a.astype(float))):
        raise DataError(f"variable {var!r} has non-finite entries", b.source)
    a = a.astype(np.int64)
    for n, row in enumerate(a, start=1):
        cells = [str(x) for x in row[1:] if x != 0]  # 0 pads shorter rankings
        b.add(n, str(row[0]), [[c] for c in cells])
        yield 1
