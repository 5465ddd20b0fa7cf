"""``crowdrank sbc --simplex``: the worker simplex of the SBC fits.

The option reaches every route (one fit per replicate, the re-used PyMC graph, the vmapped
NumPyro batches) through ``SbcConfig.simplex``, which is part of a replicate's cache key
(the default is left out, so the keys of studies cached before the option exist
unchanged). Oracle for the vmapped batches: their program's log density, at a prior draw
of its own sites, equals the sampler's program's (``models.numpyro_models.model``) with the
same simplex (the PPL's own Dirichlet/Beta site; the default Gamma construction is
tested in test_batched_nuts.py: padded totals, quadrature), for a pairwise and a ranking
model.
"""

from __future__ import annotations

import numpy as np
import pytest

from crowdrank.models.errors import UsageError
from crowdrank.validation.pipelines.sbc import SbcConfig


def test_simplex_is_in_the_key_only_when_not_the_default():
    base = {"model": "crowdbt", "backend": "numpyro", "sims": 2, "n_items": 6,
            "n_workers": 3, "tasks_per_worker": 7}
    assert "simplex" not in SbcConfig(**base).spec(0)
    assert SbcConfig(**base, simplex="dirichlet").spec(0)["simplex"] == "dirichlet"
    with pytest.raises(UsageError, match="simplex must be one of"):
        SbcConfig(**base, simplex="stick")


@pytest.mark.parametrize("model", ["crowdbt", "couple-normalized"])
@pytest.mark.parametrize("simplex", ["dirichlet"])     # gamma: test_batched_nuts.py
def test_batched_program_is_the_samplers_density(model, simplex):
    import jax.numpy as jnp
    from numpyro import handlers
    from numpyro.infer.util import log_density

    from crowdrank.inference.nuts import batched
    from crowdrank.models import numpyro_models as npm
    from crowdrank.models.model_inputs import model_inputs
    from crowdrank.models.priors import Priors
    from crowdrank.models.registry import get
    from crowdrank.models.simulate import simulate

    pairwise = model == "crowdbt"
    d = simulate("crowdbt" if pairwise else "couple", n_items=5, n_workers=3,
                 tasks_per_worker=4, kmax=2 if pairwise else 3, seed=1).rankings
    pri = get(model).worker_priors(Priors.geometric(d.workers, K=d.K, a0=10, a=6), d)
    inp = model_inputs(model, d, pri)
    prog = batched._program(inp, simplex)
    args = (jnp.asarray(inp.index), jnp.asarray(inp.worker), jnp.ones(inp.worker.shape))
    trace = handlers.trace(handlers.seed(prog, 3)).get_trace(*args)
    params = {k: v["value"] for k, v in trace.items()
              if v["type"] == "sample" and not v["is_observed"]}
    assert "eta" in params and "eta_g" not in params      # the PPL's own site
    got, _ = log_density(prog, args, {}, params)
    want, _ = log_density(lambda: npm.model(inp, simplex=simplex, pointwise=False), (), {},
                          params)
    assert np.isfinite(float(want))
    # float32 unless the process enabled 64-bit JAX (a sampler run does): rounding only
    assert float(got) == pytest.approx(float(want), rel=1e-5)


def test_cli_hands_the_simplex_to_the_study(tmp_path, monkeypatch):
    from crowdrank.reports.cli import main
    from crowdrank.validation.pipelines import sbc

    seen = {}

    class Stop(Exception):
        pass

    def fake_run(cfg, out, **kw):
        seen["cfg"] = cfg
        raise Stop

    monkeypatch.setattr(sbc, "run_sbc", fake_run)
    for argv, want in ((["--simplex", "dirichlet"], "dirichlet"), ([], "gamma")):
        with pytest.raises(Stop):
            main(["sbc", "--model", "crowdbt", "--sims", "2", *argv, "--out",
                  str(tmp_path / "o")])
        assert seen["cfg"].simplex == want
