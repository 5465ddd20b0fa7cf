"""The NumPyro default start of a model with CrowdBT's mirror symmetry
(``(λ, η) → (−λ, 1 − η)`` leaves the likelihood unchanged; only the prior on ``η`` tells the
two modes apart): its chains must all find the mode the prior favours, not one of them the
mirror mode (``crowdrank.inference.nuts.numpyro.default_start``)."""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.inference.nuts import fit_nuts
from crowdrank.inference.nuts.numpyro import default_start, mirror_symmetric
from crowdrank.models.model_inputs import model_inputs
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate


def _inputs(model, kmax):
    d = simulate("couple", n_items=6, n_workers=2, tasks_per_worker=5, kmax=kmax,
                 seed=1).rankings
    return model_inputs(model, d, Priors.geometric(d.workers, 2 if model == "crowdbt"
                                                   else d.K))


def test_which_models_are_mirror_symmetric_and_how_they_start():
    """CrowdBT always; COUPLE only when every ranking is a pair (it is then CrowdBT);
    PL (no worker parameter) and PeerGrader (a precision, not an accuracy) never. The
    symmetric ones start at the prior median (NumPyro's ``init_to_median``), the others
    from NumPyro's uniform start."""
    from numpyro.infer import init_to_median, init_to_uniform

    cases = {("crowdbt", 4): True, ("couple", 2): True, ("couple", 4): False,
             ("couple-normalized", 2): True, ("pl", 2): False, ("peergrader", 2): False}
    for (model, kmax), symmetric in cases.items():
        inp = _inputs(model, kmax)
        assert mirror_symmetric(inp) is symmetric, (model, kmax)
        start = default_start(inp)
        assert start.func is (init_to_median if symmetric else init_to_uniform), (model, kmax)


@pytest.mark.slow
def test_crowdbt_chains_from_the_default_start_share_the_favoured_mode():
    """The default audit's data under the geometric prior, 4 chains, seed 0: from NumPyro's
    uniform start one chain of four settled in the mirror mode (centred scores' chain means
    correlated −1 with the others', log density ~14 lower; also seed 1, at every warm-up
    length from 25 to 300). Every chain's centred scores must correlate positively with
    every other's, and their mean log densities lie within 4 of each other."""
    from crowdrank.validation.pipelines.audit import default_subject

    d = default_subject().data
    pr = Priors.geometric(d.workers, d.K, a0=10, a=6).for_data(d, K=2)
    r = fit_nuts(d, "crowdbt", pr, chains=4, tune=100, draws=150, seed=0, progress=False,
                 pointwise=False, predictive=False)
    lam = r.idata["posterior"]["lambda"].values.mean(axis=1)
    lam = lam - lam.mean(axis=1, keepdims=True)
    assert np.min(np.corrcoef(lam)) > 0.9, np.round(np.corrcoef(lam), 2)
    lp = r.idata["sample_stats"]["lp"].values.mean(axis=1)
    assert np.ptp(lp) < 4.0, lp


@pytest.mark.slow
def test_batched_crowdbt_lanes_start_as_fit_nuts_and_share_the_favoured_mode():
    """``crowdrank sbc``'s vmapped NUTS (``fit_nuts_batched``) starts a mirror-symmetric
    model as ``fit_nuts`` does. The default audit's data under the geometric prior, one
    data set, 4 chains, seed 2: from the uniform start (planted: ``mirror_symmetric``
    answering False) one chain settles in the mirror mode (centred scores' chain means
    correlated −0.99 with the others'); from the prior median every pair of chains
    correlates positively. In an SBC batch such a chain failed its replicate's gate and,
    its trajectories long, held 199 other lanes back (docs/sbc.md, "The slowest lane")."""
    from crowdrank.inference.nuts.batched import fit_nuts_batched
    from crowdrank.validation.pipelines.audit import default_subject

    d = default_subject().data
    pr = Priors.geometric(d.workers, d.K, a0=10, a=6).for_data(d, K=2)
    (out,) = fit_nuts_batched([d], "crowdbt", pr, seeds=[2], chains=4, tune=100, draws=150)
    lam = np.asarray(out["posterior"]["lambda"]).mean(axis=1)
    lam = lam - lam.mean(axis=1, keepdims=True)
    assert np.min(np.corrcoef(lam)) > 0.9, np.round(np.corrcoef(lam), 2)
