"""The numba kernels equal the readable stage updates (the specification) to 1e-12.

Compared per update (both start every ranking from the same state, so rounding cannot
accumulate) and on short prefixes (a continuous run of a few dozen rankings).
"""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.inference.online import kernels
from crowdrank.inference.online.crowdbt import crowdbt_pass_python
from crowdrank.inference.online.gbmm import gbmm_pass_python
from crowdrank.inference.online.state import CLAMP_KEYS
from crowdrank.inference.online.wenglin import wl_pass_python
from crowdrank.models.simulate import simulate

RTOL, ATOL = 1e-12, 1e-13


def _data(seed=0, kmax=5, n=60):
    sim = simulate("couple", n_items=12, n_workers=3, tasks_per_worker=n // 3, kmax=kmax,
                   seed=seed)
    return sim.rankings


def _state(rng, L, W, K, spread=2.0):
    mu = rng.normal(0, spread, L)
    s2 = np.exp(rng.uniform(np.log(1e-3), np.log(5.0), L))
    alpha = np.exp(rng.uniform(np.log(0.05), np.log(50.0), (W, K)))
    return mu, s2, alpha


def _counts_dict(c):
    return dict(zip(CLAMP_KEYS, (int(x) for x in c)))


def _run_gbmm_kernel(d, seq, mu, s2, alpha, taylor, score_alpha, kappa=1e-4, kappa2=1e-4):
    counts = np.zeros(5, np.int64)
    err = np.zeros(3, np.int64)
    order = np.asarray(d.order, np.int64)
    seq = np.asarray(seq, np.int64)
    rc = kernels.gbmm_kernel(order, d.lengths.astype(np.int64), d.worker.astype(np.int64), seq,
                             0, len(seq), mu, s2, alpha, kernels.TAYLOR_CODES[taylor],
                             score_alpha == "prior", kappa, kappa2, False, counts, err)
    assert rc == -1
    return _counts_dict(counts)


@pytest.mark.parametrize("taylor", ["paper", "full", "plugin"])
@pytest.mark.parametrize("score_alpha", ["updated", "prior"])
def test_gbmm_kernel_equals_spec_per_update_and_prefix(taylor, score_alpha):
    d = _data(seed=1)
    rng = np.random.default_rng(2)
    mu, s2, alpha = _state(rng, d.n_items, d.n_workers, d.K)
    # per update: same starting state for every ranking
    for n in range(d.n_rankings):
        m1, v1, a1 = mu.copy(), s2.copy(), alpha.copy()
        m2, v2, a2 = mu.copy(), s2.copy(), alpha.copy()
        gbmm_pass_python(d.order, d.lengths, d.worker, [n], m1, v1, a1, taylor=taylor,
                         score_alpha=score_alpha)
        _run_gbmm_kernel(d, [n], m2, v2, a2, taylor, score_alpha)
        np.testing.assert_allclose(m2, m1, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(v2, v1, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(a2, a1, rtol=RTOL, atol=ATOL)
        assert not np.array_equal(m1, mu)          # the update did something
    # a short continuous prefix, counters included
    m1, v1, a1 = mu.copy(), s2.copy(), alpha.copy()
    m2, v2, a2 = mu.copy(), s2.copy(), alpha.copy()
    seq = list(range(30))
    c1 = gbmm_pass_python(d.order, d.lengths, d.worker, seq, m1, v1, a1, taylor=taylor,
                          score_alpha=score_alpha)
    c2 = _run_gbmm_kernel(d, seq, m2, v2, a2, taylor, score_alpha)
    np.testing.assert_allclose(m2, m1, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(v2, v1, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(a2, a1, rtol=RTOL, atol=ATOL)
    assert c1 == c2


def test_crowdbt_kernel_equals_spec():
    d = _data(seed=3).rank_break()
    rng = np.random.default_rng(4)
    mu, s2, alpha = _state(rng, d.n_items, d.n_workers, 2)
    pairs = np.asarray(d.order, np.int64)
    wk = d.worker.astype(np.int64)
    for seq in [[n] for n in range(0, d.n_rankings, 3)] + [list(range(40))]:
        m1, v1, a1 = mu.copy(), s2.copy(), alpha.copy()
        m2, v2, a2 = mu.copy(), s2.copy(), alpha.copy()
        c1 = crowdbt_pass_python(pairs, wk, seq, m1, v1, a1)
        counts, err = np.zeros(5, np.int64), np.zeros(3, np.int64)
        rc = kernels.crowdbt_kernel(pairs, wk, np.asarray(seq, np.int64), 0, len(seq), m2, v2,
                                    a2, 1e-4, 1e-4, False, counts, err,
                                    kernels.TAYLOR_CODES["paper"])
        assert rc == -1
        for x, y in ((m2, m1), (v2, v1), (a2, a1)):
            np.testing.assert_allclose(x, y, rtol=RTOL, atol=ATOL)
        assert _counts_dict(counts) == c1


@pytest.mark.parametrize("model", ["pl", "bt"])
@pytest.mark.parametrize("gamma", ["sigma/c", "1/k", 0.7])
def test_wenglin_kernels_equal_spec(model, gamma):
    d = _data(seed=5)
    rng = np.random.default_rng(6)
    mu, s2, _ = _state(rng, d.n_items, 1, 2)
    order = np.asarray(d.order, np.int64)
    lengths = d.lengths.astype(np.int64)
    gmode = kernels.GAMMA_CODES.get(gamma, 2) if isinstance(gamma, str) else 2
    gconst = 0.0 if gmode != 2 else float(gamma)
    kern = kernels.pl_kernel if model == "pl" else kernels.bt_kernel
    for seq in [[n] for n in range(0, d.n_rankings, 2)] + [list(range(40))]:
        m1, v1 = mu.copy(), s2.copy()
        m2, v2 = mu.copy(), s2.copy()
        c1 = wl_pass_python(model, order, lengths, seq, m1, v1, beta=0.4, kappa=1e-4,
                            tau=0.05, gamma=gamma)
        counts, err = np.zeros(5, np.int64), np.zeros(3, np.int64)
        rc = kern(order, lengths, np.asarray(seq, np.int64), 0, len(seq), m2, v2, 0.4, 1e-4,
                  0.05, gmode, gconst, False, counts, err)
        assert rc == -1
        np.testing.assert_allclose(m2, m1, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(v2, v1, rtol=RTOL, atol=ATOL)
        assert _counts_dict(counts) == c1
