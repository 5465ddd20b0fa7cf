"""Seeded forward simulators: the generative stories of the models (docs/design.md, Models).

The COUPLE story ([Pan18], Sect. 3.2): draw item scores ``λ`` and a worker's uncertainty
vector ``η_w ~ Dir(α0)``; for each task draw a subset of ``k`` items and its *true* order
from PL(``λ``) (sort by ``λ + Gumbel``); the worker then builds the reported ranking stage by
stage, reporting the item at offset ``t`` of the remaining true order with probability
``η̄_t`` (the first ``m`` entries of ``η_w`` renormalised). For ``k = 2`` this is exactly
CrowdBT; for ``k >= 3`` its ranking probabilities are *not* the paper's Eq. 4 (which is not
normalised), so SBC must use normalised COUPLE, whose sampler here is exact: it draws the
reported ordering from the normalised Eq. 4 probabilities of all ``k!`` orderings.

Every function takes a ``seed`` (or a ``numpy.random.Generator``); same seed, same data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .data import PAD, Rankings
from .likelihood import eq4_all_orderings
from .registry import MODELS, ModelSpec, as_spec, get, names  # noqa: F401  (MODELS re-exported)

#: Worker types of [Pan18], Sect. 5.2: the Dirichlet ``α0`` an ``η_w`` is drawn from.
WORKER_TYPES: dict[str, tuple[float, ...]] = {
    "expert": (5.0, 1.0, 0.1, 0.01),
    "amateur": (5.0, 4.0, 1.0, 0.1),
    "spammer": (5.0, 4.0, 3.0, 3.0),
    "malicious": (2.0, 5.0, 4.0, 1.0),
}

def sim_models() -> tuple[str, ...]:
    """The registered models with a forward simulator (a spec with ``simulate_report``),
    read from the registry when called (a model registered later is included): PeerGrader
    has none yet, its tests simulate ``PL(η_g·λ)`` by the Gumbel trick themselves."""
    return tuple(m for m in names() if get(m).has_simulator)


#: :func:`sim_models` of the built-in registry, as imported (the CLI and the checks call
#: :func:`sim_models`).
SIM_MODELS = sim_models()

#: The paper's synthetic scale (Sect. 5.2): 1000 items, 500 workers, 900 tasks each, k <= 4.
PAPER_SCALE = {"n_items": 1000, "n_workers": 500, "tasks_per_worker": 900, "kmax": 4}


def worker_alpha0(setting: str, K: int) -> np.ndarray:
    """The paper's ``α0`` for a worker type, cut to length ``K`` (or padded with its last
    entry when ``K > 4``, an extension the paper does not cover)."""
    if setting not in WORKER_TYPES:
        raise ValueError(f"unknown worker type {setting!r}; expected one of {tuple(WORKER_TYPES)}")
    a = list(WORKER_TYPES[setting])
    a = a[:K] + [a[-1]] * max(0, K - len(a))
    return np.array(a, dtype=float)


@dataclass(frozen=True, eq=False)
class Simulation:
    """A simulated data set with its true parameters.

    ``eta`` is ``(W, K)`` for every model: COUPLE's uncertainty vectors; for CrowdBT the
    accuracy is ``eta[:, 0]`` (and ``eta[:, 1] = 1 - eta[:, 0]``); PL/BT workers are
    perfect (``eta = e_1``). ``true_order`` holds the task's true PL order in the same
    per-position layout as ``rankings.order``. ``gold`` are extra tasks per worker whose
    true order is known (to build worker priors, :meth:`Priors.from_gold`).
    """

    model: str
    rankings: Rankings
    lam: np.ndarray
    eta: np.ndarray
    settings: tuple[str, ...]
    true_order: np.ndarray
    gold: Rankings | None = None
    gold_true_order: np.ndarray | None = None
    params: dict = field(default_factory=dict)


def _as_rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def sample_subsets(rng: np.random.Generator, n_items: int, k: int, n: int) -> np.ndarray:
    """``n`` uniformly random subsets of ``k`` distinct items, shape ``(n, k)``."""
    if k > n_items:
        raise ValueError(f"cannot draw {k} distinct items from {n_items}")
    out = rng.integers(0, n_items, size=(n, k))
    while True:  # redraw rows with a repeated item (cheap: k << L in practice)
        srt = np.sort(out, axis=1)
        bad = np.flatnonzero(np.any(srt[:, 1:] == srt[:, :-1], axis=1))
        if len(bad) == 0:
            return out
        out[bad] = rng.integers(0, n_items, size=(len(bad), k))


def pl_true_order(rng: np.random.Generator, lam: np.ndarray, subsets: np.ndarray) -> np.ndarray:
    """Draw each subset's order from PL(``λ``) by sorting ``λ + Gumbel`` (best first)."""
    g = lam[subsets] + rng.gumbel(size=subsets.shape)
    return np.take_along_axis(subsets, np.argsort(-g, axis=1, kind="stable"), axis=1)


def couple_report(rng: np.random.Generator, true_order: np.ndarray,
                  eta_rows: np.ndarray) -> np.ndarray:
    """The worker's stagewise report (the COUPLE story), vectorised over tasks.

    At each stage with ``m`` remaining items the worker reports the item at offset ``t`` of
    the remaining *true* order with probability ``η̄_t = η_t / Σ_{v<m} η_v``.
    """
    n, k = true_order.shape
    remaining = true_order.copy()
    report = np.empty_like(true_order)
    for i in range(k - 1):
        m = k - i
        eb = eta_rows[:, :m] / eta_rows[:, :m].sum(axis=1, keepdims=True)
        u = rng.random(n)[:, None]
        t = np.minimum((u > np.cumsum(eb, axis=1)).sum(axis=1), m - 1)
        report[:, i] = remaining[np.arange(n), t]
        keep = np.ones((n, m), dtype=bool)
        keep[np.arange(n), t] = False
        remaining = remaining[keep].reshape(n, m - 1)
    report[:, k - 1] = remaining[:, 0]
    return report


def couple_normalized_report(rng: np.random.Generator, lam: np.ndarray, subsets: np.ndarray,
                             eta_rows: np.ndarray) -> np.ndarray:
    """Exact sampler of normalised COUPLE: draw one of the ``k!`` orderings of each subset
    with probability ``Eq. 4 / Σ_orderings Eq. 4`` (vectorised over tasks; ``k <= 6``)."""
    n, k = subsets.shape
    if k > 6:
        raise ValueError("normalised COUPLE enumerates k! orderings; k <= 6 is supported")
    perms, logp = eq4_all_orderings(lam[subsets], eta_rows)        # (P, k), (n, P)
    cand = subsets[:, perms]                                          # (n, P, k)
    p = np.exp(logp - logp.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    u = rng.random(n)[:, None]
    j = np.minimum((u > np.cumsum(p, axis=1)).sum(axis=1), len(perms) - 1)
    return cand[np.arange(n), j]


def redraw_orders(model: str | ModelSpec, tasks: np.ndarray, worker: np.ndarray, lam: np.ndarray,
                  log_eta: np.ndarray | None = None, seed=0, size=None) -> np.ndarray:
    """New orders of the same tasks by ``model``'s generative process: the NumPy twin of
    :meth:`crowdrank.models.numpyro_models.RankingLikelihood.sample` (PyMC's ``random``).

    ``tasks`` ``(N, K)`` are observed orders (item indices, ``-1`` padding): only each row's
    item set is used; ``worker`` ``(N,)``; ``log_eta`` the worker table of the PPL models
    (``log η`` ``(W, K)`` COUPLE, ``[log η, log(1 − η)]`` ``(W, 2)`` CrowdBT, ``log η_g``
    ``(W,)`` PeerGrader). PL (PeerGrader on ``η_g·λ``) and normalised COUPLE are exact;
    COUPLE follows the story (exact for ``k = 2`` only); BT/CrowdBT draw the PL order
    (CrowdBT: reversed with probability ``1 − η_w``), which has every pair probability of
    the model (see :class:`~crowdrank.models.numpyro_models.RankingLikelihood`). ``size`` adds
    leading dimensions (independent draws)."""
    rng = _as_rng(seed)
    tasks = np.asarray(tasks)
    spec = as_spec(model)
    redraw = spec.fn("redraw")
    if redraw is None:
        raise ValueError(f"model {spec.name!r} has no generative process to redraw orders from")
    if size is not None and tuple(np.atleast_1d(size)) != ():
        size = tuple(int(v) for v in np.atleast_1d(size))
        draws = [redraw_orders(model, tasks, worker, lam, log_eta, rng)
                 for _ in range(int(np.prod(size)))]
        return np.stack(draws).reshape(size + tasks.shape)
    lam = np.asarray(lam, float)
    worker = np.asarray(worker)
    eta = None if log_eta is None else np.exp(np.asarray(log_eta, float))
    lengths = (tasks >= 0).sum(axis=1)
    out = np.full(tasks.shape, PAD, dtype=np.int64)
    for k in np.unique(lengths):
        sel = np.flatnonzero(lengths == k)
        items, w = tasks[sel, :k], worker[sel]
        rep = redraw(rng, lam, items, None if eta is None else eta[w])
        out[sel, :k] = rep
    return out


# ---------------------------------------------------------------- the models' reports
# Registry functions (models.registry.ModelSpec.simulate_report / redraw): how one block of
# tasks of one length is reported. ``simulate_report(rng, lam, subsets, true_order,
# eta_rows)`` sees the task's true PL order already drawn; ``redraw(rng, lam, items,
# eta_w)`` draws everything from the item sets.
def report_true(rng, lam, subsets, true_order, eta_rows):
    """A perfect worker (PL, BT): the report is the true order."""
    return true_order


def report_stagewise(rng, lam, subsets, true_order, eta_rows):
    """COUPLE's story (CrowdBT for ``k = 2``): :func:`couple_report`."""
    return couple_report(rng, true_order, eta_rows)


def report_normalized(rng, lam, subsets, true_order, eta_rows):
    """Normalised COUPLE's exact draw (the true order is not used):
    :func:`couple_normalized_report`."""
    return couple_normalized_report(rng, lam, subsets, eta_rows)


def redraw_pl(rng, lam, items, eta_w):
    """PL (and BT: every pair of the draw has the BT probability): sort ``λ + Gumbel``."""
    return pl_true_order(rng, lam, items)


def redraw_crowdbt(rng, lam, items, eta_w):
    """The PL order, reversed with probability ``1 − η_w`` (``eta_w[:, 0] = η_w``)."""
    rep = pl_true_order(rng, lam, items)
    right = rng.random(len(items)) < eta_w[:, 0]
    return np.where(right[:, None], rep, rep[:, ::-1])


def redraw_couple(rng, lam, items, eta_w):
    """COUPLE's story: a PL true order, then the stagewise report."""
    return couple_report(rng, pl_true_order(rng, lam, items), eta_w)


def redraw_normalized(rng, lam, items, eta_w):
    """Normalised COUPLE, exactly: :func:`couple_normalized_report`."""
    return couple_normalized_report(rng, lam, items, eta_w)


def redraw_peergrader(rng, lam, items, eta_w):
    """PeerGrader: PL on ``η_g·λ`` by the Gumbel trick (``eta_w`` ``(n,)``)."""
    g = lam[items] * eta_w[:, None] + rng.gumbel(size=items.shape)
    return np.take_along_axis(items, np.argsort(-g, axis=1, kind="stable"), axis=1)


def _draw_eta(rng, model: str | ModelSpec, settings: list[str], K: int) -> np.ndarray:
    W = len(settings)
    eta = np.zeros((W, K))
    prior_K = as_spec(model).prior_K(K)
    if prior_K is None:           # perfect workers
        eta[:, 0] = 1.0
        return eta
    for w, s in enumerate(settings):
        a0 = worker_alpha0(s, prior_K)
        e = rng.dirichlet(a0)
        # Dirichlet draws with tiny α can underflow to exact zeros; keep them > 0 so that
        # log η̄ stays finite in every likelihood.
        e = np.maximum(e, 1e-300)
        eta[w, : len(e)] = e / e.sum()
    return eta


def simulate(model: str | ModelSpec = "couple", *, n_items: int = 50, n_workers: int = 10,
             tasks_per_worker: int = 20, kmax: int | None = None, kmin: int = 2,
             setting: str | list[str] = "amateur", gold_per_worker: int = 0,
             mu0: float = 0.0, sigma0: float = 1.0, lam: np.ndarray | None = None,
             eta: np.ndarray | None = None, seed=0) -> Simulation:
    """Simulate a crowdsourced ranking data set ([Pan18], Sect. 5.2 protocol).

    Each worker gets ``tasks_per_worker`` tasks (plus ``gold_per_worker`` gold tasks); each
    task's size ``k`` is uniform on ``kmin..kmax``, its items a uniform subset. ``bt`` and
    ``crowdbt`` produce pairs (``kmax = 2``). ``setting`` is one worker type for all workers
    or a list with one per worker. ``lam``/``eta`` fix the true parameters instead of
    drawing them (``λ ~ N(mu0, sigma0²)``, ``η_w ~ Dir(α0[type])``).
    """
    spec = as_spec(model)                   # an unknown name: "unknown model ..."
    model = spec.name
    pairwise = spec.pairwise
    report = spec.fn("simulate_report")
    if report is None:
        raise ValueError(f"no simulator for {model!r}; expected one of {sim_models()}")
    if kmax is None:
        kmax = 2 if pairwise else 4
    if pairwise and kmax != 2:
        raise ValueError(f"{model} is a pairwise model: use kmax=2 (k-ary data are rank-broken "
                         "at fit time, not simulated)")
    if not 2 <= kmin <= kmax:
        raise ValueError("need 2 <= kmin <= kmax")
    if kmax > n_items:
        raise ValueError(f"kmax={kmax} exceeds the number of items {n_items}")
    if n_workers < 1 or tasks_per_worker < 1:
        raise ValueError("need at least one worker and one task per worker")
    rng = _as_rng(seed)
    settings = [setting] * n_workers if isinstance(setting, str) else list(setting)
    if len(settings) != n_workers:
        raise ValueError("one setting per worker expected")
    lam = rng.normal(mu0, sigma0, size=n_items) if lam is None else np.asarray(lam, float)
    if eta is None:
        eta = _draw_eta(rng, spec, settings, kmax)
    eta = np.asarray(eta, float)

    def tasks(n_per_worker):
        W = n_workers
        worker = np.repeat(np.arange(W), n_per_worker)
        ks = rng.integers(kmin, kmax + 1, size=len(worker))
        order = np.full((kmax, len(worker)), PAD, dtype=np.int32)
        truth = np.full((kmax, len(worker)), PAD, dtype=np.int32)
        for k in range(kmin, kmax + 1):
            sel = np.flatnonzero(ks == k)
            if len(sel) == 0:
                continue
            sub = sample_subsets(rng, n_items, k, len(sel))
            true = pl_true_order(rng, lam, sub)
            rep = report(rng, lam, sub, true, eta[worker[sel]])
            order[:k, sel] = rep.T
            truth[:k, sel] = true.T
        return Rankings(items=[f"i{r}" for r in range(n_items)],
                        workers=[f"w{w}" for w in range(W)], order=order, lengths=ks,
                        worker=worker, task=np.array([f"t{j}" for j in range(len(worker))],
                                                     dtype=object),
                        source=f"simulate({model}, seed={seed if not isinstance(seed, np.random.Generator) else 'rng'})"), truth

    data, true_order = tasks(tasks_per_worker)
    gold = gold_true = None
    if gold_per_worker:
        gold, gold_true = tasks(gold_per_worker)
    return Simulation(model=model, rankings=data, lam=lam, eta=eta, settings=tuple(settings),
                      true_order=true_order, gold=gold, gold_true_order=gold_true,
                      params={"n_items": n_items, "n_workers": n_workers,
                                  "tasks_per_worker": tasks_per_worker, "kmin": kmin, "kmax": kmax,
                                  "gold_per_worker": gold_per_worker, "mu0": mu0, "sigma0": sigma0,
                                  "setting": setting if isinstance(setting, str) else "mixed",
                                  "seed": seed if not isinstance(seed, np.random.Generator) else None})


def simulate_paper_scale(model: str = "couple", setting: str = "amateur", seed=0,
                         **overrides) -> Simulation:
    """The paper's synthetic scale (L=1000, W=500, T=900, k<=4: 450,000 rankings)."""
    kw = dict(PAPER_SCALE)
    if get(model).pairwise:
        kw["kmax"] = 2
    kw.update(overrides)
    return simulate(model, setting=setting, seed=seed, **kw)
