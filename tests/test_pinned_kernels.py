"""The numba kernels pinned where mutation testing found them loose.

The kernels are checked against the readable specifications update by update elsewhere
(tests/test_online_kernels.py); these tests pin what those comparisons do not reach: the
strict-mode error of a kernel names the stage of [Pan18]'s Algorithm 1 (stages ``1..k−1``,
processed in reverse, so the first stage processed of a k = 3 ranking is stage 2) for a
``μ`` that overflows, as docs/design.md (Online, Guards) describes.
"""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.inference.online import OnlineError, fit_online
from crowdrank.models.data import Rankings
from crowdrank.models.priors import Priors


@pytest.mark.parametrize("alpha,stage", [([50.0, 1.0, 1.0], 2), ([1.0, 1.0, 50.0], 1)])
def test_strict_mu_overflow_names_the_stage(alpha, stage):
    """Scores at 1.7e308 with σ² = 1e308: the winner's ``μ + σ²·(…)`` overflows to ``inf``.
    Which stage breaks first depends on the worker's α: with α = (50, 1, 1) the first stage
    processed (stage 2), with (1, 1, 50) the second (stage 1): a stage reported 0-based, or
    in processing order, fails one of the two cases."""
    d = Rankings.from_lists([["a", "b", "c"]], ["w"])
    pri = Priors.explicit({"w": alpha}, mu0=1.7e308, sigma0=1e154)
    post = fit_online(d, "couple", pri, progress=False)
    assert post.clamped["mu"] > 0 and np.all(np.isfinite(post.mu))
    with pytest.raises(OnlineError, match=rf"stage {stage}\): mu became non-finite"):
        fit_online(d, "couple", pri, progress=False, strict=True)


@pytest.mark.parametrize("kernel", ["pl_kernel", "bt_kernel"])
def test_weng_lin_kernel_reports_the_failing_position(kernel):
    """The kernels' contract (module docstring): in strict mode the return value and
    ``err[0]`` are the position in ``seq`` of the ranking that failed, ``err[1]`` the code
    of the quantity (:data:`crowdrank.inference.online.guards.CODES`). Ranking 0 is harmless, ranking
    1 meets an item with ``σ² = inf`` (``Ω = σ²/c · …`` is NaN), processed at position 2 of
    ``seq``; the rankings before it were written back."""
    from crowdrank.inference.online import kernels
    from crowdrank.inference.online.guards import CODES

    order = np.array([[0, 2, 0], [1, 3, 1]], dtype=np.int64)      # columns: rankings
    lengths = np.array([2, 2, 2], dtype=np.int64)
    seq = np.array([0, 2, 1], dtype=np.int64)
    mu = np.zeros(4)
    s2 = np.array([1.0, 1.0, np.inf, 1.0])
    counts = np.zeros(5, dtype=np.int64)
    err = np.full(3, -7, dtype=np.int64)
    bad = getattr(kernels, kernel)(order, lengths, seq, 0, 3, mu, s2, 0.5, 1e-4, 0.0, 0, 0.0,
                                   True, counts, err)
    assert bad == 2
    assert err[0] == 2 and err[1] == CODES["mu"]
    assert mu[0] > 0 > mu[1]            # rankings 0 and 2 (item 0 over item 1) went through
    assert not counts.any()


def test_crowdbt_strict_alpha_failure_is_stage_1():
    """A CrowdBT pair is one stage: a worker's Beta update that overflows (a = b = 1e300)
    is reported as stage 1, with the source ranking and worker."""
    d = Rankings.from_lists([["a", "b"], ["a", "b", "c"]], ["w1", "w2"])
    pri = Priors.explicit({"w1": [1.0, 2.0], "w2": [1e300, 1e300]})
    with pytest.raises(OnlineError,
                       match=r"ranking 1 \(worker 'w2', pass 1, stage 1\): alpha became"):
        fit_online(d, "crowdbt", pri, progress=False, strict=True)


def test_crowdbt_kernel_counts_each_kappa_floor():
    """One pair, equal scores (``e_w = e_l = 1``), worker Beta(9, 1), σ² = 1e4. By hand
    ([Chen13]'s variance update as in docs/design.md): ``Ψ = a + b = 10``, ``ψ = 2``,
    ``curv = ab/Ψ² − 1/ψ² = 0.09 − 0.25 = −0.16``, so both factors ``1 + σ²·curv`` are far
    below κ = 1e-4: both variances become ``σ² κ = 1`` and the floor is counted twice."""
    d = Rankings.from_lists([["a", "b"]], ["w"])
    pri = Priors.explicit({"w": [9.0, 1.0]}, sigma0=100.0)
    post = fit_online(d, "crowdbt", pri, progress=False)
    curv = 9.0 * 1.0 / 10.0 ** 2 - 1.0 / 2.0 ** 2
    assert 1.0 + 1e4 * curv < 1e-4
    np.testing.assert_allclose(post.sigma2, [1e4 * 1e-4] * 2, rtol=1e-12)
    assert post.clamped["kappa"] == 2


def test_gbmm_strict_alpha_failure_names_the_first_stage_processed():
    """α = (1e300, 1e300, 1): the moments of Eq. (9) overflow in any stage whose candidates
    use α_1 and α_2. Stages run in reverse, so a k = 3 ranking breaks in stage 2 (two
    candidates, α_1 and α_2), before stage 1 is reached."""
    d = Rankings.from_lists([["a", "b", "c"]], ["w1"])
    pri = Priors.explicit({"w1": [1e300, 1e300, 1.0]})
    with pytest.raises(OnlineError,
                       match=r"ranking 0 \(worker 'w1', pass 1, stage 2\): alpha became"):
        fit_online(d, "couple", pri, progress=False, strict=True)
