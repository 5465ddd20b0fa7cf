"""Each model's masked log-likelihood written once, for both PPLs.

A model's exported functions of arrays (:mod:`crowdrank.models.numpyro.arrays`,
:mod:`crowdrank.models.pymc_arrays`) score a padded ``(n, K)`` table of orders: ``x`` the
scores ``λ`` gathered at the orders, ``valid`` the real positions, ``log_w`` the rows'
worker table (or ``None``). The model's form is one function

    f(ops, x, valid, log_w, K) -> (n,)

named by its entry (``ModelSpec.array_loglik``), where ``ops`` is the PPL's array
namespace: :data:`crowdrank.models.numpyro.arrays.JAX_OPS` (``jax.numpy``) or
:data:`crowdrank.models.pymc_arrays.PYTENSOR_OPS` (``pytensor.tensor``). Each namespace
has the elementwise operations (``where``, ``sum``, ``exp``, ``log_sigmoid``,
``logaddexp``) and the three masked building blocks that each PPL computes its own way
(``pl``: Plackett–Luce's stages, [Pan18] Eq. 1; ``couple``: COUPLE's stages, Eq. 3-4;
``normalizer``: ``log Σ Eq. 4`` over each row's orderings). So a model that rescales the
scores, mixes pairs or subtracts a normaliser is written here once and both PPLs run the
same operations they ran when each had its own copy (tests/test_ppl_contract.py compares
them with the NumPy reference and with each other).

NumPy only (``np.triu_indices``): importing this module pulls in neither JAX nor PyTensor.
"""

from __future__ import annotations

import numpy as np


def _pairs(ops, x, valid, log_w, K):
    """BT (``log_w`` None), or CrowdBT [Chen13] with ``log_w`` ``(n, 2)`` =
    ``[log η, log(1 − η)]`` of each row's worker, summed over the row's rank-broken pairs
    (positions ``a < b``; [Pan18], Lemma 1)."""
    a, b = np.triu_indices(K, 1)
    d = x[:, a] - x[:, b]
    ll = ops.log_sigmoid(d) if log_w is None else ops.logaddexp(
        log_w[:, :1] + ops.log_sigmoid(d), log_w[:, 1:2] + ops.log_sigmoid(-d))
    return ops.sum(ops.where(valid[:, b], ll, 0.0), axis=1)


def pl(ops, x, valid, log_w, K):
    """Plackett–Luce ([Pan18], Eq. 1)."""
    return ops.pl(x, valid, K)


def bt(ops, x, valid, log_w, K):
    """Bradley–Terry on the rank-broken pairs [BT52]."""
    return _pairs(ops, x, valid, None, K)


def crowdbt(ops, x, valid, log_w, K):
    """CrowdBT on the rank-broken pairs: each pair's order, or its reverse with
    probability ``1 − η`` [Chen13]."""
    return _pairs(ops, x, valid, log_w, K)


def couple(ops, x, valid, log_w, K):
    """Stagewise COUPLE ([Pan18], Eq. 3-4) with ``log_w`` = ``log η`` of each row's worker."""
    return ops.couple(x, valid, log_w, K)


def couple_normalized(ops, x, valid, log_w, K):
    """COUPLE divided by its sum over each row's orderings ([Pan18], Eq. 4)."""
    return ops.couple(x, valid, log_w, K) - ops.normalizer(x, valid, log_w, K)


def peergrader(ops, x, valid, log_w, K):
    """PeerGrader [Raman14]: Plackett–Luce on the reliability-scaled scores ``η_g·λ``."""
    return ops.pl(x * ops.exp(log_w)[:, None], valid, K)
