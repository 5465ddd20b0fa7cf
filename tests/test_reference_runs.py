"""Sampler options used by the trusted references (bench/bench_reference.py): a dense mass
matrix in both back-ends, and PyMC's warm-up/sampling time split (measured from the
draws' callback, not left NaN)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from crowdrank.inference import nuts
from crowdrank.inference.nuts import pymc as nuts_pymc
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate


def _tiny():
    d = simulate("couple", n_items=6, n_workers=2, tasks_per_worker=10, kmax=3, seed=1).rankings
    return d, Priors.geometric(d.workers, d.K)


def test_pymc_dense_potential_is_seeded_with_the_diagonal_variances():
    pytest.importorskip("pymc")
    from pymc.step_methods.hmc.quadpotential import QuadPotentialFullAdapt

    from crowdrank.models import pymc_models as pmm
    from crowdrank.models.model_inputs import model_inputs

    d, pr = _tiny()
    inputs = model_inputs("couple", d, pr)
    model = pmm.build_model(inputs)
    rng = np.random.default_rng(0)
    lam = rng.normal(0.0, 2.0, size=(400, 6))
    leta = np.log(rng.dirichlet([5.0, 2.0, 1.0], size=(400, 2)))
    _, values = nuts.pymc_initvals(inputs, (lam, leta), None, 2, rng,
                                   {"simplex": "gamma", "level": "centered"})
    diag = nuts_pymc._pymc_mass(model, values)
    full = nuts_pymc._pymc_mass(model, values, dense=True)
    assert isinstance(full, QuadPotentialFullAdapt)
    cov = np.asarray(full._cov)
    np.testing.assert_allclose(np.diag(cov), diag._var, rtol=1e-12)
    assert np.count_nonzero(cov - np.diag(np.diag(cov))) == 0


def test_numpyro_dense_mass_gets_a_full_seeded_inverse_mass(monkeypatch):
    """With an approximation and dense_mass, NUTS receives dense_mass=True and a 2-D inverse
    mass matrix whose diagonal is the approximation's variances (the diagonal run's 1-D
    vector); the spy stops the run before any sampling."""
    import numpyro.infer

    seen = {}

    class Stop(Exception):
        pass

    def spy(*a, **kw):
        seen.setdefault("runs", []).append(kw)
        raise Stop

    monkeypatch.setattr(numpyro.infer, "NUTS", spy)
    d, pr = _tiny()
    from crowdrank.inference.online import fit_online
    on = fit_online(d, "couple", pr, progress=False)
    for dense in (False, True):
        with pytest.raises(Stop):
            nuts.fit_nuts(d, "couple", pr, chains=2, tune=10, draws=10, approx=on, seed=3,
                          progress=False, dense_mass=dense)
    diag_kw, dense_kw = seen["runs"]
    assert diag_kw["dense_mass"] is False and dense_kw["dense_mass"] is True
    v = np.asarray(diag_kw["inverse_mass_matrix"])
    m = np.asarray(dense_kw["inverse_mass_matrix"])
    assert v.ndim == 1 and m.shape == (v.size, v.size)
    np.testing.assert_allclose(np.diag(m), v, rtol=0, atol=0)


@pytest.mark.slow
def test_pymc_reports_its_warmup_time_and_gradients():
    """The split is real: both phases finite and positive, within the run's total, and the
    warm-up's leapfrog count at least one per tuning iteration of each chain."""
    pytest.importorskip("pymc")
    from crowdrank.inference.online import fit_online

    d, pr = _tiny()
    on = fit_online(d, "couple", pr, progress=False)
    r = nuts.fit_nuts(d, "couple", pr, backend="pymc", chains=2, tune=40, draws=20,
                      approx=on, progress=False, pointwise=False, predictive=False)
    t = r.timings
    assert math.isfinite(t["warmup"]) and t["warmup"] > 0
    assert math.isfinite(t["sampling"]) and t["sampling"] > 0
    assert t["warmup"] + t["sampling"] <= t["total"] + 1e-6
    assert t["warmup_gradients"] >= 2 * 40
    n_steps = np.asarray(r.idata["sample_stats"]["n_steps"])
    assert t["sampling_gradients"] == pytest.approx(float(n_steps.sum()))
