"""The nonparametric bootstrap ([Efron79]) of a batch fit, as Chatbot Arena ([Chiang24])
computes its intervals.

Resample the comparisons with replacement, refit, repeat; the spread of the refitted
scores is the interval. The unit resampled is the *input ranking* (a pairwise comparison
for pairwise data): the rank-broken pairs of one ranking, or the rankings a tied input was
split into, are not independent and travel together. A resample is a vector of
multinomial counts over the ``U`` units, ``Multinomial(U, 1/U)``, used as stage weights
(:mod:`.luce`) and summed over identical stages (:func:`.luce.compress`); each refit is
a Newton solve started at the full-data estimate, stopped at a gradient of ``1e-6`` by
default (an error in the scores far below the bootstrap's own spread). MAP refits run
:data:`STACK` resamples at a time as one stacked Newton-CG solve (:mod:`.stacked`: no
``L × L`` Hessian, no factorisation — the work grows with the stages); ML refits, and
any resample the stacked solve leaves unconverged, run alone by :func:`lazy_newton`,
which reuses one Cholesky factor of the resample's Hessian while each step at least
halves the gradient and hands over to the damped Newton solver otherwise. Resample ``b``
draws its counts from child ``b`` of
``numpy.random.SeedSequence(seed)``, so the draws do not depend on how the work is split
over processes.

Intervals are percentiles of the refitted scores, and of the ranks they imply (rank 1 =
best; an item's rank is one plus the number of items scored strictly higher).
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context

import numpy as np

from crowdrank.models.data import DataError

from . import luce
from .solvers import Problem, solve


@dataclass(frozen=True, eq=False)
class Bootstrap:
    """``draws`` ``(B, L)``: refitted scores; ``ranks`` ``(B, L)``: their ranks."""

    draws: np.ndarray
    ranks: np.ndarray
    seed: int
    not_converged: int
    seconds: float
    processes: int

    def score_interval(self, prob: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        return percentile_interval(self.draws, prob)

    def rank_interval(self, prob: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        return percentile_interval(self.ranks, prob)


def percentile_interval(draws, prob: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The central ``prob`` percentile interval of each column of ``draws``."""
    if not 0 < prob < 1:
        raise ValueError("interval probability must be in (0, 1)")
    q = np.percentile(np.asarray(draws, float), [50 * (1 - prob), 50 * (1 + prob)], axis=0)
    return q[0], q[1]


def ranks_of(draws) -> np.ndarray:
    """Rank of every item in every row (1 = best; ties share the better rank)."""
    d = np.asarray(draws, float)
    s = np.sort(d, axis=1)
    # items scored strictly higher = L − (number scored ≤ it)
    le = np.stack([np.searchsorted(s[b], d[b], side="right") for b in range(d.shape[0])])
    return d.shape[1] - le + 1


def resample_weights(n_units: int, child: np.random.SeedSequence) -> np.ndarray:
    """Multinomial counts of one bootstrap resample of ``n_units`` units."""
    rng = np.random.default_rng(child)
    return rng.multinomial(n_units, np.full(n_units, 1.0 / n_units)).astype(float)


def lazy_newton(problem: Problem, lam0, tol: float, max_chord: int = 30):
    """Maximise ``problem`` from ``lam0`` by Newton steps that all reuse the Cholesky
    factor of ``−∇²f(lam0)`` while each step at least halves ``max |∇f|``; otherwise
    (or after ``max_chord`` steps) the damped Newton of :func:`.solvers.solve` finishes from
    the last point. Returns :class:`.solvers.SolveResult` (``iterations`` counts both)."""
    from scipy.linalg import cho_factor, cho_solve

    from .solvers import _centre

    lam = _centre(problem, np.asarray(lam0, float))
    g = problem.grad(lam)
    gn = float(np.max(np.abs(g)))
    A = problem.neg_hess(lam)
    if problem.prior is None:
        A += 1.0 / len(lam)          # the sum-to-zero direction, as newton_direction does
    F = cho_factor(A, overwrite_a=True, check_finite=False)
    it = 0
    while gn > tol and it < max_chord:
        cand = _centre(problem, lam + cho_solve(F, g, check_finite=False))
        gc = problem.grad(cand)
        gcn = float(np.max(np.abs(gc)))
        if not gcn <= 0.5 * gn:      # NaN-safe: a poor or bad step stops the chord
            break
        lam, g, gn, it = cand, gc, gcn, it + 1
    res = solve(problem, "newton", lam0=lam, tol=tol)
    return dataclasses.replace(res, iterations=res.iterations + it)


#: Resamples solved together by :func:`.stacked.solve_stacked` (bounds its memory:
#: a few ``(STACK, stages)`` arrays).
STACK = 128


def _refit(problem: Problem, lam_hat, children, tol: float, source: str,
           items) -> tuple[np.ndarray, int]:
    """Refit every resample of ``children``; returns the scores and how many refits
    stopped before ``tol``. MAP: stacked Newton-CG (:mod:`.stacked`), a resample it leaves
    unconverged refitted alone by :func:`lazy_newton`; ML: :func:`lazy_newton` each."""
    from .stacked import solve_stacked

    out = np.empty((len(children), problem.stages.n_items))
    bad = 0
    small, index = luce.compress(problem.stages)
    wu = np.empty((len(children), small.n_units))
    for i, child in enumerate(children):
        w = resample_weights(problem.stages.n_units, child)
        if problem.prior is None:
            try:
                luce.check_ml_exists(problem.stages, items, source, weights=w)
            except DataError as exc:
                raise DataError(f"bootstrap resample {child.spawn_key[-1]}: {exc}; the "
                                "bootstrap of ML needs every resample to have an ML "
                                "estimate: bootstrap the MAP instead", source) from None
        wu[i] = np.bincount(index, weights=w[problem.stages.unit], minlength=small.n_units)
    for a in range(0, len(children), STACK):
        rows = np.arange(a, min(a + STACK, len(children)))
        if problem.prior is not None:
            lam, ok, _ = solve_stacked(small, problem.prior, wu[rows], lam_hat, tol=tol)
            out[rows] = lam
        else:
            ok = np.zeros(len(rows), bool)
        for r in rows[~ok]:
            res = lazy_newton(Problem(small, problem.prior, wu[r]), lam_hat, tol)
            out[r] = res.lam
            bad += not res.converged
    return out, bad


def _refit_worker(args):
    from threadpoolctl import threadpool_limits

    # one BLAS thread per process: the processes already use the cores
    with threadpool_limits(1, user_api="blas"):
        return _refit(*args)


def bootstrap(problem: Problem, lam_hat, n: int = 1000, *, seed: int = 0,
              processes: int = 1, tol: float = 1e-6, progress: bool = True,
              source: str = "<data>", items=None) -> Bootstrap:
    """``n`` bootstrap refits of ``problem`` (the module docstring), on ``processes``
    processes (1: in this process)."""
    if n < 2:
        raise ValueError("the bootstrap needs at least 2 resamples")
    t0 = time.perf_counter()
    children = np.random.SeedSequence(seed).spawn(n)
    lam_hat = np.asarray(lam_hat, float)
    processes = max(1, int(processes))
    chunks = [children[i::processes * 4] for i in range(min(n, processes * 4))]
    order = np.concatenate([np.arange(n)[i::processes * 4] for i in range(len(chunks))])
    from tqdm.auto import tqdm

    bar = tqdm(total=n, desc="bootstrap", unit="refit", disable=not progress)
    results = []
    if processes == 1:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1, user_api="blas"):
            for ch in chunks:
                results.append(_refit(problem, lam_hat, ch, tol, source, items))
                bar.update(len(ch))
    else:
        with ProcessPoolExecutor(processes, mp_context=get_context("spawn")) as ex:
            futs = [ex.submit(_refit_worker, (problem, lam_hat, ch, tol, source, items))
                    for ch in chunks]
            for f, ch in zip(futs, chunks):
                results.append(f.result())
                bar.update(len(ch))
    bar.close()
    draws = np.empty((n, len(lam_hat)))
    draws[order] = np.concatenate([r[0] for r in results])
    return Bootstrap(draws, ranks_of(draws), int(seed), int(sum(r[1] for r in results)),
                     time.perf_counter() - t0, processes)
