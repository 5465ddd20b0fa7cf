"""The one posterior state shared by every online method (docs/design.md, Online).

Items carry a Gaussian ``N(μ_r, σ_r²)``; COUPLE workers a Dirichlet ``α_w`` of length ``K``
([Pan18], Sect. 4.1); CrowdBT workers a Beta ``(a_w, b_w)`` [Chen13]; PL/BT
(Weng–Lin) have no worker parameters. The state is initialised from the same
:class:`crowdrank.models.priors.Priors` object that the NUTS models read, so that both routes start
from the same prior.

The state *is* the result: :class:`OnlinePosterior` is written as the JSON of
``docs/contracts.md`` and read back bit for bit (``json`` writes ``repr(float)``, which
round-trips exactly), so a saved ``posterior.json`` is also a checkpoint to resume from.
Saving is atomic: a temporary file in the same folder, then :func:`os.replace`.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from crowdrank.models.data import DataError, Rankings
from crowdrank.models.priors import Priors
from crowdrank.models.registry import ModelSpec, as_spec, name_of

#: Online model names (``docs/contracts.md``) and the algorithm each one runs.
ALGORITHMS = {
    "pl": "weng-lin-pl",
    "bt": "weng-lin-bt",
    "crowdbt": "crowdbt-online",
    "couple": "online-gbmm",
}

#: Keys of the ``clamped`` counters, always present (zero when nothing happened).
#: ``alpha``/``sigma2``/``mu``: a non-finite or non-positive value replaced (guard of
#: docs/design.md, Online; an error in strict mode). ``kappa``: the ``max(., κ)`` floor of Eq. (12)
#: was active; ``kappa2``: the ``max(R_t, κ2)`` floor of appendix 1.1.2 was active. The last
#: two are part of the algorithm, counted so that a reader sees how often they bind.
CLAMP_KEYS = ("alpha", "sigma2", "mu", "kappa", "kappa2")


class OnlineError(ValueError):
    """A guard failed in strict mode (non-finite or non-positive α, σ² or μ)."""


def empty_counts() -> dict[str, int]:
    return {k: 0 for k in CLAMP_KEYS}


@dataclass(eq=False)
class OnlinePosterior:
    """Gaussian item posteriors and worker Dirichlet/Beta parameters of an online pass.

    Attributes
    ----------
    model : str
        ``pl``, ``bt``, ``crowdbt`` or ``couple``.
    algorithm : str
        The update run (:data:`ALGORITHMS`).
    options : dict
        Every choice that changes the numbers (variants, guards, order, seed, passes,
        Weng–Lin parameters, prior).
    items, workers : list of str
        Real ids; index ``r`` of :attr:`mu` is ``items[r]``.
    mu, sigma2 : ndarray, shape (L,)
        ``q(λ_r) = N(mu[r], sigma2[r])``.
    alpha : ndarray or None
        ``(W, K)`` Dirichlet concentrations (COUPLE), ``(W, 2)`` Beta ``[a, b]`` (CrowdBT),
        ``None`` for PL/BT.
    n_rankings : int
        Source rankings consumed so far (over all passes and resumed runs).
    clamped : dict
        Guard counters (:data:`CLAMP_KEYS`).
    seconds : float
        Wall time of the updates (excluding reading and compilation where known).
    spec : ModelSpec or None
        The model's registry spec, kept beside the state (not written: the JSON names the
        model) so that extending and converting it look nothing up; ``None``: looked up
        from ``model`` when first needed (:meth:`model_spec`).
    """

    model: str
    algorithm: str
    options: dict
    items: list
    mu: np.ndarray
    sigma2: np.ndarray
    workers: list
    alpha: np.ndarray | None
    n_rankings: int = 0
    clamped: dict = field(default_factory=empty_counts)
    seconds: float = 0.0
    spec: ModelSpec | None = field(default=None, repr=False)

    def model_spec(self) -> ModelSpec:
        """The model's spec: the one kept with the state, else ``model`` looked up (and
        kept)."""
        if self.spec is None:
            self.spec = as_spec(self.model)
        return self.spec

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_priors(cls, model: str | ModelSpec, items, priors: Priors, workers=None,
                    K: int | None = None, options: dict | None = None) -> OnlinePosterior:
        """The prior state: ``μ = mu0``, ``σ² = sigma0²`` for every item; workers' ``α``
        from ``priors.alpha`` (COUPLE, first ``K`` entries) or ``priors.beta()`` (CrowdBT).

        Parameters
        ----------
        model : str or ModelSpec
            ``pl``, ``bt``, ``crowdbt`` or ``couple`` (looked up here), or its spec.
        items : sequence of str
            The item ids.
        priors : Priors
            ``mu0``, ``sigma0`` and the workers' prior.
        workers : sequence of str, optional
            The worker ids (none for PL and BT).
        K : int, optional
            COUPLE's worker vector length (default: the priors' table's).
        options : dict, optional
            The method's options, kept with the state.
        """
        if name_of(model) not in ALGORITHMS:
            raise ValueError(f"unknown online model {name_of(model)!r}; expected one of "
                             f"{tuple(ALGORITHMS)}")
        spec = as_spec(model)
        model = spec.name
        items = [str(i) for i in items]
        L = len(items)
        mu = np.full(L, float(priors.mu0))
        sigma2 = np.full(L, float(priors.sigma0) ** 2)
        family = spec.worker_prior
        if family is None:                  # perfect workers: no worker state
            wk, alpha = [], None
        else:
            wk = list(priors.workers if workers is None else workers)
            index = {w: i for i, w in enumerate(priors.workers)}
            missing = [w for w in wk if w not in index]
            if missing:
                raise DataError(f"no worker prior for {len(missing)} worker(s), e.g. "
                                f"{missing[:5]}", priors.spec)
            sel = [index[w] for w in wk]
            # the family reads its own table (CrowdBT: beta(), not alpha[:, :2]: gold
            # priors give CrowdBT its own pair counts), as long as the model needs
            K = family.prior_K(priors.K if K is None else K)
            if priors.K < K:
                raise DataError(f"worker priors have length {priors.K} but {model} needs "
                                f"K={K}", priors.spec)
            alpha = family.table(priors, K)[sel]
        opts = {"mu0": float(priors.mu0), "sigma0": float(priors.sigma0),
                "prior_spec": priors.spec}
        opts.update(options or {})
        return cls(model, ALGORITHMS[model], opts, items, mu, sigma2, wk, alpha, spec=spec)

    def copy(self) -> OnlinePosterior:
        """An independent copy of the state (arrays copied)."""
        return OnlinePosterior(
            self.model, self.algorithm, json.loads(json.dumps(self.options)), list(self.items),
            self.mu.copy(), self.sigma2.copy(), list(self.workers),
            None if self.alpha is None else self.alpha.copy(), int(self.n_rankings),
            dict(self.clamped), float(self.seconds), spec=self.spec)

    # ------------------------------------------------------------------ id alignment
    def extend(self, items=(), workers=(), priors: Priors | None = None) -> OnlinePosterior:
        """Add unseen items (prior ``N(mu0, sigma0²)``) and workers (their prior ``α``) in
        place, so that a resumed run can read data with new ids. Returns ``self``.

        Parameters
        ----------
        items : sequence of str
            Item ids; those already in the state are left as they are.
        workers : sequence of str
            Worker ids; those already in the state are left as they are.
        priors : Priors, optional
            The prior of the new entries (needed when there are new workers).
        """
        known = set(self.items)
        new_items = [str(i) for i in items if str(i) not in known]
        if new_items:
            mu0 = self.options.get("mu0", 0.0) if priors is None else priors.mu0
            s0 = self.options.get("sigma0", 1.0) if priors is None else priors.sigma0
            self.items.extend(dict.fromkeys(new_items))
            self.mu = np.concatenate([self.mu, np.full(len(set(new_items)), float(mu0))])
            self.sigma2 = np.concatenate([self.sigma2,
                                          np.full(len(set(new_items)), float(s0) ** 2)])
        if self.alpha is None:
            return self
        knownw = set(self.workers)
        new_w = list(dict.fromkeys(str(w) for w in workers if str(w) not in knownw))
        if new_w:
            if priors is None:
                raise DataError(f"{len(new_w)} worker(s) not in the saved state and no prior "
                                f"given for them, e.g. {new_w[:5]}", "state")
            index = {w: i for i, w in enumerate(priors.workers)}
            missing = [w for w in new_w if w not in index]
            if missing:
                raise DataError(f"no worker prior for {missing[:5]}", priors.spec)
            K = self.alpha.shape[1]
            if priors.K < K:
                raise DataError(f"worker priors have length {priors.K}, state needs {K}",
                                priors.spec)
            # the family's table, as from_priors reads it (CrowdBT: beta(), its own
            # gold pair counts)
            table = self.model_spec().worker_prior.table(priors, K)
            rows = table[[index[w] for w in new_w]]
            self.workers.extend(new_w)
            self.alpha = np.concatenate([self.alpha, rows])
        return self

    def index_maps(self, data: Rankings) -> tuple[np.ndarray, np.ndarray]:
        """Arrays mapping ``data``'s item and worker indices to this state's indices.

        Parameters
        ----------
        data : Rankings
            Data whose items and workers are all in this state.
        """
        iidx = {it: i for i, it in enumerate(self.items)}
        item_map = np.array([iidx[it] for it in data.items], dtype=np.int32)
        if self.alpha is None:
            return item_map, np.zeros(data.n_workers, dtype=np.int32)
        widx = {w: i for i, w in enumerate(self.workers)}
        worker_map = np.array([widx[w] for w in data.workers], dtype=np.int32)
        return item_map, worker_map

    # ------------------------------------------------------------------ checks
    def check(self, where: str = "state") -> None:
        """Refuse a state with non-finite μ, or non-positive/non-finite σ² or α.

        Parameters
        ----------
        where : str
            What the error message calls the state (a file, a pass).
        """
        if not np.all(np.isfinite(self.mu)):
            raise OnlineError(f"{where}: non-finite item mean")
        if not (np.all(np.isfinite(self.sigma2)) and np.all(self.sigma2 > 0)):
            raise OnlineError(f"{where}: item variance must be finite and > 0")
        if self.alpha is not None and not (np.all(np.isfinite(self.alpha))
                                           and np.all(self.alpha > 0)):
            raise OnlineError(f"{where}: worker concentrations must be finite and > 0")

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict:
        """The JSON object of ``docs/contracts.md`` (Online result); CrowdBT's ``alpha`` is
        ``[a, b]``; PL/BT have no workers."""
        workers = {}
        if self.alpha is not None:
            workers = {w: {"alpha": [float(x) for x in self.alpha[i]]}
                       for i, w in enumerate(self.workers)}
        return {
            "model": self.model,
            "method": "online",
            "algorithm": self.algorithm,
            "options": self.options,
            "n_rankings": int(self.n_rankings),
            "clamped": {k: int(v) for k, v in self.clamped.items()},
            "seconds": float(self.seconds),
            "items": {it: {"mu": float(self.mu[i]), "sigma2": float(self.sigma2[i])}
                      for i, it in enumerate(self.items)},
            "workers": workers,
        }

    @classmethod
    def from_dict(cls, d: dict, source: str = "<state>") -> OnlinePosterior:
        """The state of a :meth:`to_dict` dictionary, checked.

        Parameters
        ----------
        d : dict
            The dictionary (``posterior.json``'s schema).
        source : str
            What an error message calls it (the file).
        """
        for key in ("model", "items", "workers", "n_rankings"):
            if key not in d:
                raise DataError(f"not an online posterior: missing {key!r}", source)
        if d.get("method", "online") != "online":
            raise DataError(f"method is {d.get('method')!r}, not 'online'", source)
        model = d["model"]
        if model not in ALGORITHMS:
            raise DataError(f"unknown online model {model!r}", source)
        items = list(d["items"])
        try:
            mu = np.array([float(d["items"][i]["mu"]) for i in items], dtype=float)
            sigma2 = np.array([float(d["items"][i]["sigma2"]) for i in items], dtype=float)
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"bad item entry ({exc})", source) from None
        workers = list(d["workers"])
        alpha = None
        spec = as_spec(model)          # the file names the model: looked up once, here
        if spec.has_eta:
            rows = [d["workers"][w].get("alpha") for w in workers]
            if any(r is None for r in rows) or len({len(r) for r in rows}) > 1:
                raise DataError("every worker needs an 'alpha' list of one length", source)
            alpha = np.array(rows, dtype=float).reshape(len(workers), -1 if rows else 2)
        else:
            workers = []
        clamped = empty_counts()
        clamped.update({k: int(v) for k, v in d.get("clamped", {}).items()})
        post = cls(model, d.get("algorithm", ALGORITHMS[model]), dict(d.get("options", {})),
                   items, mu, sigma2, workers, alpha, int(d["n_rankings"]), clamped,
                   float(d.get("seconds", 0.0)), spec=spec)
        try:
            post.check(source)
        except OnlineError as exc:
            raise DataError(str(exc), source) from None
        return post

    def to_json(self, path: str | Path) -> Path:
        """Write atomically: a temporary file beside ``path``, then :func:`os.replace`, so
        an interrupted save never leaves a half-written state.

        Parameters
        ----------
        path : str or Path
            The JSON file.
        """
        return atomic_write_json(self.to_dict(), path)

    @classmethod
    def from_json(cls, path: str | Path) -> OnlinePosterior:
        """The state saved by :meth:`to_json`.

        Parameters
        ----------
        path : str or Path
            The JSON file.
        """
        path = Path(path)
        try:
            d = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise DataError(f"not valid JSON: {exc.msg}", str(path), exc.lineno) from None
        return cls.from_dict(d, str(path))

    # ------------------------------------------------------------------ views
    def items_table(self):
        """Items sorted by ``mu`` (best first) as a pandas DataFrame."""
        import pandas as pd
        df = pd.DataFrame({"item": self.items, "mu": self.mu, "sigma2": self.sigma2,
                           "sd": np.sqrt(self.sigma2)})
        df = df.sort_values("mu", ascending=False, kind="stable").reset_index(drop=True)
        df.insert(0, "rank", np.arange(1, len(df) + 1))
        return df

    def to_datatree(self, draws: int = 1000, seed: int = 0, chains: int = 1):
        """Draws from the approximation as an ArviZ DataTree (see :mod:`.export`).

        Parameters
        ----------
        draws : int
            Draws per chain.
        seed : int
            Seed of the draws.
        chains : int
            Chains.
        """
        from .export import to_datatree
        return to_datatree(self, draws=draws, seed=seed, chains=chains)

    def __repr__(self) -> str:
        return (f"OnlinePosterior(model={self.model!r}, L={len(self.items)}, "
                f"W={len(self.workers)}, n_rankings={self.n_rankings}, "
                f"clamped={ {k: v for k, v in self.clamped.items() if v} })")


def atomic_write_json(obj, path: str | Path) -> Path:
    """``json.dump`` to a temporary file in the target folder, fsync, then ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(obj, fh, indent=1, allow_nan=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def is_finite_positive(x: float) -> bool:
    return math.isfinite(x) and x > 0
