"""Contextual Bradley–Terry as a model: covariates from the pairwise CSV, the NumPy
reference log-likelihood, and the NumPyro and PyMC programs.

The article in ``seeds/002_*`` ("contextual BT", the Chatbot Arena form [Chiang24]): a
comparison ``s`` of ``f_s`` (shown first) and ``t_s`` carries covariates ``x_s ∈ R^p`` and

    log-odds(f_s beats t_s) = (λ_f − λ_t) + x_s·(γ_f − γ_t)                        (C1)

with ``λ_i ~ N(μ0, σ0²)`` and every ``γ_ik ~ N(0, τ²)``. The MAP (with Laplace's
covariance) is :func:`crowdrank.inference.batch.contextual.fit_contextual`; NUTS runs these programs
through :mod:`crowdrank.inference.nuts.pair_nuts`.

Covariates (:func:`encode_covariates`) are named columns of the pairwise CSV
(:mod:`crowdrank.models.pair_table`). A column is **numeric** when every cell parses as a finite
number and **categorical** when none does, or when it is named as ``COLUMN:cat``; a
categorical column with levels ``v_1 < … < v_m`` (sorted) becomes ``m − 1`` indicator
columns ``COLUMN=v_j``, its first level the *baseline* (absorbed in ``λ``: the baseline's
``x`` is zero). A numeric column with some non-numeric cells is an error naming the file,
the first such line and the cell; so are empty, NaN or infinite cells. Numeric covariates
are used as given (``τ`` is on their scale; standardise them first if their scales differ
a lot).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, log_expit

from .errors import DataError, UsageError
from .pair_table import PairTable


@dataclass(frozen=True)
class Covariates:
    """``X`` ``(S, p)``; ``names`` of its columns; ``baselines``: categorical column →
    its baseline level; ``kinds``: column → ``"numeric"`` or ``"categorical"``."""

    X: np.ndarray
    names: tuple[str, ...]
    baselines: dict
    kinds: dict


def parse_spec(spec: str | None) -> list[tuple[str, bool]]:
    """``"a,b:cat"`` → ``[("a", False), ("b", True)]`` (``True``: forced categorical)."""
    if spec is None or not spec.strip():
        return []
    out = []
    for part in spec.split(","):
        name = part.strip()
        forced = name.endswith(":cat")
        name = name[:-4] if forced else name
        if not name:
            raise UsageError(f"empty column name in --covariates {spec!r}")
        out.append((name, forced))
    return out


def _number(cell: str) -> float | None:
    try:
        v = float(cell)
    except ValueError:
        return None
    return v


def encode_covariates(t: PairTable, spec: list[tuple[str, bool]]) -> Covariates:
    """The design ``X`` of the covariate columns ``spec`` (see the module docstring)."""
    cols, names, baselines, kinds = [], [], {}, {}
    for name, forced in spec:
        cells = t.column(name, "covariate")
        vals = [None if forced else _number(c) for c in cells]
        n_num = sum(v is not None for v in vals)
        if forced or n_num == 0:
            levels = sorted(set(cells))
            baselines[name], kinds[name] = levels[0], "categorical"
            for lv in levels[1:]:
                cols.append((cells == lv).astype(float))
                names.append(f"{name}={lv}")
            continue
        for s, v in enumerate(vals):
            if v is None:
                raise DataError(f"non-numeric value {cells[s]!r} in numeric covariate column "
                                f"{name!r} (its other cells are numbers; write {name}:cat to "
                                "treat it as categorical)", t.source, t.line_of(s))
            if not math.isfinite(v):
                raise DataError(f"non-finite value {cells[s]!r} in covariate column {name!r}",
                                t.source, t.line_of(s))
        kinds[name] = "numeric"
        cols.append(np.asarray(vals, float))
        names.append(name)
    X = np.stack(cols, 1) if cols else np.zeros((t.n_pairs, 0))
    return Covariates(X, tuple(names), baselines, kinds)


def logits(first, second, X, lam, gamma) -> np.ndarray:
    """(C1) per comparison: the log-odds that the first item wins."""
    lam, gamma = np.asarray(lam, float), np.asarray(gamma, float)
    X = np.asarray(X, float).reshape(len(first), -1)
    return lam[first] - lam[second] + np.einsum("sk,sk->s", X, gamma[first] - gamma[second])


def loglik(t: PairTable, X, lam, gamma) -> np.ndarray:
    """The reference log-likelihood ``log σ(±(C1))``, one value per pair."""
    u = logits(t.first, t.second, X, lam, gamma)
    return log_expit(np.where(t.first_won == 1, u, -u))


def simulate(n_items: int, n_comparisons: int, p: int, *, tau: float = 1.0, seed: int = 0):
    """Seeded contextual-BT data: ``λ ~ N(0, 1)``, ``γ ~ N(0, τ²)``, uniformly random pairs,
    ``x_s ~ N(0, 1)^p``, outcome ``Bernoulli(σ(d_s))``. Returns ``(win, lose, X, lam,
    gamma)``."""
    rng = np.random.default_rng(seed)
    lam = rng.normal(size=n_items)
    gamma = rng.normal(0.0, tau, size=(n_items, p))
    a = rng.integers(0, n_items, n_comparisons)
    b = (a + rng.integers(1, n_items, n_comparisons)) % n_items     # b != a
    X = rng.normal(size=(n_comparisons, p))
    d = lam[a] - lam[b] + np.einsum("sk,sk->s", X, gamma[a] - gamma[b])
    a_wins = rng.random(n_comparisons) < expit(d)
    win, lose = np.where(a_wins, a, b), np.where(a_wins, b, a)
    return win, lose, X, lam, gamma


def table_from_simulation(win, lose, X, seed: int = 0, n_workers: int = 1):
    """A :class:`PairTable` of :func:`simulate`'s output, each pair shown in a seeded
    random order, and its covariate columns ``x0, x1, …`` as strings (so that :func:`encode_covariates` reads them as a file)."""
    rng = np.random.default_rng(seed)
    S = len(win)
    flip = rng.random(S) < 0.5
    first, second = np.where(flip, lose, win), np.where(flip, win, lose)
    L = int(max(np.max(win), np.max(lose))) + 1
    X = np.asarray(X, float).reshape(S, -1)
    extra = {f"x{k}": np.asarray([repr(float(v)) for v in X[:, k]], dtype=object)
             for k in range(X.shape[1])}
    return PairTable(tuple(f"i{r}" for r in range(L)),
                     tuple(f"w{k}" for k in range(n_workers)),
                     first.astype(np.int64), second.astype(np.int64),
                     (~flip).astype(np.int64), rng.integers(0, n_workers, S).astype(np.int64),
                     extra, None, True, "<simulated contextual-bt>")


# ------------------------------------------------------------------------------- the PPLs
def numpyro_model(t: PairTable, X, mu0: float = 0.0, sigma0: float = 1.0, tau: float = 1.0):
    """NumPyro program of (C1): ``lambda`` (L), ``gamma`` (L, p), observed Bernoulli ``y``
    (1 when the first item won) with logits (C1)."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    X = jnp.asarray(np.asarray(X, float).reshape(t.n_pairs, -1))
    p = X.shape[1]
    f, s, y = jnp.asarray(t.first), jnp.asarray(t.second), jnp.asarray(t.first_won)

    def model():
        lam = numpyro.sample("lambda", dist.Normal(mu0, sigma0).expand([t.n_items])
                             .to_event(1))
        u = lam[f] - lam[s]
        if p:
            gamma = numpyro.sample("gamma", dist.Normal(0.0, tau).expand([t.n_items, p])
                                   .to_event(2))
            u = u + jnp.sum(X * (gamma[f] - gamma[s]), axis=1)
        numpyro.sample("y", dist.Bernoulli(logits=u), obs=y)

    return model


def pymc_model(t: PairTable, X, mu0: float = 0.0, sigma0: float = 1.0, tau: float = 1.0,
               names: tuple[str, ...] | None = None):
    """The PyMC twin of :func:`numpyro_model`."""
    import pymc as pm
    import pytensor.tensor as pt

    X = np.asarray(X, float).reshape(t.n_pairs, -1)
    p = X.shape[1]
    coords = {"item": list(t.items)}
    if p:
        coords["covariate"] = list(names) if names else [f"x{k}" for k in range(p)]
    with pm.Model(coords=coords) as m:
        lam = pm.Normal("lambda", mu=mu0, sigma=sigma0, dims="item")
        u = lam[t.first] - lam[t.second]
        if p:
            gamma = pm.Normal("gamma", mu=0.0, sigma=tau, dims=("item", "covariate"))
            u = u + pt.sum(X * (gamma[t.first] - gamma[t.second]), axis=1)
        pm.Bernoulli("y", logit_p=u, observed=t.first_won)
    return m
