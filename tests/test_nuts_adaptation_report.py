"""The adapted-sampler report of :func:`crowdrank.inference.nuts.fit_nuts` (``NutsResult.adaptation``).

It is what located the medium-scale NumPyro failure (``docs/notes.md``, "The medium
references"): per unconstrained coordinate, the adapted inverse mass beside each chain's
posterior variance. Checked against independent figures of the same run: the step size
NumPyro reports per draw, and the per-chain variance of the score level ``mean(λ)`` (the
``lambda_mean`` coordinate is the identity transform of it), which a misaligned name or a
wrong flattening order would not reproduce.
"""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.inference.nuts import coordinate_names, fit_nuts
from crowdrank.models.model_inputs import boost_split, model_inputs
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate

#: the run of both sampling tests: the same data, seed, warm-up and draws, so the first
#: test's warm-up-and-draws program is the second's first round (one compile for both,
#: through the test run's compilation cache, tests/conftest.py)
ROUND = {"chains": 2, "tune": 150, "draws": 60, "seed": 2, "progress": False,
         "pointwise": False, "predictive": False, "chain_method": "vectorized"}


def _tiny():
    d = simulate("couple", setting="amateur", n_items=6, n_workers=3, tasks_per_worker=40,
                 kmax=4, seed=5).rankings
    return d, Priors.geometric(d.workers, d.K, a0=10, a=6)


def test_coordinate_names_follow_numpyros_flattening():
    d, pr = _tiny()
    inputs = model_inputs("couple", d, pr)
    boost = np.zeros(inputs.alpha.shape, bool)
    boost[:, 2:] = True
    names = coordinate_names(inputs, {"simplex": "gamma", "level": "centered",
                                      "boost": boost})
    big, small = boost_split(inputs.alpha, boost)
    # sites sorted by name: eta_e, eta_g, eta_u, lambda_c, lambda_mean
    want = ([f"eta_e[{w},{t}]" for w, t in zip(*small)]
            + [f"eta_g[{w},{t}]" for w, t in zip(*big)]
            + [f"eta_u[{w},{t}]" for w, t in zip(*small)]
            + [f"lambda_c[{i}]" for i in range(inputs.n_items - 1)] + ["lambda_mean"])
    assert names == want


@pytest.mark.slow
def test_adaptation_report_matches_the_draws():
    d, pr = _tiny()
    r = fit_nuts(d, "couple", pr, **ROUND)
    a = r.adaptation
    C, D = a["inv_mass"].shape
    assert C == 2 and a["post_var"].shape == (C, D) and len(a["names"]) == D
    # the step size is fixed while sampling: the one NumPyro reports with every draw
    ss = np.asarray(r.idata["sample_stats"]["step_size"])
    np.testing.assert_allclose(a["step_size"], ss[:, 0], rtol=1e-6)
    # lambda_mean is the identity coordinate of mean(λ): its per-chain variance
    i = a["names"].index("lambda_mean")
    level = np.asarray(r.idata["posterior"]["lambda"]).mean(axis=-1)
    np.testing.assert_allclose(a["post_var"][:, i], level.var(axis=1), rtol=1e-6)
    # a windowed warm-up estimates each coordinate's variance: the same order of magnitude
    ratio = a["inv_mass"] / a["post_var"]
    assert np.all(np.isfinite(ratio)) and 0.2 < np.median(ratio) < 5


@pytest.mark.slow
def test_sampling_is_extended_in_rounds_until_the_gate_or_the_cap():
    d, pr = _tiny()
    one = fit_nuts(d, "couple", pr, **ROUND)
    assert not one.gate.trusted          # 2 × 60 draws cannot reach an ESS of 400
    ext = fit_nuts(d, "couple", pr, max_draws=200, **ROUND)
    lam1 = np.asarray(one.idata["posterior"]["lambda"])
    lam = np.asarray(ext.idata["posterior"]["lambda"])
    # whole rounds of 60 up to the cap (3 rounds: a 4th would pass 200), attrs saying so
    assert lam.shape[1] == 180 and int(ext.idata.attrs["draws"]) == 180
    assert ext.timings["sampling_rounds"] == 3
    assert np.asarray(ext.idata["sample_stats"]["n_steps"]).shape == (2, 180)
    # the first round is the unextended run itself; later rounds continue the same chains
    np.testing.assert_array_equal(lam[:, :60], lam1)
    assert not np.array_equal(lam[:, 60:120], lam[:, :60])
    # the adapted kernel stays fixed after warm-up: one step size per chain in every round
    ss = np.asarray(ext.idata["sample_stats"]["step_size"])
    np.testing.assert_allclose(ss, ss[:, :1] * np.ones_like(ss))
