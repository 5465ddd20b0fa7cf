"""The catalogue of shared data sets: the rankings sets (:mod:`.datasets`) and the
pair-table sets (:mod:`.pair_datasets`) listed together, for ``crowdrank data list``."""

from __future__ import annotations

from pathlib import Path

from .datasets import REGISTRY
from .pair_datasets import PAIR_DATASETS

__all__ = ["list_datasets"]


def list_datasets(root: str | Path | None = None, *, pairs: bool = False) -> list[dict]:
    """The registry as plain dicts: name, kind, description, as loaded, truth, origin,
    folder, options, and whether the files are present (``missing`` lists those that are
    not). ``pairs=True`` also lists the pair-table sets
    (:data:`.pair_datasets.PAIR_DATASETS`, kind ``"pairs"``) after the rankings sets.

    Parameters
    ----------
    root : str or Path, optional
        The shared data sets' folder (default :func:`datasets_root`).
    pairs : bool
        Also list the pair-table sets.
    """
    sets = [("rankings", d) for d in REGISTRY.values()]
    if pairs:
        sets += [("pairs", d) for d in PAIR_DATASETS.values()]
    out = []
    for kind, d in sets:
        missing = d.missing(root)
        out.append({"name": d.name, "kind": kind, "description": d.description,
                    "as_loaded": d.as_loaded, "truth": d.truth, "origin": d.origin,
                    "folder": str(d.path(root)), "options": list(d.options),
                    "present": not missing, "missing": [str(p) for p in missing]})
    return out
