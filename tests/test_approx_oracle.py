"""The PPLs' approximations against an exact posterior computed by quadrature.

A Bradley–Terry posterior with three items (three free parameters) is integrated on a
dense grid: with 40 pairs it is close to Gaussian in its contrasts, while its common level
(the direction the likelihood cannot see) is pure prior, N(0, 1/3). Oracles: the grid's
means and sds. Full-rank ADVI, Laplace and Pathfinder must match them; mean-field ADVI in
the iid coordinates must *underestimate* the marginal sds, because a diagonal Gaussian
cannot hold the strong negative correlation of the λ_r around the level direction
[Blei17]. Laplace must also equal the batch MAP + Laplace of inference/batch on the same
data (an independent implementation: Newton on the analytic Hessian).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import log_expit

from crowdrank.models.data import Rankings
from crowdrank.models.priors import Priors

pytestmark = pytest.mark.slow

# (winner, loser) counts: item a beats b 9 times, b beats a 4 times, ...
COUNTS = {("a", "b"): 9, ("b", "a"): 4, ("b", "c"): 8, ("c", "b"): 5, ("a", "c"): 11,
          ("c", "a"): 3}
ITEMS = ("a", "b", "c")
MEAN_TOL = 0.05        # absolute, on λ (posterior sds are 0.6)
SD_TOL = 0.10          # relative
# ADVI run to its step cap (a tolerance no window change meets) with 8-draw gradients and
# the step size decaying tenfold: the optimiser's own noise well inside the tolerances
VI = {"max_steps": 10000, "elbo_tol": 1e-9, "particles": 8, "progress": False}


@pytest.fixture(scope="module")
def data():
    rows = [[w, l] for (w, l), n in COUNTS.items() for _ in range(n)]
    return Rankings.from_lists(rows, workers=["w0"] * len(rows))


@pytest.fixture(scope="module")
def priors(data):
    return Priors.geometric(data.workers, K=2, a0=10, a=3)


@pytest.fixture(scope="module")
def exact():
    """Means and sds of λ by the trapezoid rule on a 121³ grid over [-4, 4]³."""
    g = np.linspace(-4.0, 4.0, 121)
    lam = np.stack(np.meshgrid(g, g, g, indexing="ij"), axis=-1)        # (...,3)
    logp = -0.5 * (lam ** 2).sum(-1)
    pos = {k: i for i, k in enumerate(ITEMS)}
    for (w, l), n in COUNTS.items():
        logp = logp + n * log_expit(lam[..., pos[w]] - lam[..., pos[l]])
    p = np.exp(logp - logp.max())
    p /= p.sum()
    mean = np.array([(p * lam[..., r]).sum() for r in range(3)])
    sd = np.sqrt(np.array([(p * (lam[..., r] - mean[r]) ** 2).sum() for r in range(3)]))
    return mean, sd


def _moments(fit, data):
    order = [list(fit.items).index(i) for i in ITEMS]
    return fit.lam.mean(0)[order], fit.lam.std(0, ddof=1)[order]


def _check(fit, data, exact, mean_tol=MEAN_TOL, sd_tol=SD_TOL):
    m, s = _moments(fit, data)
    em, es = exact
    assert np.max(np.abs(m - em)) < mean_tol, (m, em)
    assert np.max(np.abs(s / es - 1)) < sd_tol, (s, es)


def test_fullrank_advi_matches_quadrature(data, priors, exact):
    from crowdrank.inference.approx import fit_approx

    fit = fit_approx(data, "bt", priors, "fullrank-advi", draws=4000, level="iid",
                     seed=1, **VI)
    _check(fit, data, exact)
    # no bound on k̂ here: far out, the logistic likelihood is linear in λ, so the posterior's
    # tails have the prior's unit variance while q keeps the bulk's (contrast variance
    # ~0.1): p/q is unbounded and k̂ measures how soon the draws reach that (0.99, 1.28
    # for seeds 1, 2 against Laplace's 0.23 at the mode)
    assert fit.khat is not None


def test_laplace_matches_quadrature_and_batch_laplace(data, priors, exact):
    from crowdrank.inference.approx import fit_approx
    from crowdrank.inference.batch.api import fit_with_intervals

    fit = fit_approx(data, "bt", priors, "laplace-ppl", draws=4000, level="iid")
    assert fit.diagnostics["converged"]
    # the posterior's skew moves the mean a little off the mode: a looser mean tolerance
    _check(fit, data, exact, mean_tol=0.06)
    batch = fit_with_intervals(data, "bt", priors, intervals="laplace")
    order = [list(batch.items).index(i) for i in data.items]
    np.testing.assert_allclose(fit.mode, np.asarray(batch.mu)[order], atol=1e-6)
    np.testing.assert_allclose(np.diag(fit.cov), np.asarray(batch.sigma2)[order], rtol=1e-6)


def test_laplace_centered_is_the_same_gaussian(data, priors):
    """The centred coordinates are a linear map of λ: the same Gaussian on λ."""
    from crowdrank.inference.approx import fit_approx
    from crowdrank.inference.batch.api import fit_with_intervals

    fit = fit_approx(data, "bt", priors, "laplace-ppl", draws=20000, level="centered")
    batch = fit_with_intervals(data, "bt", priors, intervals="laplace")
    order = [list(batch.items).index(i) for i in data.items]
    np.testing.assert_allclose(fit.lam.mean(0), np.asarray(batch.mu)[order], atol=0.02)
    np.testing.assert_allclose(fit.lam.var(0), np.asarray(batch.sigma2)[order], rtol=0.05)


def test_pathfinder_matches_quadrature(data, priors, exact):
    from crowdrank.inference.approx import fit_approx

    fit = fit_approx(data, "bt", priors, "pathfinder", draws=4000, draws_per_path=2000,
                     level="iid", seed=2)
    assert fit.diagnostics["converged"]
    _check(fit, data, exact)
    assert fit.khat < 0.7


def test_mean_field_underestimates_the_unseen_direction(data, priors, exact):
    from crowdrank.inference.approx import fit_approx

    fit = fit_approx(data, "bt", priors, "advi", draws=4000, level="iid", seed=3, **VI)
    _, s = _moments(fit, data)
    _, es = exact
    assert np.all(s < 0.8 * es), (s, es)
    # the common level is pure prior, N(0, 1/3); mean-field squeezes it
    level_var = fit.lam.mean(1).var()
    assert level_var < 0.5 / 3, level_var
    # full rank in the same coordinates holds it
    full = fit_approx(data, "bt", priors, "fullrank-advi", draws=4000, level="iid",
                      seed=3, **VI)
    assert abs(full.lam.mean(1).var() - 1 / 3) < 0.05


def test_lowrank_advi_matches_quadrature(data, priors, exact):
    """Low-rank-plus-diagonal ADVI at NumPyro's default rank ⌈√3⌉ = 2: ``D + W Wᵀ`` with
    ``W`` (3, 2) holds any 3×3 covariance (``Σ − λ_min I`` is positive semi-definite of
    rank 2), so its optimum is full-rank ADVI's and it must match the grid as full-rank
    ADVI does — in the iid coordinates, where mean-field misses the level's variance."""
    from crowdrank.inference.approx import fit_approx

    fit = fit_approx(data, "bt", priors, "lowrank-advi", draws=4000, level="iid", seed=1,
                     **VI)
    assert fit.method == "lowrank-advi"
    _check(fit, data, exact)
    assert abs(fit.lam.mean(1).var() - 1 / 3) < 0.05      # the level's prior variance
    assert fit.khat is not None and np.isfinite(fit.khat)


def test_pathfinder_refuses_a_path_that_cannot_fit_in_memory(data, priors):
    """Pathfinder's ELBO estimates hold (max_steps + 1) × elbo_draws densities at once: where
    they exceed the memory it is refused before the run with the sizes and the largest
    --max-steps that fits (on the paper's 450,000 rankings XLA otherwise failed after the
    L-BFGS run, allocating 58.6 GB); with the memory there is, nothing is refused."""
    from crowdrank.inference.approx.pathfinder import PathfinderOptions, check_memory
    from crowdrank.inference.approx.target import build_target, x64

    with x64():
        target = build_target(data, "bt", priors, fast=False)
    cells = int(np.size(target.inputs.index))
    o = PathfinderOptions()                          # 201 × 25 densities
    check_memory(target, o)                          # this machine: fits
    have = 50 * 25 * cells * 8                       # room for 49 steps + 1
    with pytest.raises(ValueError, match=r"--max-steps 49 or fewer fits"):
        check_memory(target, o, available=have)
    check_memory(target, PathfinderOptions(max_steps=49), available=have)
    with pytest.raises(ValueError, match="no --max-steps fits"):
        check_memory(target, o, available=cells * 8)


def test_a_diverged_advi_is_an_error_that_says_so(data, priors):
    """An optimisation that diverges (here an absurd first step size) stops with a one-line
    error naming the step, the learning rate and the remedy, not with NumPyro's complaint
    about a guide with a NaN location."""
    from crowdrank.inference.approx import fit_approx
    from crowdrank.models.errors import UsageError

    with pytest.raises(UsageError, match=r"advi diverged: after \d+ steps .*learning rate "
                       r"1e\+08\); try a smaller --learning-rate"):
        fit_approx(data, "bt", priors, "advi", learning_rate=1e8, max_steps=400, window=100)


@pytest.mark.slow
@pytest.mark.parametrize(("model", "method"), [("couple-normalized", "advi"),
                                               ("peergrader", "laplace-ppl")])
def test_ppl_approximations_run_on_the_other_models(model, method):
    """Normalised COUPLE and PeerGrader (the registry's models that no study subject
    covers): a PPL approximation fits each, on the same small data and priors, and returns
    finite draws of every item and worker with its k̂ and stopping rule. (Every method
    works on the model's one target, :func:`build_target`: one method per model keeps
    the suite's compile time small.)"""
    from crowdrank.inference.approx import fit_approx
    from crowdrank.models.simulate import simulate

    d = simulate("couple", n_items=6, n_workers=3, tasks_per_worker=8, kmax=3,
                 seed=4).rankings
    rng = np.random.default_rng(5)
    pri = Priors(d.workers, rng.uniform(0.5, 3.0, size=(d.n_workers, d.K)), mu0=0.0,
                 sigma0=1.0, spec="test", gamma=rng.uniform(1.0, 5.0, size=(d.n_workers, 2)))
    kw = {"max_steps": 300, "window": 100} if method == "advi" else {}
    fit = fit_approx(d, model, pri, method, draws=200, **kw)
    assert fit.lam.shape == (200, d.n_items) and np.all(np.isfinite(fit.lam))
    assert fit.eta is not None and np.all(np.isfinite(fit.eta))
    assert len(fit.eta) == 200 and fit.eta.shape[1] == d.n_workers
    assert np.isfinite(fit.khat) and fit.diagnostics["stopping_rule"]
