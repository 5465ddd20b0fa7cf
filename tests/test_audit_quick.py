"""A quick audit's draws grow with the number of parameters the gate checks.

The oracle for the rule is the gate's own statistic on iid draws: with few effective draws
per chain the largest R-hat over many parameters crosses 1.01 by chance alone.
"""
import numpy as np
import pytest

from crowdrank.models.data import Rankings
from crowdrank.validation.pipelines.audit import AuditConfig, n_scalar_params, quick_draws


def _data(n_items, n_workers, K):
    rng = np.random.default_rng(0)
    rows = []
    for w in range(n_workers):
        for _ in range(3):
            items = rng.choice(n_items, size=K, replace=False)
            rows.append((f"w{w}", [f"i{i}" for i in items]))
    return Rankings.from_lists([r[1] for r in rows], workers=[r[0] for r in rows])


def test_scalar_params_count_items_and_worker_parameters():
    data = _data(30, 7, 3)
    assert n_scalar_params(data, ("pl",)) == data.n_items
    assert n_scalar_params(data, ("crowdbt",)) == data.n_items + data.n_workers
    assert n_scalar_params(data, ("couple",)) == data.n_items + data.n_workers * data.K
    assert n_scalar_params(data, ("crowdbt", "couple")) == data.n_items + 7 * data.K


def test_quick_draws_rule():
    assert quick_draws(None) == 500 and quick_draws(300) == 500 and quick_draws(301) == 1000
    assert AuditConfig.quick().draws == 500
    assert AuditConfig.quick(1114).draws == 1000
    assert AuditConfig.quick(1114, draws=200).draws == 200      # an explicit --draws wins


@pytest.mark.slow
def test_max_rhat_over_many_parameters_fails_by_chance_on_short_chains():
    """iid draws: 250 per chain over 1,114 parameters usually fail the R-hat rule; 1000 do
    not (so the rule above is needed, and enough)."""
    import arviz_stats as azs
    import xarray as xr

    rng = np.random.default_rng(1)

    def worst(n):       # the gate's statistic (inference.gate.check): rank R-hat, its max
        x = xr.DataArray(rng.standard_normal((4, n, 1114)), dims=("chain", "draw", "p"))
        return float(np.max(azs.rhat(x, method="rank")))

    assert worst(250) >= 1.01
    assert worst(1000) < 1.01
