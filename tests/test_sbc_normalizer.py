"""The normalised-COUPLE normaliser of both PPLs (``couple_log_normalizer``): the fast form
(one gather per task, orderings as static reorderings, stage ratios in linear space)
against an independent brute force over the ``k!`` orderings in plain Python, and against
the log-space gathered form, in value and gradient, including the paper's tiny
concentrations (an η entry of 1e-300 and one that underflows double precision in linear
space) and a wide spread of scores."""

from __future__ import annotations

import math
from itertools import permutations

import numpy as np
import pytest

from crowdrank.models.model_inputs import PermGroup


def _bf_stage_product(lam, log_eta, order):
    """Eq. 4 of one ordering with exact rationals of ``log η`` handled in log space."""
    k = len(order)
    logp = 0.0
    for i in range(k - 1):
        m = k - i
        lc = np.logaddexp.reduce(log_eta[:m])
        den = math.log(sum(math.exp(lam[r]) for r in order[i:]))
        terms = [log_eta[t] - lc + lam[order[i + t]] - den for t in range(m)]
        logp += float(np.logaddexp.reduce(terms))
    return logp


def bf_log_normalizer(lam, log_eta, rho):
    return float(np.logaddexp.reduce([_bf_stage_product(lam, log_eta, list(o))
                                      for o in permutations(rho)]))


def _case(seed, k, n=5, L=8, W=3, spread=1.3, tiny=False):
    rng = np.random.default_rng([seed, k])
    lam = rng.normal(0, spread, L)
    log_eta = np.log(rng.dirichlet(np.full(k, 0.8), size=W))
    if tiny:   # the paper's alpha_4 = 0.0077: entries far below double precision
        log_eta[0, -1] = -800.0
        log_eta[1, -1] = math.log(1e-300)
        log_eta[2, 0] = -50.0
        log_eta = log_eta - np.logaddexp.reduce(log_eta, axis=1, keepdims=True)
    index = np.stack([rng.permutation(L)[:k] for _ in range(n)], axis=1)   # (k, n)
    worker = rng.integers(0, W, n)
    group = PermGroup(k, 0, n, np.array(list(permutations(range(k))), np.int32))
    want = [bf_log_normalizer(lam, log_eta[worker[j]], index[:, j].tolist())
            for j in range(n)]
    return lam, log_eta, index.astype(np.int32), worker.astype(np.int32), group, want


SLOW = pytest.mark.slow      # k = 4: 24 orderings unrolled, tens of seconds to compile
CASES = [{"k": 3, "tiny": True, "spread": 4.0}, {"k": 3},
         pytest.param({"k": 4}, marks=SLOW), pytest.param({"k": 4, "tiny": True}, marks=SLOW),
         pytest.param({"k": 4, "spread": 6.0}, marks=SLOW)]


@pytest.mark.parametrize("case", CASES)
def test_numpyro_normalizer_brute_force_and_gathered(case):
    import jax
    import jax.numpy as jnp

    from crowdrank.models import numpyro_models as npm

    jax.config.update("jax_enable_x64", True)
    try:
        lam, log_eta, index, worker, group, want = _case(1, **case)

        def total(fn):
            def f(lam, le):
                lc = jax.lax.cumlogsumexp(le, axis=1)
                return fn(lam, le, lc, index, worker, group)
            return f

        @jax.jit
        def both(lam, le):
            out = []
            for fn in (npm.couple_log_normalizer, npm.couple_log_normalizer_gathered):
                f = total(fn)
                out += [f(lam, le), jax.grad(lambda *a, f=f: f(*a).sum(), (0, 1))(lam, le)]
            return out

        z_new, g_new, z_old, g_old = both(jnp.asarray(lam), jnp.asarray(log_eta))
        np.testing.assert_allclose(np.asarray(z_new), want, rtol=1e-11, atol=1e-11)
        np.testing.assert_allclose(np.asarray(z_old), want, rtol=1e-11, atol=1e-11)
        # gradients (λ and log η) equal to the log-space gathered form's, all finite
        for a, b in zip(g_new, g_old):
            assert np.all(np.isfinite(np.asarray(a)))
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-12)
    finally:
        jax.config.update("jax_enable_x64", False)


@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[3]])
def test_pymc_normalizer_brute_force_and_gathered(case):
    import pytensor
    import pytensor.tensor as pt

    from crowdrank.models import pymc_models as pmm

    lam, log_eta, index, worker, group, want = _case(2, **case)
    lam_v, le_v = pt.dvector("lam"), pt.dmatrix("le")
    lc_v = pmm._cumlogsumexp(le_v, log_eta.shape[1])
    outs = []
    for fn in (pmm.couple_log_normalizer, pmm.couple_log_normalizer_gathered):
        z = fn(lam_v, le_v, lc_v, index, worker, group)
        outs += [z, pytensor.grad(z.sum(), lam_v), pytensor.grad(z.sum(), le_v)]
    # the graph as written, run node by node in Python: no C compilation of these large
    # graphs (and no rewrites merging > 32 operands, which the Python Elemwise refuses)
    mode = pytensor.compile.mode.Mode(linker="py", optimizer=None)
    with pytensor.config.change_flags(cxx=""):   # the inner graphs too: no gcc at all
        vals = pytensor.function([lam_v, le_v], outs, mode=mode)(lam, log_eta)
    np.testing.assert_allclose(vals[0], want, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(vals[1], vals[4], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(vals[2], vals[5], rtol=1e-9, atol=1e-12)


def test_normalizer_test_can_fail():
    """The brute force tells orderings apart: dropping one ordering from the sum (a
    deliberately wrong normaliser) moves it by more than the tolerance."""
    lam, log_eta, index, worker, _, want = _case(3, k=3)
    j = 0
    orders = list(permutations(index[:, j].tolist()))
    partial = float(np.logaddexp.reduce([_bf_stage_product(lam, log_eta[worker[j]],
                                                           list(o)) for o in orders[1:]]))
    assert abs(partial - want[j]) > 1e-3
