"""The exact Gibbs step of COUPLE's worker simplexes (inference.gibbs) and the Gibbs route of
``fit_nuts_experimental(eta_update="gibbs")``.

Oracles: the exact Dirichlet marginals (prior only); the exact conditional
``p(η | λ, data)`` of one worker by self-normalised importance sampling from its Dirichlet
prior, with the stage probabilities written out directly from [Pan18], Eq. 3 (no code of
the step shared); the default NUTS route on the same data (posterior agreement within MCSE).
The same conditional test holds for the route's Metropolis moves (the independence
jump, the entry jump, the random walk, the mode jump). Deliberately wrong steps (the slack dropped from the rate, a count
off by one, a jump without its proposal's density, a walk on another prior) must fail it.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from crowdrank.inference import nuts
from crowdrank.inference.nuts.experimental import fit_nuts_experimental
from crowdrank.models.errors import UsageError
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate
from crowdrank.validation.reference import simplex_prior_check

jax = pytest.importorskip("jax")
jnp = jax.numpy

from crowdrank.inference.nuts import gibbs as G

ALPHA4 = 10 * 6.0 ** -np.arange(1, 5)            # the paper's geometric prior, α_4 ≈ 0.0077


def _tiny(kmax: int = 4):
    d = simulate("couple", n_items=4, n_workers=2, tasks_per_worker=4, kmax=kmax,
                 seed=1).rankings
    return d, Priors.geometric(d.workers, kmax)


def _chain(step, key, log_g0, n):
    """``n`` iterations of ``step(key, log_g)``, every state kept ``(n, ...)``."""
    def body(lg, k):
        lg = step(k, lg)
        return lg, lg
    with jax.enable_x64(True):
        _, out = jax.jit(lambda k, lg: jax.lax.scan(body, lg, jax.random.split(k, n)))(
            key, log_g0)
        return np.asarray(out)


def _eta(log_g):
    return np.exp(log_g - np.logaddexp.reduce(log_g, axis=-1, keepdims=True))


# ---------------------------------------------------------------- prior only
def test_prior_only_step_draws_the_exact_dirichlet():
    """No stages: n = Ξ = 0, so each sweep draws g ~ Gamma(α) afresh, η ~ Dir(α) exactly —
    including P(log η_4 < −20) under α_4 = 0.0077 (the spike a clipping transform misses)."""
    d, pr = _tiny()
    from crowdrank.models.model_inputs import model_inputs

    inp = model_inputs("couple", d, pr)
    fn = G.make_gibbs_fn(inp, 1, prior_only=True)
    lam = {"lambda": jnp.zeros(inp.n_items)}
    step = lambda k, lg: fn(rng_key=k, gibbs_sites={"eta_log_g": lg}, hmc_sites=lam)["eta_log_g"]
    with jax.enable_x64(True):
        lg0 = jnp.zeros((inp.n_workers, inp.K))
    eta = _eta(_chain(step, jax.random.PRNGKey(0), lg0, 4000))      # (4000, W, K)
    for w in range(inp.n_workers):
        res = simplex_prior_check(eta[:, w, :].reshape(4, 1000, -1), pr.alpha[w])
        assert res.passed, res.reasons


@pytest.mark.slow
def test_fit_nuts_gibbs_prior_only_matches_exact_prior():
    d, pr = _tiny()
    r = fit_nuts_experimental(d, "couple", pr, chains=2, tune=50, draws=1000, seed=3, progress=False,
                              prior_only=True, eta_update="gibbs", chain_method="sequential")
    eta = np.asarray(r.idata["posterior"]["eta"].values)
    for w in range(d.n_workers):
        res = simplex_prior_check(eta[:, :, w, :], pr.alpha[w])
        assert res.passed, res.reasons
    assert r.idata.attrs["eta_update"] == "gibbs"


# ---------------------------------------------------------------- the conditional
LAM = np.array([1.2, 0.4, -0.3, -1.1])
ALPHA3 = np.array([2.0, 0.6, 0.15])
#: one worker's rankings (item indices in reported order), lengths 3 and 2
RANKS = [[0, 1, 2], [1, 0, 3], [2, 0, 1], [0, 2, 3], [3, 1, 0], [1, 3], [0, 3], [2, 1],
         [3, 0], [1, 2, 0]]


def _tables():
    by_m = {}
    for r in RANKS:
        k = len(r)
        for i in range(k - 1):
            by_m.setdefault(k - i, []).append(r[i:])
    ms = tuple(sorted(by_m))
    return G.StageTables(ms, tuple(np.array(by_m[m], np.int32) for m in ms),
                         tuple(np.zeros(len(by_m[m]), np.int32) for m in ms), 1, 3)


def _exact_conditional(n=400_000, seed=0):
    """Self-normalised importance sampling from Dir(α): weights Π_i P_i(η) of Eq. 3, each
    stage written out: P_i = Σ_{t<m} η_t e^{λ_{c_t}} / (Σ_{v<m} η_v · Σ_{t<m} e^{λ_{c_t}})."""
    rng = np.random.default_rng(seed)
    eta = rng.dirichlet(ALPHA3, size=n)
    eta = np.maximum(eta, 1e-300)
    logw = np.zeros(n)
    for r in RANKS:
        for i in range(len(r) - 1):
            c = r[i:]
            m = len(c)
            e = np.exp(LAM[c])
            logw += np.log(eta[:, :m] @ e) - np.log(eta[:, :m].sum(1)) - np.log(e.sum())
    w = np.exp(logw - logw.max())
    w /= w.sum()
    ess = 1.0 / np.sum(w ** 2)
    f = np.column_stack([eta, eta[:, 2] < 0.01])                      # E[η_t], P(η_3 < .01)
    mean = w @ f
    se = np.sqrt(w @ (f - mean) ** 2 / ess)
    return mean, se


#: a deliberately mediocre proposal for the jump (its exactness must not depend on it)
BETA3 = np.array([[6.0, 3.0, 1.0]])


def _step(kind):
    tables = _tables()
    lam = jnp.asarray(LAM)
    # the mixture is fitted once, outside the chain's program (a constant of the move,
    # like the proposal's β): traced inside the step, its Newton fits would run at every
    # iteration
    fit = _mode_fit() if kind.startswith("mode_jump") else None

    def step(key, lg):
        k1, k2 = jax.random.split(key)
        if kind == "jump":                # the independence MH move alone
            return G.jump(k1, lg, lam, tables, ALPHA3[None], BETA3)
        if kind == "jump_uncorrected":    # wrong: the proposal's density left out
            return G.jump(k1, lg, lam, tables, BETA3, BETA3)
        if kind == "entry_jump":          # the per-entry mode-jumping update alone
            return G.entry_jump(k1, lg, lam, tables, ALPHA3[None], BETA3)
        if kind == "entry_jump_wrong":    # wrong: proposes from 3α but corrects with α
            return _entry_jump_wrong(k1, lg, lam, tables)
        if kind == "mode_jump":           # the two-mode independence move alone
            return G.mode_jump(k1, lg, lam, tables, ALPHA3[None], fit)[0]
        if kind == "mode_jump_wrong":     # wrong: spike half drawn from LogGamma(3α_3)
            return _mode_jump_wrong(k1, lg, lam, tables, fit)
        if kind == "walk":                # the random-walk steps alone
            return G.walk(k1, lg, lam, tables, ALPHA3[None], 3)
        if kind == "walk_wrong_prior":    # wrong: the walk targets another prior (3α)
            return G.walk(k1, lg, lam, tables, 3.0 * ALPHA3[None], 3)
        n, Xi = G.augment(k1, lg, lam, tables)
        if kind == "no_slack":            # wrong: the rate forgets the normalisers 1/G_m
            Xi = 0.0 * Xi
        elif kind == "count_off_by_one":  # wrong: one offset too many on entry 2
            n = n.at[:, 2].add(1.0)
        return G.draw_log_g(k2, ALPHA3[None], n, Xi)
    return step


def _entry_jump_wrong(key, lg, lam, tables):
    # the proposal's prior half drawn from LogGamma(3α) while log_q still says LogGamma(α)
    orig = jax.random.loggamma
    try:
        jax.random.loggamma = lambda k, a: orig(k, 3.0 * a)
        return G.entry_jump(key, lg, lam, tables, ALPHA3[None], BETA3)
    finally:
        jax.random.loggamma = orig


@functools.cache
def _mode_fit():
    """The mode jump's mixture, fitted at the test's λ from the mediocre ``BETA3`` (one
    compiled program, as ``make_gibbs_fn`` fits it)."""
    y0 = np.log(BETA3 / BETA3.sum() * ALPHA3.sum())
    tables = _tables()
    return jax.jit(lambda lam, y: G.mode_fit(lam, tables, ALPHA3[None], y))(
        jnp.asarray(LAM), jnp.asarray(y0))


def test_mode_fit_components_are_the_laplace_fits_of_their_sets():
    """Each component of the mode jump's mixture is the Laplace fit of the target with its
    set's entries in their spike: at its location the gradient over the other entries is
    ~0 and its scale is the inverse of the negative Hessian there (both from JAX's
    derivatives of the masked target, not the fit's own batched Hessian); and with every
    entry but the first spiked, η = (1, 0, 0) whatever ``g_1`` is, so the likelihood is
    flat and the fit is exactly LogGamma(α_1)'s: location log α_1, variance 1/α_1."""
    fit = _mode_fit()
    tables, lam, alpha = _tables(), jnp.asarray(LAM), jnp.asarray(ALPHA3[None])
    sets = G.spike_sets(3)
    assert sets == ((), (1,), (2,), (1, 2)) and len(fit) == len(sets)
    for spiked, (mu, chol) in zip(sets, fit):
        active = ~np.isin(np.arange(3), spiked)
        ix = np.flatnonzero(active)

        def target(v, ix=ix, active=active):
            # the spiked entries are masked out of the target: any value stands in for them
            full = jnp.zeros((1, 3), v.dtype).at[:, ix].set(v)
            return jnp.sum(G._masked_target(full, lam, tables, alpha, active))

        v = jnp.asarray(mu)
        np.testing.assert_allclose(jax.jit(jax.grad(target))(v), 0.0, atol=1e-4)
        h = -jax.jit(jax.hessian(target))(v)[0, :, 0, :]
        cov = np.asarray(chol[0] @ chol[0].T) / G.MODE_JUMP_INFLATE ** 2
        np.testing.assert_allclose(cov, np.linalg.inv(np.asarray(h)), rtol=1e-3)
    mu, chol = fit[sets.index((1, 2))]
    np.testing.assert_allclose(np.asarray(mu)[0], np.log(ALPHA3[:1]), rtol=1e-5)
    np.testing.assert_allclose(np.ravel(chol) ** 2, 1.0 / ALPHA3[:1], rtol=1e-4)


def _mode_jump_wrong(key, lg, lam, tables, fit):
    # the spike half's last entry drawn from LogGamma(3α) while log_q still says LogGamma(α)
    orig = jax.random.loggamma
    try:
        jax.random.loggamma = lambda k, a: orig(k, 3.0 * a)
        return G.mode_jump(key, lg, lam, tables, ALPHA3[None], fit)[0]
    finally:
        jax.random.loggamma = orig


def _z_scores(kind, n=10_000):
    import arviz as az

    with jax.enable_x64(True):
        lg0 = jnp.log(jnp.asarray(ALPHA3 / ALPHA3.sum()))[None]
    eta = _eta(_chain(_step(kind), jax.random.PRNGKey(7), lg0, n))[:, 0, :]
    f = np.column_stack([eta, eta[:, 2] < 0.01])
    mean_is, se_is = _exact_conditional()
    z = []
    for j in range(f.shape[1]):
        x = f[:, j].reshape(4, -1)
        ess = float(az.ess(x))                       # 4 pseudo-chains
        se = np.sqrt(f[:, j].var() / max(ess, 1.0) + se_is[j] ** 2)
        z.append((f[:, j].mean() - mean_is[j]) / se)
    return np.array(z)


@pytest.mark.parametrize("kind,exact", [("exact", True), ("no_slack", False),
                                        ("count_off_by_one", False), ("jump", True),
                                        ("jump_uncorrected", False), ("walk", True),
                                        ("walk_wrong_prior", False),
                                        ("entry_jump", True), ("entry_jump_wrong", False),
                                        ("mode_jump", True), ("mode_jump_wrong", False)])
def test_step_leaves_the_exact_conditional_invariant(kind, exact):
    """One worker, λ fixed, 10 rankings of lengths 3 and 2 under α = (2, 0.6, 0.15): the
    long-run Gibbs draws of η match p(η | λ, data) (E[η_t] and P(η_3 < 0.01)) within MC
    error; so do those of the independence jump alone and of the random walk alone; a step
    with a wrong rate or count, a jump that forgets its proposal's density, or a walk on
    another prior, does not."""
    # the walk moves one coordinate a step, so its chain needs more iterations
    z = _z_scores(kind, 20_000 if kind.startswith("walk") else 10_000)
    if exact:
        assert np.all(np.abs(z) < 4.0), z
    else:
        assert np.max(np.abs(z)) > 6.0, z


def test_stage_tables_count_every_stage():
    """Σ over m of the stages with m candidates is Σ_rankings (k − 1), each stage's
    candidates are the ranking's reported suffix of length m."""
    d, pr = _tiny()
    from crowdrank.models.model_inputs import model_inputs

    inp = model_inputs("couple", d, pr)
    t = G.stage_tables(inp)
    total = sum(len(w) for w in t.worker)
    expect = int(sum(k - 1 for k, a, b in inp.blocks for _ in range(b - a)))
    assert total == expect
    for m, it in zip(t.m, t.items):
        assert it.shape[1] == m


# ---------------------------------------------------------------- fit_nuts
def test_unsupported_combinations_raise_usage_errors():
    d, pr = _tiny()
    for model, kw in [("couple", {"backend": "pymc"}),
                      ("couple-normalized", {}),
                      ("crowdbt", {}),
                      ("couple", {"simplex": "dirichlet"}),
                      ("couple", {"chain_method": "vectorized"}),
                      ("couple", {"gibbs_sweeps": 0}),
                      ("couple", {"gibbs_walk": -1})]:
        # the combination is refused before the data or priors are read
        with pytest.raises(UsageError):
            fit_nuts_experimental(d, model, pr, chains=1, tune=2, draws=2, progress=False,
                                  eta_update="gibbs", **kw)
    with pytest.raises(UsageError):
        fit_nuts_experimental(d, "couple", pr, chains=1, tune=2, draws=2, progress=False,
                              eta_update="hmc")
    # the mode jump is fitted at an approximation's scores: without one, or off the
    # Gibbs route, it is refused
    with pytest.raises(UsageError):
        fit_nuts_experimental(d, "couple", pr, chains=1, tune=2, draws=2, progress=False,
                              eta_update="gibbs", gibbs_mode_jump=True)
    with pytest.raises(UsageError):
        fit_nuts_experimental(d, "couple", pr, chains=1, tune=2, draws=2, progress=False,
                              gibbs_mode_jump=True)


@pytest.mark.slow
def test_gibbs_route_agrees_with_default_nuts():
    """Tiny COUPLE data: the Gibbs route (NUTS on λ, the jump and 2 exact sweeps of η per
    iteration; then also with the mode jump) and the default joint NUTS agree parameter by
    parameter within MCSE; the check can fail (one score shifted by half a posterior sd).

    Rankings of at most 3 items (``K = 3``; prior α ≈ 1.67, 0.28, 0.046, so both entries
    the mode jump's mixture covers still have prior spikes): the route's programs
    (stage tables, the mixture's Newton fits with ``K`` Hessian columns) compile ~25 %
    faster than at ``K = 4``, which dominated the test (compiling, not sampling)."""
    from test_nuts_adapt import _shift_first_score

    from crowdrank.inference.online import fit_online
    from crowdrank.validation.reference import backend_agreement

    d, pr = _tiny(kmax=3)
    kw = {"chains": 4, "tune": 150, "draws": 300, "seed": 1, "progress": False,
          "pointwise": False, "predictive": False}
    ref = nuts.fit_nuts(d, "couple", pr, **kw)
    # warm-started: the route then also makes its independence jump every iteration
    gib = fit_nuts_experimental(d, "couple", pr, eta_update="gibbs", gibbs_sweeps=2,
                                profile=True, approx=fit_online(d, "couple", pr, progress=False), **kw)
    assert gib.timings["gibbs_ms"] > 0 and gib.idata.attrs["gibbs_jump"] == 1
    ag = backend_agreement(ref.idata, gib.idata, labels=("nuts", "gibbs"))
    assert ag.agree, ag.verdict()
    assert not backend_agreement(ref.idata, _shift_first_score(gib.idata)).agree
    # the same route with the mode jump (its fit refitted at each λ) against the same
    # reference: the composition with NUTS on λ | η still targets the joint posterior
    mj = fit_nuts_experimental(d, "couple", pr, eta_update="gibbs", gibbs_sweeps=2,
                               gibbs_mode_jump=True,
                               approx=fit_online(d, "couple", pr, progress=False), **kw)
    assert mj.idata.attrs["gibbs_mode_jump"] == 1
    ag = backend_agreement(ref.idata, mj.idata, labels=("nuts", "gibbs+mode jump"))
    assert ag.agree, ag.verdict()
    assert not backend_agreement(ref.idata, _shift_first_score(mj.idata)).agree
