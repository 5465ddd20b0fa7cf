"""The replication's online fits go through the method registry (validation.studies.replicate.
online_fit) and give exactly the numbers of the online update called directly."""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.inference.online import fit_online
from crowdrank.validation.studies.replicate import online_fit, synthetic, worker_quality


@pytest.mark.parametrize("model", ["couple", "crowdbt"])
def test_online_fit_equals_fit_online(model):
    sim, priors = synthetic("amateur", 3, 12, 4, 15, 3)
    data = sim.rankings
    got = online_fit(data, model, priors, 7)
    want = fit_online(data, model, priors, order="shuffle", seed=7, progress=False)
    np.testing.assert_array_equal(got.mu, want.mu)
    np.testing.assert_array_equal(got.alpha, want.alpha)
    np.testing.assert_array_equal(worker_quality(got), worker_quality(want))
    assert got.seconds > 0
    # a different order gives other numbers: the seed reaches the shuffle
    assert not np.array_equal(online_fit(data, model, priors, 8).mu, got.mu)
    file_order = fit_online(data, model, priors, progress=False)
    np.testing.assert_array_equal(online_fit(data, model, priors).mu, file_order.mu)
