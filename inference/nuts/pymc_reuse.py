"""PyMC's NUTS on one compiled model, re-used for many data sets of one layout (SBC).

:func:`crowdrank.inference.nuts.fit_nuts` with ``backend="pymc"`` builds a new PyMC model for every
data set: the observed rankings are constants of the graph, so PyTensor rewrites and
compiles the log density and its gradient anew each time, and ``pm.sample`` compiles its
initial-point, trace and conversion functions on top. For SBC's small replicates that
compilation was about as long as the sampling itself (``bench/profile_sbc_pymc.py`` at commit e59f652, docs/notes.md).

Here the rankings live in shared variables (:func:`crowdrank.models.pymc_models.build_shared_model`),
so one compiled ``logp_dlogp`` function serves every replicate whose
:func:`~crowdrank.models.pymc_models.layout_key` matches (same model, sizes, ranking lengths present
and prior; the number of rankings of each length may differ). Each fit then

* loads the data (:meth:`crowdrank.models.pymc_models.SharedData.set`),
* draws each chain's start as PyMC's ``init="jitter+adapt_diag"`` does — the model's initial
  point plus a uniform ``[-1, 1]`` jitter on the unconstrained scale, redrawn while the
  log density is not finite — and a fresh ``QuadPotentialDiagAdapt`` centred on the starts'
  mean with unit variances,
* builds a fresh ``pm.NUTS`` step around the compiled function (no compilation: the
  function and the initial point are handed in), and
* runs every chain through PyMC's own single-chain loop
  (``pymc.sampling.mcmc._iter_sample``: the loop ``pm.sample`` runs for sequential chains,
  with its tuning switch and per-chain reset), recording the raw draws and the sampler
  statistics in NumPy arrays.

The sampler is therefore PyMC's NUTS with PyMC's warm-up, on the same log density as
:func:`crowdrank.models.pymc_models.build_model` (tested value and gradient at random points, and
draws identical between a fresh build and a re-used one). What is left out is what SBC
does not read: the observed site (no pointwise log-likelihood or posterior predictive) and
the ``InferenceData`` packaging. Nothing is stored between fits but the compiled function:
the step, its adaptation and the potential are new for every fit.
"""

from __future__ import annotations

import time
from collections import OrderedDict

import numpy as np

from crowdrank.models.model_inputs import ModelInputs

#: Compiled models kept per process (least recently used dropped first).
CACHE_SIZE = 8
_CACHE: OrderedDict = OrderedDict()
#: Jitter attempts per chain before giving up (PyMC's ``jitter_max_retries`` + 1).
JITTER_TRIES = 11


class ReusedNuts:
    """One compiled PyMC model of a :func:`~crowdrank.models.pymc_models.layout_key`, sampled by
    PyMC's NUTS for any data set of that key (:meth:`fit`).

    ``param`` are :func:`crowdrank.models.pymc_models.build_model`'s ``simplex``, ``level`` and
    ``boost``; ``mode`` PyTensor's compilation mode (default: PyTensor's default linker).
    """

    def __init__(self, inputs: ModelInputs, *, simplex: str = "gamma",
                 level: str = "centered", boost=None, mode=None):
        import pymc as pm

        from crowdrank.models import pymc_models as pmm

        t0, c0 = time.perf_counter(), time.process_time()
        self.model, self.data = pmm.build_shared_model(inputs, simplex=simplex, level=level,
                                                       boost=boost)
        self.key = self.data.key
        kw = {} if mode is None else {"mode": mode}
        with self.model:
            self.func = self.model.logp_dlogp_function(ravel_inputs=True, **kw)
            self.func.trust_input = True
            self.initial_point = self.model.initial_point()
            self.vars = list(self.model.continuous_value_vars)
            outs = self.model.replace_rvs_by_values(
                [self.model["lambda"]] + ([self.model["eta"]] if inputs.has_eta else []))
            # the deterministics (λ, η) of a raw draw: compiled once, like the density
            self._det = self.model.compile_fn(outs, inputs=self.vars,
                                              on_unused_input="ignore", point_fn=False,
                                              **kw)
        self._pm = pm
        self.compile_s = time.perf_counter() - t0
        self.compile_cpu_s = time.process_time() - c0
        self.fits = 0

    def logp_dlogp(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """Log density and gradient at the raveled unconstrained point ``x`` (current data)."""
        self.func.set_extra_values({})
        lp, g = self.func._pytensor_function(np.asarray(x, float))
        return float(lp), np.asarray(g)

    def _starts(self, seeds, chains: int) -> list[dict]:
        """``init="jitter+adapt_diag"``'s starts: initial point + ``U(-1, 1)`` per chain."""
        starts = []
        for c in range(chains):
            rng = np.random.default_rng(seeds[c])
            for _ in range(JITTER_TRIES):
                pt = {v.name: np.asarray(self.initial_point[v.name], float)
                      + rng.uniform(-1.0, 1.0, np.shape(self.initial_point[v.name]))
                      for v in self.vars}
                if np.isfinite(self.logp_dlogp(self._ravel(pt))[0]):
                    break
            else:
                raise RuntimeError(f"no finite log density at {JITTER_TRIES} jittered starts "
                                   f"of chain {c}")
            starts.append(pt)
        return starts

    def _ravel(self, point: dict) -> np.ndarray:
        return np.concatenate([np.ravel(point[v.name]) for v in self.vars])

    def fit(self, inputs: ModelInputs, *, chains: int = 4, tune: int = 1000,
            draws: int = 1000, seed: int = 0, target_accept: float = 0.8,
            max_tree_depth: int = 10) -> tuple[dict, dict, dict]:
        """Sample the posterior of ``inputs`` (same layout key). Returns ``(post, stats,
        timings)``: ``post`` ``{"lambda": (chain, draw, L), "eta": ...}``, ``stats`` the
        sampler's ``diverging``, ``energy``, ``n_steps``, ``tree_depth``, ``step_size``,
        ``acceptance_rate`` ``(chain, draw)`` (after warm-up), ``timings`` seconds and
        leapfrog counts of warm-up and sampling."""
        from pymc.sampling.mcmc import _iter_sample
        from pymc.step_methods.hmc.quadpotential import QuadPotentialDiagAdapt

        pm = self._pm
        if chains < 1 or draws < 1 or tune < 0:
            raise ValueError("need chains >= 1, draws >= 1 and tune >= 0")
        t0, c0 = time.perf_counter(), time.process_time()
        self.data.set(inputs)
        # pm.sample's streams: one generator per chain, and one integer seed drawn from each
        rngs = np.random.default_rng(seed).spawn(chains)
        seeds = [int(r.integers(2**30)) for r in rngs]
        starts = self._starts(seeds, chains)
        x0 = np.array([self._ravel(s) for s in starts])
        n = x0.shape[1]
        potential = QuadPotentialDiagAdapt(n, x0.mean(axis=0), np.ones(n), 10, rng=seeds[0])
        step = pm.NUTS(vars=self.vars, model=self.model, potential=potential,
                       logp_dlogp_func=self.func, initial_point=self.initial_point,
                       target_accept=target_accept, max_treedepth=max_tree_depth,
                       rng=seeds[0])
        initial_state = step.sampling_state
        rec = [_Recorder(draws) for _ in range(chains)]
        t_warm = 0.0
        c_loop = time.process_time()
        for c in range(chains):
            step.sampling_state = initial_state        # as pm.sample's sequential chains
            tc = time.perf_counter()
            for i, _ in enumerate(_iter_sample(draws=tune + draws, step=step, start=starts[c],
                                               trace=rec[c], chain=c, tune=tune,
                                               rng=rngs[c], model=self.model)):
                if i == tune - 1:
                    t_warm += time.perf_counter() - tc
        t_loop = time.perf_counter() - t0
        c_loop = time.process_time() - c_loop
        post = self._deterministics(rec, inputs.has_eta)
        stats = {name: np.stack([r.stats[key] for r in rec])
                 for name, key in (("diverging", "diverging"), ("energy", "energy"),
                                   ("n_steps", "tree_size"), ("tree_depth", "depth"),
                                   ("step_size", "step_size"),
                                   ("acceptance_rate", "mean_tree_accept"))}
        stats["diverging"] = stats["diverging"].astype(bool)
        self.fits += 1
        timings = {"warmup": t_warm, "sampling": t_loop - t_warm,
                   "warmup_gradients": float(sum(r.tune_steps for r in rec)),
                   "sampling_gradients": float(stats["n_steps"].sum()),
                   "loop_cpu": c_loop,
                   "deterministics": time.perf_counter() - t0 - t_loop,
                   "cpu": time.process_time() - c0,
                   "reused_compile": int(self.fits > 1)}
        return post, stats, timings

    def _deterministics(self, rec, has_eta: bool) -> dict:
        """``λ`` (and ``η``) of every kept draw, ``(chain, draw, ...)``."""
        lam, eta = [], []
        for r in rec:
            lc, ec = [], []
            for point in r.points:
                out = self._det(*[point[v.name] for v in self.vars])
                lc.append(out[0])
                if has_eta:
                    ec.append(out[1])
            lam.append(lc)
            eta.append(ec)
        post = {"lambda": np.asarray(lam, float)}
        if has_eta:
            post["eta"] = np.asarray(eta, float)
        return post


class _Recorder:
    """The minimal trace ``_iter_sample`` writes into: the kept draws' raw points and
    sampler statistics; warm-up draws only count their leapfrog steps."""

    def __init__(self, draws: int):
        self.points: list[dict] = []
        self.stats: dict[str, list] = {}
        self.tune_steps = 0.0

    def record(self, point, sampler_stats, in_warmup: bool = False):
        st = sampler_stats[0]
        if in_warmup:
            self.tune_steps += float(st["tree_size"])
            return
        self.points.append({k: np.array(v, copy=True) for k, v in point.items()})
        for k in ("diverging", "energy", "tree_size", "depth", "step_size",
                  "mean_tree_accept"):
            self.stats.setdefault(k, []).append(st[k])

    def close(self):
        pass


def reused_nuts(inputs: ModelInputs, *, simplex: str = "gamma", level: str = "centered",
                boost=None, mode=None) -> tuple[ReusedNuts, bool]:
    """This process's :class:`ReusedNuts` for ``inputs``'s layout key and parametrisation,
    compiled on first use; returns ``(sampler, was_cached)``."""
    from crowdrank.models.pymc_models import layout_key

    key = (layout_key(inputs), simplex, level,
           None if boost is None else np.asarray(boost, bool).tobytes(), str(mode))
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key], True
    sampler = ReusedNuts(inputs, simplex=simplex, level=level, boost=boost, mode=mode)
    _CACHE[key] = sampler
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return sampler, False


def clear_cache() -> None:
    """Forget every compiled model of this process."""
    _CACHE.clear()
