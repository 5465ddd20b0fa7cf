"""NumPyro's and PyMC's ADVI on the same data and priors agree (the other PPL as oracle).

Both fit a mean-field Gaussian on the same unconstrained coordinates (BT, ``level="iid"``:
λ itself), so both optimise the same ELBO and must reach the same optimum; what differs is
the optimiser's stochastic noise, bounded here by running both to their step caps with
several draws per gradient. Tolerances: 0.05 on means (posterior sds ~0.4) and 10 % on sds.
Also the registry entries and the written ``posterior.nc`` (the NUTS layout).
"""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def problem():
    data = simulate("bt", n_items=4, n_workers=2, tasks_per_worker=40, seed=11).rankings
    return data, Priors.geometric(data.workers, K=2, a0=10, a=3)


def test_numpyro_and_pymc_advi_agree(problem):
    from crowdrank.inference.approx import fit_approx

    data, priors = problem
    kw = {"level": "iid", "draws": 4000, "max_steps": 10000, "elbo_tol": 1e-9,
          "particles": 8, "learning_rate": 0.02, "progress": False, "seed": 4}
    a = fit_approx(data, "bt", priors, "advi", backend="numpyro", **kw)
    b = fit_approx(data, "bt", priors, "advi", backend="pymc", **kw)
    ma, sa = a.lam.mean(0), a.lam.std(0)
    mb, sb = b.lam.mean(0), b.lam.std(0)
    np.testing.assert_allclose(ma, mb, atol=0.05)
    np.testing.assert_allclose(sa, sb, rtol=0.10)
    assert a.khat is not None and np.isfinite(b.khat)
    # PyMC's log p, the density its k̂ reads, is the exact log joint: in these coordinates
    # (λ itself, no Jacobian) the NumPy reference likelihood plus scipy's prior
    from scipy import stats

    from crowdrank.models.likelihood import loglik

    for s in (0, 1234, 3999):
        ref = loglik("bt", data, b.lam[s], None) + stats.norm.logpdf(
            b.lam[s], priors.mu0, priors.sigma0).sum()
        assert b.log_p[s] == pytest.approx(ref, rel=1e-9, abs=1e-8)
    np.testing.assert_allclose(b.z, b.lam, atol=1e-12)      # z is λ in these coordinates


def test_registry_entry_writes_the_nuts_layout(problem, tmp_path):
    from crowdrank.inference import methods
    from crowdrank.inference.posterior_io import read_posterior, write_posterior

    data, priors = problem
    m = methods.get("laplace-ppl")
    post = m.run(data, "bt", priors, m.options(draws=200))
    assert post.diagnostics["psis_label"] in ("good", "ok", "not reliable")
    write_posterior(post, tmp_path)
    back = read_posterior(tmp_path / "posterior.nc")
    lam = back.tree["posterior"]["lambda"]
    assert lam.dims == ("chain", "draw", "item")
    assert [str(i) for i in lam["item"].values] == list(data.items)
    with pytest.raises(Exception, match="NumPyro"):
        m.run(data, "bt", priors, m.options(backend="pymc"))
