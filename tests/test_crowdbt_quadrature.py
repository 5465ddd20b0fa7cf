"""CrowdBT's quadrature moment matching (``taylor="quadrature"``, inference.online.crowdbt).

Oracles: Monte Carlo of the tilted distribution (seeded, large, with its standard error
from batch means), the exact posterior of a one-pair model by adaptive 1-D/2-D quadrature
(SciPy), the readable specification for the numba kernel, and, for the default update, a
transcription of Chen et al.'s formulas as they were before the variant existed (the
default must stay bit for bit what it was).
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from scipy import integrate, stats

from crowdrank.inference.online import fit_online, kernels
from crowdrank.inference.online.crowdbt import (
    crowdbt_pass_python,
    difference_moments,
    pair_update,
)
from crowdrank.inference.online.ep import fit_ep
from crowdrank.models.errors import UsageError
from crowdrank.models.priors import build_priors
from crowdrank.models.registry import get as get_model
from crowdrank.models.simulate import simulate

CASES = [  # (mu_w, mu_l, s2_w, s2_l, a, b)
    (0.3, -0.2, 0.8, 1.1, 4.0, 1.5),
    (-1.0, 0.5, 0.5, 0.3, 2.0, 3.0),       # an upset by a doubtful worker
    (0.0, 0.0, 2.0, 2.0, 9.0, 1.0),        # wide scores, a trusted worker
    (1.5, -1.5, 0.2, 0.4, 1.2, 0.9),
]


def _sig(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _pair_before(mu_w, mu_l, s2_w, s2_l, a, b, kappa=1e-4, kappa2=1e-4):
    """Chen et al.'s update exactly as the specification computed it before the
    quadrature variant (guards omitted: the cases below never trigger them)."""
    import math
    top = max(mu_w, mu_l)
    ew, el = math.exp(mu_w - top), math.exp(mu_l - top)
    p = ew / (ew + el)
    d = ew + el
    c1 = p + 0.5 * (s2_w + s2_l) * ew * el * (el - ew) / (d * d * d)
    c2 = 1.0 - c1
    c1, c2 = max(c1, kappa2), max(c2, kappa2)
    z = c1 + c2
    c1, c2 = c1 / z, c2 / z
    c = (c1 * a + c2 * b) / (a + b)
    E1 = (c1 * (a + 1) * a + c2 * a * b) / (c * (a + b + 1) * (a + b))
    E2 = (c1 * (a + 2) * (a + 1) * a + c2 * (a + 1) * a * b) / (
        c * (a + b + 2) * (a + b + 1) * (a + b))
    a_new = (E1 - E2) * E1 / (E2 - E1 * E1)
    b_new = (E1 - E2) * (1 - E1) / (E2 - E1 * E1)
    psi = ew + el
    Psi = a * ew + b * el
    mw = mu_w + s2_w * (a * ew / Psi - ew / psi)
    ml = mu_l + s2_l * (b * el / Psi - el / psi)
    curv = a * ew * b * el / (Psi * Psi) - ew * el / (psi * psi)
    fw, fl = 1.0 + s2_w * curv, 1.0 + s2_l * curv
    return mw, ml, s2_w * max(fw, kappa), s2_l * max(fl, kappa), a_new, b_new


def test_default_update_is_bit_identical_to_chen_et_al():
    rng = np.random.default_rng(0)
    for _ in range(300):
        mw, ml = rng.normal(0, 1.5, 2)
        sw, sl = rng.uniform(0.05, 2.0, 2)
        a, b = rng.uniform(0.5, 10.0, 2)
        want = _pair_before(mw, ml, sw, sl, a, b)
        assert pair_update(mw, ml, sw, sl, a, b) == want
        assert pair_update(mw, ml, sw, sl, a, b, taylor="paper") == want


@pytest.fixture(scope="module")
def small():
    return simulate("couple", n_items=12, n_workers=3, tasks_per_worker=30, kmax=4, seed=5,
                    setting="amateur").rankings


def _digest(post):
    return hashlib.sha256(b"".join(np.ascontiguousarray(x, dtype="<f8").tobytes()
                                   for x in (post.mu, post.sigma2, post.alpha))).hexdigest()


def test_default_fit_and_ep_are_pinned(small):
    """The one-pass and EP results of the default CrowdBT update, as computed before the
    quadrature variant was added (same data, priors and options; IEEE float64; EP with the
    damping that was its default then)."""
    pri = get_model("crowdbt").worker_priors(build_priors(small), small)
    a = fit_online(small, "crowdbt", pri, progress=False)
    e = fit_ep(small, "crowdbt", pri, passes=4, damping=0.5, progress=False)
    assert _digest(a) == "1be115f79b45b185d6e26b3c3a356751f4c883798270d56820ef7d97d4dfe82e"
    assert _digest(e) == "f71a1dd586b83bfb77ba6f5730facbeaebf49d8db9c3bf417e2ff5c4ffe7ee79"
    assert a.options["taylor"] == "paper"


def _tilted_mc(mu_w, mu_l, s2_w, s2_l, a, b, M=600_000, batches=40, seed=0):
    """Self-normalised importance sampling from the prior: per batch, the tilted moments
    E[λ_w], Var[λ_w], E[λ_l], Var[λ_l], E[η], E[η²]; returns (mean, standard error)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(batches):
        n = M // batches
        lw = rng.normal(mu_w, np.sqrt(s2_w), n)
        ll = rng.normal(mu_l, np.sqrt(s2_l), n)
        eta = rng.beta(a, b, n)
        s = _sig(lw - ll)
        wt = eta * s + (1 - eta) * (1 - s)
        wt /= wt.sum()
        mw, ml = wt @ lw, wt @ ll
        out.append([mw, wt @ (lw - mw) ** 2, ml, wt @ (ll - ml) ** 2, wt @ eta, wt @ eta ** 2])
    out = np.array(out)
    return out.mean(0), out.std(0, ddof=1) / np.sqrt(batches)


def _moments_of(update):
    mw, ml, sw, sl, a, b = update
    m1 = a / (a + b)
    return np.array([mw, sw, ml, sl, m1, m1 * (a + 1) / (a + b + 1)])


@pytest.mark.parametrize("case", [CASES[1]] + [pytest.param(c, marks=pytest.mark.slow)
                                               for c in CASES[2:]])
def test_quadrature_update_is_the_tilted_moments_by_monte_carlo(case):
    got = _moments_of(pair_update(*case, taylor="quadrature"))
    mean, se = _tilted_mc(*case)
    assert np.all(np.abs(got - mean) <= 4.5 * se + 1e-12), (got, mean, se)


def test_monte_carlo_oracle_can_tell_taylor_from_quadrature():
    """The test above can fail: Chen et al.'s expansion on a wide pair is many standard
    errors away from the tilted moments on the scores' variances."""
    case = CASES[2]
    mean, se = _tilted_mc(*case)
    taylor = _moments_of(pair_update(*case))
    assert np.max(np.abs(taylor - mean) / se) > 10


def _exact_one_pair(mu_w, mu_l, s2_w, s2_l, a, b):
    """The exact posterior of one pair ``w > l`` by one worker: scores by 2-D adaptive
    quadrature over (λ_w, λ_l) with η integrated out by hand (the likelihood is linear in
    η: E[η] = a/(a+b)); the accuracy by 1-D quadrature over η with c1 = E[σ(d)] by 1-D
    quadrature over d."""
    import math
    abar = a / (a + b)
    sw, sl = np.sqrt(s2_w), np.sqrt(s2_l)
    lo_w, hi_w = mu_w - 12 * sw, mu_w + 12 * sw
    lo_l, hi_l = mu_l - 12 * sl, mu_l + 12 * sl

    def dens(ll, lw):
        s = 1.0 / (1.0 + math.exp(ll - lw))
        return ((abar * s + (1 - abar) * (1 - s)) * math.exp(
            -0.5 * ((lw - mu_w) / sw) ** 2 - 0.5 * ((ll - mu_l) / sl) ** 2))

    def mom(f):
        return integrate.dblquad(lambda ll, lw: f(lw, ll) * dens(ll, lw), lo_w, hi_w,
                                 lo_l, hi_l, epsabs=1e-12, epsrel=1e-10)[0]

    Z = mom(lambda lw, ll: 1.0)
    Ew, El = mom(lambda lw, ll: lw) / Z, mom(lambda lw, ll: ll) / Z
    Vw = mom(lambda lw, ll: (lw - Ew) ** 2) / Z
    Vl = mom(lambda lw, ll: (ll - El) ** 2) / Z
    sd = np.sqrt(s2_w + s2_l)
    c1 = integrate.quad(lambda d: _sig(d) * stats.norm.pdf(d, mu_w - mu_l, sd),
                        mu_w - mu_l - 14 * sd, mu_w - mu_l + 14 * sd, epsabs=1e-14)[0]

    def eta_mom(k):
        return integrate.quad(lambda e: e ** k * (e * c1 + (1 - e) * (1 - c1))
                              * stats.beta.pdf(e, a, b), 0, 1, epsabs=1e-14)[0]

    Ze = eta_mom(0)
    return np.array([Ew, Vw, El, Vl, eta_mom(1) / Ze, eta_mom(2) / Ze])


@pytest.mark.parametrize("case", CASES[:3])
def test_quadrature_one_pair_is_the_exact_posterior(case):
    """One pair from the prior: ADF by exact moments is the posterior's marginal moments
    (means, variances of both scores; E[η], E[η²]) — to the Gauss–Hermite error."""
    got = _moments_of(pair_update(*case, taylor="quadrature"))
    want = _exact_one_pair(*case)
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)
    # and the paper's expansion is not (it is a second-order approximation)
    assert np.max(np.abs(_moments_of(pair_update(*case)) - want)) > 1e-4


def test_difference_moments_against_scipy():
    S0, S1, S2 = difference_moments(0.7, -0.4, 1.3, 0.9)
    m, sd = 1.1, np.sqrt(2.2)

    def e(f):
        return integrate.quad(lambda z: f(z) * _sig(m + sd * z) * stats.norm.pdf(z), -14, 14,
                              epsabs=1e-14)[0]
    np.testing.assert_allclose([S0, S1, S2], [e(lambda z: 1.0), e(lambda z: z),
                                              e(lambda z: z * z - 1)], rtol=1e-10, atol=1e-13)


def test_quadrature_kernel_equals_spec(small):
    d = small.rank_break()
    rng = np.random.default_rng(4)
    mu, s2 = rng.normal(0, 1, d.n_items), rng.uniform(0.2, 2.0, d.n_items)
    ab = rng.uniform(0.8, 6.0, (d.n_workers, 2))
    pairs, wk = np.asarray(d.order, np.int64), d.worker.astype(np.int64)
    seq = list(range(min(60, d.n_rankings)))
    m1, v1, a1 = mu.copy(), s2.copy(), ab.copy()
    m2, v2, a2 = mu.copy(), s2.copy(), ab.copy()
    c1 = crowdbt_pass_python(pairs, wk, seq, m1, v1, a1, taylor="quadrature")
    counts, err = np.zeros(5, np.int64), np.zeros(3, np.int64)
    rc = kernels.crowdbt_kernel(pairs, wk, np.asarray(seq, np.int64), 0, len(seq), m2, v2, a2,
                                1e-4, 1e-4, False, counts, err, kernels.TAYLOR_CODES["quadrature"])
    assert rc == -1
    for x, y in ((m2, m1), (v2, v1), (a2, a1)):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)
    assert sum(c1.values()) == int(counts.sum())
    assert not np.allclose(m1, mu)


def test_fit_online_and_ep_take_the_quadrature_variant(small):
    pri = get_model("crowdbt").worker_priors(build_priors(small), small)
    q = fit_online(small, "crowdbt", pri, taylor="quadrature", progress=False)
    p = fit_online(small, "crowdbt", pri, progress=False)
    assert q.options["taylor"] == "quadrature" and not np.allclose(q.mu, p.mu)
    # EP's first pass is the one-pass update, bit for bit, with quadrature sites too
    e1 = fit_ep(small, "crowdbt", pri, passes=1, taylor="quadrature", progress=False)
    assert np.array_equal(e1.mu, q.mu) and np.array_equal(e1.alpha, q.alpha)
    # the numba EP pass and the readable one agree with quadrature sites
    from crowdrank.inference.online.api import pairs_sequence
    from crowdrank.inference.online.ep import ep_init, ep_pass
    seq = pairs_sequence(small.lengths, np.arange(small.n_rankings))
    s1 = ep_init(small, "crowdbt", pri, taylor="quadrature")
    s2 = ep_init(small, "crowdbt", pri, taylor="quadrature")
    for _ in range(3):
        ep_pass(s1, seq, 0.0)
        ep_pass(s2, seq, 0.0, python=True)
    np.testing.assert_allclose(s1.post.mu, s2.post.mu, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(s1.post.alpha, s2.post.alpha, rtol=1e-10, atol=1e-12)


def test_one_pair_ep_with_quadrature_sites_stays_exact(small):
    """One unit: every pass's cavity is the prior, so EP keeps the exact one-pair answer."""
    pair = small.subset(np.array([int(np.flatnonzero(small.lengths == 2)[0])]))
    pri = get_model("crowdbt").worker_priors(build_priors(pair), pair)
    a = fit_online(pair, "crowdbt", pri, taylor="quadrature", progress=False)
    e = fit_ep(pair, "crowdbt", pri, passes=5, damping=0.0, tol=1e-12, taylor="quadrature",
               progress=False)
    np.testing.assert_allclose(e.mu, a.mu, atol=1e-12)
    np.testing.assert_allclose(e.sigma2, a.sigma2, rtol=1e-12)
    np.testing.assert_allclose(e.alpha, a.alpha, rtol=1e-12)


def test_taylor_options_per_model(small):
    pri = build_priors(small)
    with pytest.raises(UsageError, match="CrowdBT"):
        fit_online(small, "crowdbt", get_model("crowdbt").worker_priors(pri, small),
                   taylor="full", progress=False)
    for model in ("pl", "bt"):
        with pytest.raises(UsageError, match="Weng"):
            fit_online(small, model, pri, taylor="quadrature", progress=False)


def test_resuming_an_old_crowdbt_state_without_taylor(small):
    """A state saved before the option existed resumes under the default and refuses
    the quadrature variant (it was made with the expansion)."""
    from crowdrank.models.errors import DataError
    pri = get_model("crowdbt").worker_priors(build_priors(small), small)
    first = small.subset(np.arange(20))
    rest = small.subset(np.arange(20, small.n_rankings))
    st = fit_online(first, "crowdbt", pri, progress=False)
    st.options.pop("taylor")
    both = fit_online(rest, "crowdbt", pri, state=st, progress=False)
    whole = fit_online(small, "crowdbt", pri, progress=False)
    assert np.array_equal(both.mu, whole.mu)
    with pytest.raises(DataError, match="taylor"):
        fit_online(rest, "crowdbt", pri, state=st, taylor="quadrature", progress=False)


def test_ep_default_is_undamped_with_a_fallback_after_improper_cavities(small):
    """Damping 0 is the default (measured to reach the damped fixed point, tested in
    tests/test_online_ep.py); a pass that met an improper cavity switches the later passes
    to EP_FALLBACK_DAMPING, and the export names the first damped pass."""
    from crowdrank.inference.online.ep import EP_DAMPING, EP_FALLBACK_DAMPING, pass_damping
    assert EP_DAMPING == 0.0
    clean = [{"pass": 1, "improper_cavities": 0}, {"pass": 2, "improper_cavities": 0}]
    assert pass_damping(0.0, clean) == 0.0
    bad = clean + [{"pass": 3, "improper_cavities": 2}]
    assert pass_damping(0.0, bad) == EP_FALLBACK_DAMPING
    assert pass_damping(0.8, bad) == 0.8            # more damping than the fallback stays
    pri = get_model("couple").worker_priors(build_priors(small), small)
    e = fit_ep(small, "couple", pri, passes=4, tol=1e-12, progress=False)
    ep = e.options["ep"]
    assert ep["damping"] == 0.0 and ep["damping_fallback_pass"] is None
    assert all(x["damping"] == 0.0 for x in ep["per_pass"])
    # a run whose second pass meets an improper cavity: the third pass is damped
    from crowdrank.inference.online.ep import ep_export, ep_init, ep_pass
    st = ep_init(small, "couple", pri)
    seq = np.arange(small.n_rankings)
    ep_pass(st, seq, pass_damping(0.0, st.log))
    it = st.ordr[: st.lengths[0], 0]
    st.site_tau[0, 0] = 2.0 / st.post.sigma2[it[0]]
    ep_pass(st, seq, pass_damping(0.0, st.log))
    assert st.log[-1]["improper_cavities"] >= 1
    ep_pass(st, seq, pass_damping(0.0, st.log))
    assert st.log[-1]["damping"] == EP_FALLBACK_DAMPING
    assert ep_export(st, damping=0.0).options["ep"]["damping_fallback_pass"] == 3


def test_cli_fit_crowdbt_quadrature(tmp_path):
    """``crowdrank fit --model crowdbt --taylor quadrature`` (one-pass and ``--method ep``)
    writes what the API computes."""
    from crowdrank.inference.online import OnlinePosterior
    from crowdrank.models.io import read_data, write_rankings
    from crowdrank.reports.cli import main

    small = simulate("couple", n_items=8, n_workers=2, tasks_per_worker=12, kmax=3, seed=2,
                     setting="amateur").rankings
    path = write_rankings(small, tmp_path / "rk.csv")
    data, _ = read_data(str(path))
    pri = get_model("crowdbt").worker_priors(build_priors(data), data)
    for method, want in (("online", fit_online(data, "crowdbt", pri, taylor="quadrature",
                                               progress=False)),
                         ("ep", fit_ep(data, "crowdbt", pri, passes=3, taylor="quadrature",
                                       progress=False))):
        out = tmp_path / method
        assert main(["fit", str(path), "--model", "crowdbt", "--method", method,
                     "--taylor", "quadrature", "--passes", "3" if method == "ep" else "1",
                     "--no-progress", "--out", str(out)]) == 0
        got = OnlinePosterior.from_json(out / "posterior.json")
        assert got.options["taylor"] == "quadrature"
        assert np.array_equal(got.mu, want.mu) and np.array_equal(got.alpha, want.alpha)
