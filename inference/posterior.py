"""One posterior type for every inference method: :class:`Posterior`.

Every way to fit a model (NUTS, the online updates, EP, the batch MAP with Laplace or
bootstrap intervals, EM, TrueSkill, and what :mod:`crowdrank.inference.methods` registers)
returns a :class:`Posterior`; the audit, ``crowdrank fit`` and
:func:`crowdrank.validation.compare.compare` read nothing else (docs/contracts.md,
"Posterior").

A posterior holds

- ``model``, ``method`` (the registry's name: ``nuts``, ``online``, ``ep``, ``laplace``,
  ``bootstrap``, ``em``, ``trueskill``, ...), ``algorithm`` (the method's own label, e.g.
  ``online-gbmm``, ``ep-crowdbt-online``), ``options`` (the method's options as a dict),
  ``seconds``;
- ``tree``: an ArviZ ``xarray.DataTree`` of draws, or ``None``. Group ``posterior`` holds
  ``lambda`` ``(chain, draw, item)`` and, for models with a worker parameter, ``eta``
  ``(chain, draw, worker, stage)`` (Dirichlet rows, ``stage = 1..K``) or ``(chain, draw,
  worker)`` (a Beta accuracy), coordinates the real ids: the layout NUTS writes
  (``docs/contracts.md``, NUTS result);
- ``marginals``: closed-form marginals (:class:`Marginals`: Gaussian ``λ_r ~ N(μ_r, σ_r²)``,
  Dirichlet rows ``Dir(α_w)`` or Beta ``(a_w, b_w)`` for ``η_w``), so that KL, W1 and the
  coverages of a closed-form approximation stay exact;
- ``diagnostics``: a dict; ``"gate"`` is the :class:`crowdrank.inference.gate.Gate` of a
  sampler, an optimiser writes ``converged``/``iterations``/``grad_norm``, EP its pass
  log; a PSIS ``k̂`` goes under ``"psis_khat"``;
- ``native``: the method's own result object, kept for its own writer (the online state
  that ``--state-in`` resumes from, ``write_nuts``'s summary); never read by a comparison.

Construction::

    Posterior.from_marginals(model, method, items=..., mu=..., sigma2=..., workers=...,
                             alpha=..., diagnostics=..., options=..., seconds=...)
    Posterior.from_draws(model, method, draws={"lambda": (C, S, L), "eta": (C, S, W[, K])},
                         items=..., workers=..., diagnostics=..., options=..., seconds=...)
    Posterior.from_tree(tree, model=None, method=None, gate=None)   # a NUTS-layout tree
    as_posterior(obj)     # NutsResult, OnlinePosterior (online, EP, TrueSkill), BatchFit,
                          # EMFit, a DataTree, a Posterior (returned as is), or any object
                          # with the marginals' attributes (items, mu, sigma2[, workers,
                          # alpha, model, options])

**Draw-only methods** (the bootstrap, variational methods): :meth:`Posterior.from_draws`
stores the draws in ``tree`` and moment-matches marginals to them
(:func:`moment_marginals`: ``λ`` Gaussian with the draws' mean and variance; Beta ``η``
with the draws' mean and variance; Dirichlet rows with the draws' means and one
concentration per worker, the geometric mean over stages of ``m(1 − m)/v − 1``), flagged
``marginals.moment_matched``. The comparison reads ``z``, the sd ratio, KL and W1 from
these marginals, and the coverages from the draws themselves: the share of reference
draws inside the approximation's percentile intervals
(:func:`crowdrank.validation.intervals.percentile_coverage`). The bootstrap keeps its own
marginals (the estimate and the refits' variance) beside its refits.

Files (:func:`~crowdrank.inference.posterior_io.write_posterior`, :func:`~crowdrank.inference.posterior_io.read_posterior`; the CLI and the audit use the
same two functions): ``posterior.nc`` holds the tree (NUTS: ``write_nuts``'s, with the
gate in its attributes, and ``summary.csv`` beside it); ``posterior.json`` holds the
marginals and everything else, in the schema of the online state (``items: {id: {mu,
sigma2}}``, ``workers: {id: {alpha}}``) plus ``method``, ``diagnostics`` and ``options``.
The online methods write their state itself there (``OnlinePosterior.to_json``), so the
file a fit writes is also the state ``--state-in`` resumes from.

Importing this module costs NumPy only; ArviZ and xarray load when a tree is built or read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crowdrank.inference.gate import Gate
from crowdrank.models.families import BETA, DIRICHLET
from crowdrank.models.registry import ModelSpec, as_spec, name_of


def worker_family(model: str | ModelSpec) -> str | None:
    """``"dirichlet"``, ``"beta"`` (marginals exist), ``"gamma"`` or ``None`` for ``model``.

    Parameters
    ----------
    model : str or ModelSpec
        A name of the model registry (``crowdrank.models.registry``), or its spec.
    """
    fam = as_spec(model).worker_prior
    return None if fam is None else str(getattr(fam, "name", fam))


@dataclass(eq=False)        # arrays inside: equality is identity
class Marginals:
    """Closed-form marginals of an approximation.

    ``mu``, ``sigma2`` ``(L,)``: ``λ_r ~ N(μ_r, σ_r²)`` in ``items`` order; ``alpha``: the
    worker rows in ``workers`` order, ``(W, K)`` Dirichlet (``family="dirichlet"``) or
    ``(W, 2)`` Beta ``[a, b]`` (``family="beta"``), ``None`` without a worker parameter;
    ``moment_matched``: the marginals were fitted to draws (:func:`moment_marginals`).

    Attributes
    ----------
    items : tuple of str
        The item ids, in the order of ``mu`` and ``sigma2``.
    mu, sigma2 : ndarray
        ``(L,)`` means and variances of the Gaussian ``λ_r``.
    workers : tuple of str
        The worker ids, in the order of ``alpha``'s rows.
    alpha : ndarray or None
        ``(W, K)`` Dirichlet rows or ``(W, 2)`` Beta ``[a, b]``; None without a worker
        parameter.
    family : str or None
        ``"dirichlet"`` or ``"beta"``.
    moment_matched : bool
        The marginals were fitted to draws.
    """

    items: tuple[str, ...]
    mu: np.ndarray
    sigma2: np.ndarray
    workers: tuple[str, ...] = ()
    alpha: np.ndarray | None = None
    family: str | None = None
    moment_matched: bool = False

    def __post_init__(self):
        self.items = tuple(str(i) for i in self.items)
        self.workers = tuple(str(w) for w in self.workers)
        self.mu = np.asarray(self.mu, float)
        self.sigma2 = np.asarray(self.sigma2, float)
        L = len(self.items)
        if self.mu.shape != (L,) or self.sigma2.shape != (L,):
            raise ValueError(f"mu and sigma2 must have shape ({L},) like items; got "
                             f"{self.mu.shape} and {self.sigma2.shape}")
        if self.alpha is not None:
            self.alpha = np.asarray(self.alpha, float)
            if self.alpha.ndim != 2 or self.alpha.shape[0] != len(self.workers):
                raise ValueError(f"alpha must be (W, K) with W = {len(self.workers)} workers; "
                                 f"got {self.alpha.shape}")


@dataclass(eq=False)
class Posterior:
    """The result of any inference method (module docstring).

    Attributes
    ----------
    model : str
        A name of the model registry.
    method : str
        A name of the method registry (``nuts``, ``online``, ...).
    tree : DataTree or None
        The draws in the NUTS layout.
    marginals : Marginals or None
        Closed-form marginals.
    diagnostics : dict
        The method's diagnostics (``"gate"`` for a sampler).
    seconds : float
        Wall time of the fit.
    options : dict
        The method's options.
    algorithm : str
        The method's own label (``online-gbmm``, ...).
    native : object
        The method's own result, for its writer.
    spec : ModelSpec or None
        The model's registry spec when the fit was handed one (a constructor given a spec
        keeps it, and stores its name in ``model``), so that readers need no lookup;
        ``None``: looked up from ``model`` when first needed (:meth:`model_spec`).
    """

    model: str
    method: str
    tree: Any = None
    marginals: Marginals | None = None
    diagnostics: dict = field(default_factory=dict)
    seconds: float = math.nan
    options: dict = field(default_factory=dict)
    algorithm: str = ""
    native: Any = field(default=None, repr=False, compare=False)
    spec: ModelSpec | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.tree is None and self.marginals is None:
            raise ValueError("a Posterior needs draws (tree) or marginals")

    def model_spec(self) -> ModelSpec:
        """The model's spec: the one the fit was handed, else ``model`` looked up (and
        kept)."""
        if self.spec is None:
            self.spec = as_spec(self.model)
        return self.spec

    # ---------------------------------------------------------------- ids
    @property
    def items(self) -> tuple[str, ...]:
        if self.marginals is not None:
            return self.marginals.items
        return tuple(str(v) for v in self.tree["posterior"]["item"].values)

    @property
    def workers(self) -> tuple[str, ...]:
        if self.marginals is not None:
            return self.marginals.workers
        post = self.tree["posterior"]
        return tuple(str(v) for v in post["worker"].values) if "worker" in post.coords else ()

    # ------------------------------------------- the marginals, as the samplers' starts read
    @property
    def mu(self) -> np.ndarray:
        return self._marg().mu

    @property
    def sigma2(self) -> np.ndarray:
        return self._marg().sigma2

    @property
    def alpha(self) -> np.ndarray | None:
        return self._marg().alpha

    def _marg(self) -> Marginals:
        if self.marginals is None:
            self.marginals = moment_marginals(self.tree, self.model)
        return self.marginals

    # ---------------------------------------------------------------- diagnostics
    @property
    def gate(self) -> Gate | None:
        """The sampler's convergence gate (``diagnostics["gate"]``), or ``None``."""
        return self.diagnostics.get("gate")

    @property
    def has_draws(self) -> bool:
        return self.tree is not None

    def datatree(self, draws: int = 1000, seed: int = 0, chains: int = 1):
        """The draws: ``tree`` when the method made draws, else ``chains × draws`` seeded
        draws from the marginals, in the same layout.

        Parameters
        ----------
        draws : int
            Draws per chain from the marginals (when the method made none).
        seed : int
            Seed of those draws.
        chains : int
            Chains of those draws.
        """
        if self.tree is not None:
            return self.tree
        return marginal_draws(self, draws=draws, seed=seed, chains=chains)

    def items_table(self):
        """``rank, item, mu, sigma2, sd``, best first (the ``items.csv`` of every method)."""
        import pandas as pd

        m = self._marg()
        df = pd.DataFrame({"item": list(m.items), "mu": m.mu, "sigma2": m.sigma2,
                           "sd": np.sqrt(m.sigma2)})
        df = df.sort_values("mu", ascending=False, kind="stable").reset_index(drop=True)
        df.insert(0, "rank", np.arange(1, len(df) + 1))
        return df

    # ---------------------------------------------------------------- constructors
    @classmethod
    def from_marginals(cls, model: str | ModelSpec, method: str, *, items, mu, sigma2, workers=(),
                       alpha=None, diagnostics=None, options=None, seconds=math.nan,
                       algorithm: str = "", draws=None, native=None) -> Posterior:
        """A closed-form approximation; ``draws`` (optional ``{"lambda": (C, S, L), ...}``)
        adds draws the method made itself (the bootstrap's refits).

        Parameters
        ----------
        model : str or ModelSpec
            The model's name, or its spec (kept as :attr:`spec`).
        method, algorithm : str
            As the attributes (``algorithm`` defaults to ``method``).
        items, workers : sequence of str
            The ids.
        mu, sigma2 : array_like
            ``(L,)`` Gaussian marginals of ``λ``.
        alpha : array_like, optional
            The workers' Dirichlet or Beta rows.
        diagnostics, options : dict, optional
            As the attributes.
        seconds : float
            Wall time of the fit.
        draws : dict, optional
            Draws the method made itself.
        native : object, optional
            The method's own result.
        """
        fam = worker_family(model) if alpha is not None else None
        marg = Marginals(items, mu, sigma2, workers, alpha, fam)
        spec, model = _spec_given(model), name_of(model)
        tree = None if draws is None else draws_tree(model, method, draws, marg.items,
                                                     marg.workers)
        return cls(model, method, tree, marg, dict(diagnostics or {}), float(seconds),
                   dict(options or {}), algorithm or method, native, spec)

    @classmethod
    def from_draws(cls, model: str | ModelSpec, method: str, *, draws: dict, items, workers=(),
                   diagnostics=None, options=None, seconds=math.nan, algorithm: str = "",
                   native=None) -> Posterior:
        """A draw-only method: ``draws = {"lambda": (C, S, L), "eta": (C, S, W) or
        (C, S, W, K)}``; marginals are moment-matched (module docstring).

        Parameters
        ----------
        model : str or ModelSpec
            The model's name, or its spec (kept as :attr:`spec`).
        method, algorithm : str
            As the attributes (``algorithm`` defaults to ``method``).
        draws : dict
            ``{"lambda": (C, S, L), "eta": ...}``.
        items, workers : sequence of str
            The ids.
        diagnostics, options : dict, optional
            As the attributes.
        seconds : float
            Wall time of the fit.
        native : object, optional
            The method's own result.
        """
        spec, model = _spec_given(model), name_of(model)
        tree = draws_tree(model, method, draws, items, workers)
        return cls(model, method, tree, moment_marginals(tree, model),
                   dict(diagnostics or {}), float(seconds), dict(options or {}),
                   algorithm or method, native, spec)

    @classmethod
    def from_tree(cls, tree, *, model: str | ModelSpec | None = None,
                  method: str | None = None,
                  gate: Gate | None = None, seconds: float = math.nan, native=None
                  ) -> Posterior:
        """A tree in the NUTS layout (a sampler's, or one read from ``posterior.nc``). The
        gate: ``gate``, else the one ``write_nuts`` stored in the attributes, else none
        (a comparison then computes it from the draws, :func:`crowdrank.inference.gate.check`).

        Parameters
        ----------
        tree : DataTree
            Draws in the NUTS layout.
        model : str or ModelSpec, optional
            The model's name or its spec (kept as :attr:`spec`); default: the tree's
            attributes.
        method : str, optional
            Default: the tree's attributes, else ``nuts``.
        gate : Gate, optional
            The convergence verdict.
        seconds : float
            Wall time of the fit.
        native : object, optional
            The method's own result.
        """
        attrs = dict(tree.attrs)
        spec = _spec_given(model)
        model = (name_of(model) if model else None) or attrs.get("model") or ""
        method = method or str(attrs.get("method", "nuts"))
        diag = {}
        if gate is None and "gate_trusted" in attrs:
            gate = Gate.from_attrs(attrs)
        if gate is not None:
            diag["gate"] = gate
        opts = {k: _plain(v) for k, v in attrs.items() if not str(k).startswith("gate_")}
        return cls(str(model), method, tree, None, diag, float(seconds), opts,
                   str(attrs.get("sampler", method)), native, spec)


def _spec_given(model) -> ModelSpec | None:
    """``model`` when a constructor was handed a spec, else ``None`` (no lookup)."""
    return model if isinstance(model, ModelSpec) else None


def _plain(v):
    """A JSON-able value (NumPy scalars and arrays as Python)."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, Gate):
        return v.to_dict()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v if isinstance(v, str | int | float | bool | type(None)) else str(v)


# ====================================================================== draws
def draws_tree(model: str, method: str, draws: dict, items, workers=()):
    """``{"lambda": (C, S, L), "eta": ...}`` as a DataTree in the NUTS layout (attributes
    ``model``, ``method``).

    Parameters
    ----------
    model, method : str
        Stored as attributes.
    draws : dict
        ``lambda`` ``(C, S, L)`` and optionally ``eta`` ``(C, S, W)`` or ``(C, S, W, K)``.
    items, workers : sequence of str
        The coordinates.
    """
    from arviz_base import from_dict

    items = [str(i) for i in items]
    workers = [str(w) for w in workers]
    unknown = set(draws) - {"lambda", "eta"}
    if unknown or "lambda" not in draws:
        raise ValueError(f"draws hold 'lambda' and optionally 'eta'; got {sorted(draws)}")
    lam = np.asarray(draws["lambda"], float)
    if lam.ndim != 3 or lam.shape[2] != len(items):
        raise ValueError(f"lambda draws must be (chain, draw, {len(items)}); got {lam.shape}")
    data, dims, coords = {"lambda": lam}, {"lambda": ["item"]}, {"item": items}
    if "eta" in draws and draws["eta"] is not None:
        eta = np.asarray(draws["eta"], float)
        if eta.shape[:3] != lam.shape[:2] + (len(workers),) or eta.ndim not in (3, 4):
            raise ValueError(f"eta draws must be (chain, draw, {len(workers)}[, K]); got "
                             f"{eta.shape}")
        data["eta"] = eta
        dims["eta"] = ["worker"] + (["stage"] if eta.ndim == 4 else [])
        coords["worker"] = workers
        if eta.ndim == 4:
            coords["stage"] = list(range(1, eta.shape[3] + 1))
    tree = from_dict({"posterior": data}, coords=coords, dims=dims)
    tree.attrs.update({"model": model, "method": method})
    return tree


def marginal_draws(post: Posterior, draws: int = 1000, seed: int = 0, chains: int = 1):
    """Seeded draws from a posterior's marginals (independent factors), in the NUTS layout
    (:func:`crowdrank.inference.online.export.to_datatree`, which draws for every method).

    Parameters
    ----------
    post : Posterior
        A posterior with marginals.
    draws, chains : int
        Draws per chain, and chains.
    seed : int
        Seed of the draws.
    """
    from crowdrank.inference.online.export import to_datatree

    tree = to_datatree(_MarginalView(post), draws=draws, seed=seed, chains=chains)
    tree.attrs["method"] = post.method
    return tree


class _MarginalView:
    """What :func:`~crowdrank.inference.online.export.to_datatree` reads of a posterior."""

    def __init__(self, post: Posterior):
        m = post._marg()
        self.model, self.algorithm, self.options = post.model, post.algorithm, post.options
        self.model_spec = post.model_spec
        self.items, self.mu, self.sigma2 = m.items, m.mu, m.sigma2
        self.workers, self.alpha = m.workers, m.alpha


def moment_marginals(tree, model: str) -> Marginals:
    """Marginals moment-matched to the draws of ``tree`` (module docstring): Gaussian ``λ``;
    Beta ``η`` ``(a, b) = m·s, (1 − m)·s`` with ``s = m(1 − m)/v − 1``; Dirichlet rows
    ``α = m·s`` with ``s`` the geometric mean over stages of the same estimate.

    Parameters
    ----------
    tree : DataTree
        Draws in the NUTS layout.
    model : str
        A name of the model registry (``crowdrank.models.registry``).
    """
    post = tree["posterior"]
    lam = np.asarray(post["lambda"].transpose("chain", "draw", "item").values, float)
    flat = lam.reshape(-1, lam.shape[-1])
    items = [str(v) for v in post["item"].values]
    workers, alpha, fam = (), None, None
    if "eta" in post:
        # rows over stages are Dirichlet, one accuracy per worker a Beta; the family
        # moment-matches its own parameters
        family = DIRICHLET if "stage" in post["eta"].dims else BETA
        e = np.asarray(post["eta"].transpose("chain", "draw", *family.dims).values, float)
        alpha = family.moment_match(e.reshape((-1,) + e.shape[2:]))
        fam = family.name
        workers = tuple(str(v) for v in post["worker"].values)
    return Marginals(items, flat.mean(axis=0), flat.var(axis=0, ddof=1), workers, alpha,
                     fam, moment_matched=True)


# ====================================================================== adapters
def from_nuts(result, method: str = "nuts", model: str | ModelSpec | None = None
              ) -> Posterior:
    """A :class:`~crowdrank.inference.nuts.NutsResult` (its DataTree, gate, timings;
    ``model`` when the tree's attributes do not name it).

    Parameters
    ----------
    result : NutsResult
        What :func:`~crowdrank.inference.nuts.fit_nuts` returned.
    method : str
        The method's name.
    model : str or ModelSpec, optional
        The model (its spec is kept), when the tree does not name it.
    """
    t = dict(result.timings or {})
    post = Posterior.from_tree(result.idata, model=model, method=method, gate=result.gate,
                               seconds=float(t.get("total", math.nan)), native=result)
    post.diagnostics["timings"] = t
    if getattr(result, "adaptation", None) is not None:
        post.diagnostics["adaptation"] = result.adaptation
    return post


def _online_method(algorithm: str) -> str:
    if algorithm.startswith("ep-"):
        return "ep"
    return "trueskill" if algorithm == "trueskill" else "online"


def from_online(post, method: str | None = None) -> Posterior:
    """An :class:`~crowdrank.inference.online.OnlinePosterior` (one-pass update, EP,
    TrueSkill): Gaussian ``λ``, Dirichlet/Beta ``η``; ``clamped`` and EP's pass log are
    diagnostics.

    Parameters
    ----------
    post : OnlinePosterior
        An online state.
    method : str, optional
        The method's name (default: from the state's algorithm).
    """
    opts = dict(post.options or {})
    diag = {"clamped": dict(post.clamped or {}), "n_rankings": int(post.n_rankings)}
    if "ep" in opts:
        diag["ep"] = opts["ep"]
    alpha = None if post.alpha is None or not len(post.workers) else post.alpha
    spec = post.model_spec() if hasattr(post, "model_spec") else post.model
    return Posterior.from_marginals(
        spec, method or _online_method(post.algorithm), items=post.items, mu=post.mu,
        sigma2=post.sigma2, workers=post.workers if alpha is not None else (), alpha=alpha,
        diagnostics=diag, options=opts, seconds=float(post.seconds),
        algorithm=post.algorithm, native=post)


def from_batch(fit) -> Posterior:
    """A :class:`~crowdrank.inference.batch.api.BatchFit` (MAP/ML with Laplace's intervals,
    or the bootstrap's: the estimate and the refits' variance, the refits as draws).

    Parameters
    ----------
    fit : BatchFit
        A batch fit.
    """
    method = "bootstrap" if fit.algorithm == "bootstrap" else "laplace"
    diag = {"converged": bool(fit.converged), "iterations": int(fit.iterations),
            "grad_norm": float(fit.grad_norm), "objective": float(fit.objective),
            "stop_reason": fit.reason}
    draws = None if fit.draws is None else {"lambda": np.asarray(fit.draws, float)[None]}
    return Posterior.from_marginals(
        fit.model, method, items=fit.items, mu=fit.mu, sigma2=fit.sigma2, diagnostics=diag,
        options={"estimate": fit.method, "solver": fit.solver, "tol": fit.tol,
                 "prior": fit.prior, **fit.extra},
        seconds=float(fit.seconds), algorithm=f"{fit.method}-{fit.algorithm}", draws=draws,
        native=fit)


def from_em(fit) -> Posterior:
    """A :class:`~crowdrank.inference.batch.crowdbt_em.EMFit` (CrowdBT's MAP by EM: Laplace
    ``λ``, the Beta of each worker's responsibilities).

    Parameters
    ----------
    fit : EMFit
        CrowdBT's EM fit.
    """
    return Posterior.from_marginals(
        fit.model, "em", items=fit.items, mu=fit.mu, sigma2=fit.sigma2, workers=fit.workers,
        alpha=fit.alpha, diagnostics={"converged": bool(fit.converged),
                                      "iterations": int(fit.iterations),
                                      "grad_norm": float(fit.grad_norm),
                                      "objective": float(fit.objective)},
        options={"tol": fit.tol, "prior": fit.prior}, seconds=float(fit.seconds),
        algorithm=fit.algorithm, native=fit)


def as_posterior(obj) -> Posterior:
    """Any method's result as a :class:`Posterior` (a Posterior is returned as it is).

    Parameters
    ----------
    obj : object
        A NutsResult, OnlinePosterior, BatchFit, EMFit, DataTree, Posterior, or an object
        with the marginals' attributes.
    """
    if isinstance(obj, Posterior):
        return obj
    kind = type(obj).__name__
    if kind == "NutsResult":
        return from_nuts(obj)
    if kind == "OnlinePosterior":
        return from_online(obj)
    if kind == "BatchFit":
        return from_batch(obj)
    if kind == "EMFit":
        return from_em(obj)
    if kind == "DataTree":
        return Posterior.from_tree(obj)
    if all(hasattr(obj, a) for a in ("items", "mu", "sigma2")):
        # any other object with the marginals' attributes (a method's own result type)
        alpha = getattr(obj, "alpha", None)
        return Posterior.from_marginals(
            str(getattr(obj, "model", "") or ""), str(getattr(obj, "method", "") or kind),
            items=obj.items, mu=obj.mu, sigma2=obj.sigma2,
            workers=getattr(obj, "workers", None) or () if alpha is not None else (),
            alpha=alpha, options=dict(getattr(obj, "options", None) or {}),
            seconds=float(getattr(obj, "seconds", math.nan)), native=obj)
    raise TypeError(f"cannot read a {kind} as a posterior: expected a Posterior, NutsResult, "
                    "OnlinePosterior, BatchFit, EMFit or DataTree")


# ====================================================================== files
