"""A :class:`~crowdrank.inference.posterior.Posterior` on disk: ``posterior.nc`` (its DataTree) and
``posterior.json`` (its marginals and diagnostics) written by :func:`write_posterior`, and
read back by :func:`read_posterior` — the one loader of the CLI, the audit and the warm
starts (docs/contracts.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from crowdrank.inference.gate import Gate
from crowdrank.inference.posterior import Marginals, Posterior, _plain, from_online, worker_family
from crowdrank.models.errors import DataError


def to_json_dict(post: Posterior) -> dict:
    """``posterior.json``: the online state's schema plus ``method``, ``diagnostics``.

    Parameters
    ----------
    post : Posterior
        A posterior with marginals.
    """
    m = post._marg()
    d = {"model": post.model, "method": post.method, "algorithm": post.algorithm,
         "options": _plain(post.options), "seconds": _plain(float(post.seconds)),
         "diagnostics": _plain(post.diagnostics),
         "marginals": "moment-matched" if m.moment_matched else "closed-form",
         "items": {i: {"mu": float(a), "sigma2": float(b)}
                   for i, a, b in zip(m.items, m.mu, m.sigma2)}}
    if m.alpha is not None:
        d["workers"] = {w: {"alpha": [float(x) for x in row]}
                        for w, row in zip(m.workers, m.alpha)}
    return d


def write_posterior_json(post: Posterior, path) -> Path:
    """The marginals' JSON alone at ``path``: the method's own file when its result writes
    one (the online state, a batch fit's), else :func:`to_json_dict`.

    Parameters
    ----------
    post : Posterior
        A posterior with marginals.
    path : str or Path
        The JSON file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if hasattr(post.native, "to_json"):
        post.native.to_json(path)
    else:
        path.write_text(json.dumps(to_json_dict(post), indent=1))
    return path


def write_posterior(post: Posterior, out) -> dict[str, str]:
    """Write ``post`` into the folder ``out``; returns ``{"posterior": path, ...}``.

    Parameters
    ----------
    post : Posterior
        Any posterior.
    out : str or Path
        The folder (made if missing).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    kind = type(post.native).__name__
    if kind == "NutsResult":
        from crowdrank.inference.nuts import write_nuts
        return write_nuts(post.native, out)
    if kind == "OnlinePosterior":
        post.native.to_json(out / "posterior.json")
        return {"posterior": str(out / "posterior.json")}
    paths = {}
    if post.tree is not None:
        tree = post.tree.copy()
        gate = post.gate
        if gate is not None:
            tree.attrs.update(gate.to_attrs())
        tree.to_netcdf(out / "posterior.nc", engine="h5netcdf")
        paths["draws"] = str(out / "posterior.nc")
    (out / "posterior.json").write_text(json.dumps(to_json_dict(post), indent=1))
    paths["posterior"] = str(out / "posterior.json")
    return paths


def read_posterior(path) -> Posterior:
    """Read what :func:`write_posterior` (or ``write_nuts``, or an online fit) wrote: a
    folder, its ``posterior.json`` or its ``posterior.nc``.

    Parameters
    ----------
    path : str or Path
        A folder, a ``posterior.json`` or a ``posterior.nc``.
    """
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    js = path if path.suffix == ".json" else folder / "posterior.json"
    nc = path if path.suffix == ".nc" else folder / "posterior.nc"
    if path.suffix == ".nc" or (path.is_dir() and not js.exists()):
        if not nc.exists():
            raise FileNotFoundError(f"{path}: no posterior.json or posterior.nc here")
        post = Posterior.from_tree(_open_tree(nc))
        if not post.model:
            raise DataError("the posterior names no model (attribute 'model')", str(nc))
        return post
    if not js.exists():
        raise FileNotFoundError(f"{js}: no such posterior")
    try:
        d = json.loads(js.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"not valid JSON: {exc.msg}", str(js), exc.lineno) from None
    if not isinstance(d, dict) or "items" not in d or "model" not in d:
        raise DataError("not a posterior: no 'model' or 'items'", str(js))
    if d.get("method") == "online" and "algorithm" in d and "marginals" not in d:
        from crowdrank.inference.online import OnlinePosterior
        return from_online(OnlinePosterior.from_json(js))
    return _from_json_dict(d, js, nc if nc.exists() else None)


def _open_tree(nc: Path):
    import xarray as xr

    return xr.open_datatree(nc, engine="h5netcdf").load()


def _from_json_dict(d: dict, js: Path, nc: Path | None) -> Posterior:
    try:
        items = list(d["items"])
        mu = [float(d["items"][i]["mu"]) for i in items]
        # a file of means only (a point start for NUTS) has no variances: NaN
        s2 = [float(d["items"][i].get("sigma2", math.nan)) for i in items]
        wk = d.get("workers") or {}
        workers = list(wk)
        alpha = np.array([[float(x) for x in wk[w]["alpha"]] for w in workers]) if wk else None
    except (KeyError, TypeError, ValueError):
        raise DataError("every item needs a numeric 'mu' (and 'sigma2'), every worker an "
                        "'alpha' list", str(js)) from None
    diag = dict(d.get("diagnostics") or {})
    if isinstance(diag.get("gate"), dict):
        diag["gate"] = Gate.from_dict(diag["gate"])
    marg = Marginals(items, mu, s2, workers, alpha,
                     worker_family(d["model"]) if alpha is not None else None,
                     moment_matched=d.get("marginals") == "moment-matched")
    return Posterior(str(d["model"]), str(d.get("method", "")),
                     _open_tree(nc) if nc is not None else None, marg, diag,
                     float(d.get("seconds") or math.nan), dict(d.get("options") or {}),
                     str(d.get("algorithm", "")))
