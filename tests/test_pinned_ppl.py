"""The PPL models' recorded ``eta`` site, pinned against the prior's closed-form mean.

Under the default coordinates (``simplex="gamma"``, docs/design.md, Sampling) the worker
parameter ``η`` is a *deterministic* site built from Gamma draws; the likelihood uses
``log η`` directly, so a wrong ``eta`` site (e.g. CrowdBT's ``1 − η`` recorded as the
accuracy) changes neither the density nor its gradient, only what the user reads. Forward
draws of the model's prior give ``η ~ Beta(a, b)`` (CrowdBT) or ``Dirichlet(α)`` (COUPLE)
exactly ([MT00]'s boost included), so the sample mean must be the closed-form mean,
``a/(a + b)`` or ``α/Σα``, within 5 Monte Carlo standard errors.
"""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.models.data import Rankings
from crowdrank.models.model_inputs import model_inputs
from crowdrank.models.priors import Priors

N = 4000
# CrowdBT reads (a, b) = (α_1, α_2); worker w2's 0.4 < 1 goes through the boosted Gammas
ALPHA = {"w1": [9.0, 1.0, 2.0], "w2": [0.4, 3.0, 1.0]}


def _data_priors():
    d = Rankings.from_lists([["a", "b", "c"], ["b", "c"], ["c", "a"]], ["w1", "w2", "w1"])
    return d, Priors.explicit(ALPHA, mu0=0.0, sigma0=1.0)


def _expect(model):
    a = np.array([ALPHA["w1"], ALPHA["w2"]])
    if model == "crowdbt":
        a = a[:, :2]
        mean = a[:, 0] / a.sum(1)
    else:
        mean = a / a.sum(1, keepdims=True)
    a0 = a.sum(1, keepdims=True) if model != "crowdbt" else a.sum(1)
    var = mean * (1 - mean) / (a0 + 1)
    return mean, np.sqrt(var / N)


def _check(draws, model):
    mean, se = _expect(model)
    assert draws.shape[1:] == mean.shape
    np.testing.assert_array_less(np.abs(draws.mean(0) - mean), 5 * se)


@pytest.mark.parametrize("model", ["crowdbt", "couple"])
def test_pymc_eta_site_has_the_prior_mean(model):
    pm = pytest.importorskip("pymc")
    from crowdrank.models import pymc_models as pmm

    d, pri = _data_priors()
    m = pmm.build_model(model_inputs(model, d, pri), d.items, d.workers)
    _check(np.asarray(pm.draw(m["eta"], draws=N, random_seed=1)), model)


@pytest.mark.parametrize("model", ["crowdbt", "couple"])
def test_numpyro_eta_site_has_the_prior_mean(model):
    jax = pytest.importorskip("jax")
    from numpyro.infer import Predictive

    from crowdrank.models import numpyro_models as npm

    d, pri = _data_priors()
    inp = model_inputs(model, d, pri)
    with jax.enable_x64(True):
        out = Predictive(npm.model, num_samples=N)(jax.random.PRNGKey(1), inp,
                                                   prior_only=True)
    _check(np.asarray(out["eta"]), model)
