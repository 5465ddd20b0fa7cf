"""``NutsConfig`` and the shape of the public entry point (``inference/nuts/config.py``).

Oracles: the option names and defaults of the NumPyro/PyMC routes the package documents
(``docs/contracts.md``: ``tests/test_docs.py`` checks the signature), and the absence of the
experimental options from ``fit_nuts`` (they are refused by name, before any data is read).
The profile switch is checked by a spy on the timing function: it must be called exactly
when asked.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from crowdrank.inference import nuts
from crowdrank.inference.nuts import NutsConfig
from crowdrank.inference.nuts.experimental import ExperimentalConfig, fit_nuts_experimental
from crowdrank.models.errors import UsageError
from crowdrank.models.priors import Priors
from crowdrank.models.simulate import simulate

EXPERIMENTAL = ("eta_update", "gibbs_sweeps", "gibbs_walk", "gibbs_mode_jump", "adapt",
                "worker_level", "refine_eta")


def _tiny():
    d = simulate("couple", n_items=4, n_workers=2, tasks_per_worker=4, kmax=3, seed=1).rankings
    return d, Priors.geometric(d.workers, 3)


def test_fit_nuts_takes_at_most_twelve_parameters_and_no_experimental_option():
    params = inspect.signature(nuts.fit_nuts).parameters
    assert len(params) <= 12
    names = set(params) | set(NutsConfig.fields())
    assert not names & set(EXPERIMENTAL)


@pytest.mark.parametrize("bad", [{"chains": 0}, {"draws": 0}, {"tune": -1},
                                 {"target_accept": 1.0}, {"precision": "float16"},
                                 {"backend": "stan"}, {"init_jitter": -1.0},
                                 {"init_jitter": float("nan")}, {"simplex": "stick"},
                                 {"level": "flat"}, {"chain_method": "threads"},
                                 {"max_tree_depth": 0}, {"max_draws": 0}])
def test_bad_values_fail_when_the_config_is_made(bad):
    with pytest.raises(UsageError):
        NutsConfig(**bad)


def test_unknown_option_is_a_type_error_naming_the_valid_fields():
    d, pr = _tiny()
    for name in ("chainz",) + EXPERIMENTAL:
        with pytest.raises(TypeError, match="valid: backend, chains") as exc:
            nuts.fit_nuts(d, "couple", pr, **{name: 1})
        assert name in str(exc.value)
    with pytest.raises(TypeError, match="valid:.*eta_update"):
        fit_nuts_experimental(d, "couple", pr, chainz=2)
    with pytest.raises(TypeError):
        nuts.fit_nuts(d, "couple", pr, config={"chains": 2})


def test_options_replace_fields_of_the_given_config():
    base = NutsConfig(chains=2, tune=50, seed=4)
    cfg = NutsConfig.build(base, {"tune": 7})
    assert (cfg.chains, cfg.tune, cfg.seed) == (2, 7, 4)
    assert NutsConfig.build(base, {}) is base
    assert NutsConfig.build(None, None) == NutsConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.chains = 3


def test_experimental_values_are_checked():
    for bad in ({"eta_update": "hmc"}, {"adapt": "nope"}, {"worker_level": "x"},
                {"gibbs_sweeps": 0}, {"gibbs_walk": -1}, {"gibbs_mode_jump": True}):
        with pytest.raises(UsageError):
            ExperimentalConfig(**bad)


@pytest.mark.slow
def test_gradient_is_timed_only_when_asked(monkeypatch):
    """The default fit never calls the timing function and has no ``gradient_ms``; with
    ``profile=True`` it is called once and its figures are in ``timings``; the sampler's own
    compile seconds are there either way. The draws are
    the same either way (timing touches no random state)."""
    from crowdrank.inference.nuts import numpyro as runner

    calls = []
    real = runner.gradient_timing

    def spy(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(runner, "gradient_timing", spy)
    d, pr = _tiny()
    # the settings of tests/test_gibbs.py's reference fit of the same data: the same
    # programs, loaded from the run's compilation cache when that test ran first
    kw = {"chains": 4, "tune": 150, "draws": 300, "seed": 1, "progress": False,
          "pointwise": False, "predictive": False}
    plain = nuts.fit_nuts(d, "couple", pr, **kw)
    assert calls == [] and "gradient_ms" not in plain.timings
    # the run's own compile time is reported without a second program (jax.monitoring)
    assert plain.timings["compile"] > 0
    prof = nuts.fit_nuts(d, "couple", pr, profile=True, **kw)
    assert calls == [1] and prof.timings["gradient_ms"] > 0 and prof.timings["gradient_compile"] > 0
    np.testing.assert_array_equal(plain.idata["posterior"]["lambda"].values,
                                  prof.idata["posterior"]["lambda"].values)
