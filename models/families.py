"""Worker-prior families as objects: Dirichlet, Beta and Gamma (docs/design.md §2, §2.1, §5.1).

A model's worker prior (:attr:`crowdrank.models.registry.ModelSpec.worker_prior`) is one of
:data:`DIRICHLET` (COUPLE's uncertainty vector ``η_w ~ Dir(α_w)`` over ``K`` offsets),
:data:`BETA` (CrowdBT's accuracy ``η_w ~ Beta(a_w, b_w)``) or :data:`GAMMA` (PeerGrader's
reliability ``η_g ~ Gamma(shape, rate)``), or ``None``. Like a
``numpyro.distributions.Distribution`` that carries its own support and transform, a family
carries everything about its distribution that the layers need, so that no layer branches
on a family's *name*:

* its parameters: how it reads :class:`~crowdrank.models.priors.Priors` (:meth:`table`) and
  how long that table is (:meth:`prior_K`);
* its NumPyro and PyMC sites (:meth:`numpyro_log_eta`, :meth:`pymc_log_eta`), with the
  exact Marsaglia–Tsang construction of §5.1 for the Dirichlet and Beta, and the worker
  table the likelihood reads (:meth:`log_table`);
* its draws: exact for tiny concentrations (:meth:`draw`, SBC's truth), NumPy's own
  sampler (:meth:`draw_numpy`, the prior predictive), a posterior's independent draws
  (:meth:`posterior_draws`, the online export); and the simulator's ``(W, K)`` layout of a
  draw (:meth:`simulator_eta`);
* its exact marginals: the simplex a draw lives on (:meth:`as_simplex`, what the
  prior-only checks compare with ``Beta(α_t, Σα − α_t)``) and the Beta marginal of each
  flattened entry (:meth:`beta_marginals`, the online PIT);
* its SBC flattening (:meth:`flatten`), its warm-start values (:meth:`point_log_eta`,
  :meth:`direct_values`, :meth:`check_init`, :meth:`start_from_factor` — a start from an
  online posterior's worker factors), its ArviZ dims (:attr:`dims`) and its words for
  reports (:attr:`describe`, :attr:`table_label`).

A higher layer asks the family for what it needs; nothing here imports ``inference``,
``validation`` or ``reports``. Plain NumPy at import time: the PPL sites import JAX or
PyMC inside the methods, so importing the registry pulls in neither.

Every method keeps the random streams and the site names and order of the code it
replaces: the same seeds give the same draws.
"""

from __future__ import annotations

import numpy as np

from .errors import UsageError


def draw_dirichlet(rng: np.random.Generator, alpha: np.ndarray) -> np.ndarray:
    """Row-wise ``Dir(α)`` draws, exact also for tiny ``α`` (docs/design.md §5.1).

    ``Gamma(α) = Gamma(α + 1) · U^{1/α}`` [MT00], so ``log g = log u − e/α`` with
    ``u ~ Gamma(α + 1)``, ``e ~ Exp(1)``, and ``η = softmax(log g)`` never divides an
    underflowed zero by a zero sum (the paper's ``α_4 = 10·6⁻⁴ ≈ 0.0077`` puts most of
    ``g_4``'s mass far below double precision).
    """
    alpha = np.asarray(alpha, float)
    if np.any(~(alpha > 0)) or np.any(~np.isfinite(alpha)):
        raise ValueError("Dirichlet concentrations must be finite and > 0")
    logg = np.log(rng.gamma(alpha + 1.0)) - rng.exponential(size=alpha.shape) / alpha
    logg -= logg.max(axis=-1, keepdims=True)
    return np.exp(logg - np.log(np.exp(logg).sum(axis=-1, keepdims=True)))


class WorkerFamily:
    """One worker-prior family (the base class; see the module docstring).

    Attributes
    ----------
    name : str
        ``"dirichlet"``, ``"beta"`` or ``"gamma"``: for messages, files and the registry's
        string form (:func:`family`); layers never compare it.
    scalar : bool
        One number per worker (``eta`` ``(W,)``), not a row ``(W, K)``.
    dims : tuple of str
        ArviZ dims of ``eta`` after ``(chain, draw)``.
    describe : str
        One phrase for reports.
    table_label : str
        What a row of :meth:`table` holds, for reports' column headings.
    """

    name: str = ""
    scalar: bool = True
    #: The sampler's ``simplex`` option chooses this family's coordinates (the Gamma
    #: construction or the PPL's own Dirichlet/Beta); ``False``: one parametrisation.
    simplex_coordinates: bool = False
    dims: tuple[str, ...] = ("worker",)
    describe: str = ""
    table_label: str = "α"

    # A family is compared by identity. Comparing one with its name string is the branch
    # these objects replace; such a comparison is answered by name, so that a caller that
    # still compares names keeps its meaning.
    def __eq__(self, other):
        if isinstance(other, str):
            return self.name == other
        return self is other

    def __hash__(self):
        return hash(self.name)

    def __reduce__(self):
        # one object per family, also across processes (pickled specs, Dask workers)
        return (family, (self.name,))

    def __repr__(self) -> str:
        return f"<worker family {self.name}>"

    def __str__(self) -> str:
        return self.name

    # ------------------------------------------------------------ parameters
    def prior_K(self, data_K: int) -> int:
        """Length of the prior table this family reads for data with longest ranking
        ``data_K``: 2 for the Beta ``(a, b)`` and Gamma ``(shape, rate)``."""
        return 2

    def table(self, priors, K: int | None = None) -> np.ndarray:
        """The family's parameters read from :class:`~crowdrank.models.priors.Priors`,
        one row per worker of ``priors`` (a copy)."""
        raise NotImplementedError

    # ------------------------------------------------------------ PPL tables and sites
    def log_table(self, eta, xp, safe_log):
        """The worker table the PPL column functions read, from ``eta``: ``log η`` ``(W, K)``
        or ``(W,)`` by ``safe_log`` (a zero that underflowed stays finite). ``xp`` is
        ``jax.numpy`` or ``pytensor.tensor``."""
        return safe_log(eta)

    def numpyro_log_eta(self, inputs, simplex: str = "gamma", boost=None, level_sd=None,
                        reweight: bool = True):
        """Sample the NumPyro sites of this family and return :meth:`log_table`'s table.
        ``reweight=False`` leaves out the magnitude's reweighting (factor ``eta_level``),
        so that every site is a proper distribution ``Predictive`` can draw."""
        raise NotImplementedError

    def pymc_log_eta(self, inputs, simplex: str = "gamma", boost=None, reweight: bool = True):
        """The PyMC twin of :meth:`numpyro_log_eta` (inside a ``pm.Model`` context)."""
        raise NotImplementedError

    # ------------------------------------------------------------ draws
    def draw(self, rng: np.random.Generator, table: np.ndarray) -> np.ndarray:
        """One draw per worker, exact for tiny concentrations, in ``eta``'s layout."""
        raise UsageError(f"no exact draw of a {self.name} worker prior")

    def draw_numpy(self, rng: np.random.Generator, table: np.ndarray) -> np.ndarray:
        """One draw per worker by NumPy's own sampler, in ``eta``'s layout."""
        raise UsageError(f"no draw of a {self.name} worker prior")

    def posterior_draws(self, rng: np.random.Generator, table: np.ndarray,
                        lead: tuple[int, ...]) -> np.ndarray:
        """``lead + eta.shape`` independent draws of the family with parameters ``table``
        (an online posterior's worker factors)."""
        raise UsageError(f"no posterior draws of a {self.name} worker factor")

    def simulator_eta(self, eta: np.ndarray, K: int) -> np.ndarray:
        """``eta`` in the simulator's ``(W, K)`` layout: the chance of reporting the item at
        each offset of the remaining true order."""
        raise UsageError(f"the simulator reads no {self.name} worker parameter")

    # ------------------------------------------------------------ exact marginals, SBC
    def as_simplex(self, eta: np.ndarray) -> np.ndarray | None:
        """``eta`` ``(..., W[, K])`` as the Dirichlet simplex whose concentrations are
        :meth:`table`, ``(..., W, K)``; ``None`` when the family has none."""
        return None

    def beta_marginals(self, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(a, b)`` of the exact Beta marginal of each entry of :meth:`flatten`."""
        raise UsageError(f"a {self.name} worker prior has no Beta marginals")

    def flatten(self, eta) -> np.ndarray:
        """``eta`` ``(..., W[, K])`` as ``(..., P)``: the entries SBC ranks, worker by worker."""
        return np.asarray(eta, float)

    def moment_match(self, draws: np.ndarray) -> np.ndarray:
        """The table of this family whose means and variances are those of ``draws``
        ``(S, W[, K])`` (a draw-only method's marginals); NaN where a variance is too large
        for the family."""
        raise UsageError(f"no moment-matched {self.name} worker factor")

    @staticmethod
    def _moment_sizes(draws):
        # each entry's Beta marginal has mean m and variance m(1 − m)/(s + 1): s from (m, v)
        e = np.asarray(draws, float)
        m, v = e.mean(axis=0), e.var(axis=0, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = m * (1 - m) / v - 1.0
        return m, np.where(np.isfinite(s) & (s > 0), s, np.nan)

    # ------------------------------------------------------------ warm starts
    def point_log_eta(self, table: np.ndarray, eta=None) -> np.ndarray:
        """:meth:`log_table` of a point ``eta``, or of the prior mean when ``eta`` is None."""
        raise NotImplementedError

    def direct_values(self, log_eta: np.ndarray, simplex: str) -> dict | None:
        """Constrained values of the sampler's worker sites when the site is ``eta`` itself
        (``{"eta": ...}``); ``None`` when the sites are the Gamma construction's, which the
        caller augments (``inference.nuts``' starts)."""
        return None

    def check_init(self, eta, n_workers: int, K: int) -> np.ndarray | None:
        """A user's starting ``eta`` checked and moved strictly inside the support;
        ``None``: the family takes no user start (the sampler's default start is used)."""
        return None

    #: An online posterior holds one factor of this family per worker (its ``alpha`` row).
    online_factor: bool = False

    def start_from_factor(self, rows: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
        """``(eta, table)``: the mean of each worker's online factor ``rows`` ``(W, ≥ K)``
        (a saved posterior's ``alpha``) and the factor cut to the family's length; a
        ``ValueError`` names what is wrong."""
        raise ValueError(f"an online posterior holds no {self.name} worker factor")


class _GammaSimplex(WorkerFamily):
    """A family sampled, by default, through independent Gammas over its ``(W, K)``
    concentrations (docs/design.md §5.1): ``g_t ~ Gamma(α_t)``, directly for
    ``α_t ≥ BOOST_BELOW`` (site ``eta_g``) and as ``log g_t = log u_t − e_t/α_t`` below it
    (sites ``eta_u ~ Gamma(α + 1)``, ``eta_e ~ Exp(1)``, the Marsaglia–Tsang boost [MT00]),
    ``log η = log g − log Σg``, and the magnitude ``Σg`` reweighted to
    ``log S ~ Normal(0, level_sd²)`` (factor ``eta_level``), exact for ``η``."""

    simplex_coordinates = True

    def _det_eta(self, log_eta, xp):
        """The deterministic ``eta`` of the Gamma construction's table."""
        raise NotImplementedError

    def numpyro_log_eta(self, inputs, simplex: str = "gamma", boost=None, level_sd=None,
                        reweight: bool = True):
        import jax
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist

        from .reparam import boost_split, level_log_ratio

        alpha = jnp.asarray(inputs.alpha)
        if simplex == "dirichlet":
            eta = numpyro.sample("eta", self._ppl_site_numpyro(dist, alpha))
            from .numpyro.blocks import _safe_log

            return self.log_table(jnp.asarray(eta), jnp, _safe_log)
        if simplex == "gibbs":
            return self._numpyro_gibbs(alpha)
        big, small = boost_split(inputs.alpha, boost)
        log_g = jnp.zeros(alpha.shape, alpha.dtype)
        if big[0].size:
            # α ≥ BOOST_BELOW: g ~ Gamma(α) itself; its log (the sampler's coordinate) has a
            # log-concave density with sd ≈ 1/√α and no long tail
            g = numpyro.sample("eta_g", dist.Gamma(alpha[big], 1.0).to_event(1))
            log_g = log_g.at[big].set(jnp.log(g))
        if small[0].size:
            a_s = alpha[small]
            u = numpyro.sample("eta_u", dist.Gamma(a_s + 1.0, 1.0).to_event(1))
            e = numpyro.sample("eta_e", dist.Exponential(jnp.ones_like(a_s)).to_event(1))
            log_g = log_g.at[small].set(jnp.log(u) - e / a_s)
        log_s = jax.scipy.special.logsumexp(log_g, axis=1)
        # S = Σ g is independent of η and unseen by the likelihood: reweighting its law is
        # exact for η and keeps each log g_t on its own axis (models.model_inputs.LEVEL_SD)
        if reweight:
            numpyro.factor("eta_level", jnp.sum(level_log_ratio(
                log_s, inputs.alpha.sum(axis=1), jnp, level_sd)))
        log_eta = log_g - log_s[:, None]
        numpyro.deterministic("eta", self._det_eta(log_eta, jnp))
        return log_eta

    def _numpyro_gibbs(self, alpha):
        raise ValueError("simplex='gibbs' is COUPLE's (a Dirichlet worker table)")

    def pymc_log_eta(self, inputs, simplex: str = "gamma", boost=None, reweight: bool = True):
        import pymc as pm
        import pytensor.tensor as pt

        from .reparam import boost_split, level_log_ratio

        alpha = np.asarray(inputs.alpha, float)
        if simplex == "dirichlet":
            eta = self._ppl_site_pymc(pm, alpha)
            from .pymc_ops import safe_log as _safe_log

            return self.log_table(pt.as_tensor_variable(eta), pt, _safe_log)
        big, small = boost_split(alpha, boost)
        log_g = pt.zeros(alpha.shape)
        if big[0].size:      # α ≥ BOOST_BELOW: g ~ Gamma(α) itself (log-transformed by PyMC)
            g = pm.Gamma("eta_g", alpha=alpha[big], beta=1.0)
            log_g = pt.set_subtensor(log_g[big], pt.log(g))
        if small[0].size:
            a_s = alpha[small]
            u = pm.Gamma("eta_u", alpha=a_s + 1.0, beta=1.0)
            e = pm.Exponential("eta_e", lam=1.0, shape=a_s.shape)
            log_g = pt.set_subtensor(log_g[small], pt.log(u) - e / a_s)
        log_s = pt.logsumexp(log_g, axis=1)
        # S = Σ g is independent of η and unseen by the likelihood: reweighting its law is exact
        if reweight:
            pm.Potential("eta_level", pt.sum(level_log_ratio(log_s, alpha.sum(axis=1), pt)))
        log_eta = log_g - log_s[:, None]
        pm.Deterministic("eta", self._det_eta(log_eta, pt), dims=self.dims)
        return log_eta

    def _ppl_site_numpyro(self, dist, alpha):
        raise NotImplementedError

    def _ppl_site_pymc(self, pm, alpha):
        raise NotImplementedError

    def direct_values(self, log_eta, simplex):
        if simplex != "dirichlet":
            return None
        return {"eta": self._direct_eta(np.exp(log_eta))}


class Dirichlet(_GammaSimplex):
    """``η_w ~ Dirichlet(α_w)`` over ``K`` offsets (COUPLE [Pan18], Eq. 3-4): the row
    ``α_w[:K]`` of :attr:`Priors.alpha`; the PPL table is ``log η`` ``(W, K)``."""

    name = "dirichlet"
    scalar = False
    dims = ("worker", "stage")
    describe = "η_w ~ Dir(α_w)"

    def prior_K(self, data_K):
        return data_K

    def table(self, priors, K=None):
        K = priors.K if K is None else K
        return np.asarray(priors.alpha[:, :K], float).copy()

    def _det_eta(self, log_eta, xp):
        return xp.exp(log_eta)

    def _ppl_site_numpyro(self, dist, alpha):
        return dist.Dirichlet(alpha).to_event(1)

    def _ppl_site_pymc(self, pm, alpha):
        return pm.Dirichlet("eta", a=alpha, dims=self.dims)

    def _numpyro_gibbs(self, alpha):
        import jax
        import jax.numpy as jnp
        import numpyro

        from .numpyro.dists import LogGamma

        # one plain site, log g_t with g_t ~ Gamma(α_t) independent (no boost, no level
        # factor): NUTS never moves it; the exact Gibbs step of inference.nuts.gibbs does
        log_g = numpyro.sample("eta_log_g", LogGamma(alpha).to_event(2))
        log_eta = log_g - jax.scipy.special.logsumexp(log_g, axis=1, keepdims=True)
        numpyro.deterministic("eta", jnp.exp(log_eta))
        return log_eta

    def draw(self, rng, table):
        return draw_dirichlet(rng, table)

    def draw_numpy(self, rng, table):
        return np.stack([rng.dirichlet(row) for row in np.asarray(table, float)])

    def posterior_draws(self, rng, table, lead):
        W, K = table.shape
        # Dirichlet via normalised Gammas; tiny α may underflow to 0: keep the simplex exact
        g = rng.standard_gamma(np.broadcast_to(table, tuple(lead) + (W, K)))
        tot = g.sum(-1, keepdims=True)
        return np.where(tot > 0, g / np.where(tot > 0, tot, 1.0), 1.0 / K)

    def simulator_eta(self, eta, K):
        return np.asarray(eta, float)

    def as_simplex(self, eta):
        return np.asarray(eta, float)

    def beta_marginals(self, table):
        # η_t ~ Beta(α_t, Σα − α_t): the aggregation property of the Dirichlet
        alpha = np.asarray(table, float)
        if alpha.ndim != 2 or np.any(~(alpha > 0)) or np.any(~np.isfinite(alpha)):
            raise ValueError("Dirichlet concentrations must be a (W, K) array of finite "
                             "values > 0")
        return alpha.ravel(), (alpha.sum(axis=1, keepdims=True) - alpha).ravel()

    def flatten(self, eta):
        e = np.asarray(eta, float)
        return e.reshape(e.shape[:-2] + (-1,))

    def moment_match(self, draws):
        # one concentration per worker: the geometric mean over stages of each entry's s
        m, s = self._moment_sizes(draws)
        return m * np.exp(np.nanmean(np.log(s), axis=1, keepdims=True))

    def point_log_eta(self, table, eta=None):
        a = np.asarray(table, float)
        if eta is None:
            return np.log(a / a.sum(axis=1, keepdims=True))
        return np.log(np.asarray(eta, float))

    def _direct_eta(self, eta):
        eta = np.maximum(eta, 1e-12)   # stick-breaking cannot represent an exact 0
        return eta / eta.sum(axis=-1, keepdims=True)

    def check_init(self, eta, n_workers, K):
        eta = np.asarray(eta, float)
        if eta.ndim != 2 or eta.shape[0] != n_workers or eta.shape[1] < K:
            raise UsageError(f"init['eta'] for COUPLE must be ({n_workers}, >={K}), got "
                             f"{eta.shape}")
        eta = np.clip(eta[:, :K], 1e-6, None)  # keep the start off the boundary
        return eta / eta.sum(axis=1, keepdims=True)

    online_factor = True

    def start_from_factor(self, rows, K):
        if any(len(a) < K for a in rows):
            raise ValueError(f"COUPLE workers need {K} alpha values (the data's K)")
        a = np.array([np.asarray(x, float)[:K] for x in rows])
        if not np.all(np.isfinite(a)) or np.any(a <= 0):
            raise ValueError("worker alpha values must be finite and > 0")
        return a / a.sum(axis=1, keepdims=True), a


class Beta(_GammaSimplex):
    """``η_w ~ Beta(a_w, b_w)``, an accuracy (CrowdBT [Chen13]): :meth:`Priors.beta` (the
    explicit ``ab`` table, else ``α_w[1..2]``); sampled as the two-entry simplex
    ``[η, 1 − η] ~ Dir(a, b)`` of the Gamma construction; the PPL table is
    ``[log η, log(1 − η)]`` ``(W, 2)``, so an accuracy near 0 or 1 never goes through
    ``log(1 − η)`` of a rounded ``η``."""

    name = "beta"
    describe = "CrowdBT's Beta(a_w, b_w) on the accuracy η_w¹"
    table_label = "α (CrowdBT: a, b)"

    def table(self, priors, K=None):
        return priors.beta()

    def log_table(self, eta, xp, safe_log):
        return xp.stack([xp.log(eta), xp.log1p(-eta)], axis=1)

    def _det_eta(self, log_eta, xp):
        return xp.exp(log_eta[:, 0])

    def _ppl_site_numpyro(self, dist, alpha):
        return dist.Beta(alpha[:, 0], alpha[:, 1]).to_event(1)

    def _ppl_site_pymc(self, pm, alpha):
        return pm.Beta("eta", alpha=alpha[:, 0], beta=alpha[:, 1], dims=self.dims)

    def draw(self, rng, table):
        # the first entry of the exact two-entry Dirichlet draw
        return draw_dirichlet(rng, table)[:, 0]

    def draw_numpy(self, rng, table):
        table = np.asarray(table, float)
        return rng.beta(table[:, 0], table[:, 1])

    def posterior_draws(self, rng, table, lead):
        W = table.shape[0]
        return rng.beta(np.broadcast_to(table[:, 0], tuple(lead) + (W,)),
                        np.broadcast_to(table[:, 1], tuple(lead) + (W,)))

    def simulator_eta(self, eta, K):
        p = np.asarray(eta, float)
        out = np.zeros((p.shape[0], K))
        out[:, 0], out[:, 1] = p, 1.0 - p
        return out

    def as_simplex(self, eta):
        eta = np.asarray(eta, float)
        return np.stack([eta, 1.0 - eta], axis=-1)

    def beta_marginals(self, table):
        table = np.asarray(table, float)
        return table[:, 0], table[:, 1]

    def moment_match(self, draws):
        m, s = self._moment_sizes(draws)
        return np.stack([m * s, (1 - m) * s], axis=1)

    def point_log_eta(self, table, eta=None):
        if eta is None:
            a = np.asarray(table, float)
            return np.log(a / a.sum(axis=1, keepdims=True))
        eta = np.asarray(eta, float)
        return np.stack([np.log(eta), np.log1p(-eta)], axis=-1)

    def _direct_eta(self, eta):
        return np.clip(eta[..., 0], 1e-9, 1 - 1e-9)   # the Beta site holds the accuracy η

    def check_init(self, eta, n_workers, K):
        eta = np.asarray(eta, float)
        if eta.ndim == 2 and eta.shape[1] == 2:  # Beta (a, b): start at the mean
            eta = eta[:, 0] / eta.sum(axis=1)
        if eta.shape != (n_workers,):
            raise UsageError(f"init['eta'] for CrowdBT must be ({n_workers},) or "
                             f"({n_workers}, 2), got {eta.shape}")
        return np.clip(eta, 1e-3, 1 - 1e-3)

    online_factor = True

    def start_from_factor(self, rows, K):
        if any(len(a) < 2 for a in rows):
            raise ValueError("CrowdBT workers need alpha = [a, b]")
        ab = np.array([np.asarray(a, float)[:2] for a in rows])
        return ab[:, 0] / ab.sum(axis=1), ab


class Gamma(WorkerFamily):
    """``η_g ~ Gamma(shape, rate)``, a positive reliability (PeerGrader [Raman14]):
    :meth:`Priors.gamma_params`; one site ``eta`` ``(W,)`` whatever ``simplex`` says (the
    PPLs' log transform is its natural coordinate); the PPL table is ``log η`` ``(W,)``."""

    name = "gamma"
    describe = "η_g ~ Gamma(shape, rate)"
    table_label = "(shape, rate)"

    def table(self, priors, K=None):
        return priors.gamma_params()

    def numpyro_log_eta(self, inputs, simplex="gamma", boost=None, level_sd=None,
                        reweight=True):
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist

        alpha = jnp.asarray(inputs.alpha)
        eta = numpyro.sample("eta", dist.Gamma(alpha[:, 0], alpha[:, 1]).to_event(1))
        return jnp.log(eta)

    def pymc_log_eta(self, inputs, simplex="gamma", boost=None, reweight=True):
        import pymc as pm
        import pytensor.tensor as pt

        alpha = np.asarray(inputs.alpha, float)
        eta = pm.Gamma("eta", alpha=alpha[:, 0], beta=alpha[:, 1], dims=self.dims)
        return pt.log(eta)

    def point_log_eta(self, table, eta=None):
        a = np.asarray(table, float)
        # Gamma(shape, rate): the mean is shape/rate
        return np.log(a[:, 0] / a[:, 1] if eta is None else np.asarray(eta, float))

    def direct_values(self, log_eta, simplex):
        # one positive site ``eta`` (W,), whatever ``simplex``
        return {"eta": np.exp(np.asarray(log_eta, float))}


DIRICHLET, BETA, GAMMA = Dirichlet(), Beta(), Gamma()

#: The families by name (the registry's and the files' string form).
FAMILIES: dict[str, WorkerFamily] = {f.name: f for f in (DIRICHLET, BETA, GAMMA)}


def family(value: str | WorkerFamily | None) -> WorkerFamily | None:
    """The family object of ``value`` (a family, its name, or ``None``)."""
    if value is None or isinstance(value, WorkerFamily):
        return value
    try:
        return FAMILIES[value]
    except (KeyError, TypeError):
        raise UsageError(f"unknown worker prior family {value!r}; expected one of "
                         f"{tuple(FAMILIES)}") from None
