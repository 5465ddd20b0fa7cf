"""The models, one spec each: the single place that says what a model *is*.

In the spirit of NumPyro's ``NAME_TO_MODEL`` and crowd-kit's data-set registry, every layer
and the CLI look a model up here instead of branching on its name: which worker prior it
has and how long it is, whether its data are rank-broken into pairs, whether its
generative process is exact (what SBC needs), which online approximation the audit
compares with NUTS, and its NumPy reference log-likelihood — and names the model's
functions (simulator, NumPyro and PyMC likelihood columns and draws, the exported array
forms, SBC flattening, pair likelihood) that the layers call through :meth:`ModelSpec.fn`.
A new model is one more :class:`ModelSpec` here plus its functions in its own module
(``docs/design.md``, "The model registry: adding a model"; ``tests/test_registry.py``
registers a toy model so). The pair-table models are entries of the same type
(``data="pair-table"``, :data:`PAIR_TABLE`); every function an entry names lives in
``crowdrank.models`` (models import nothing from inference).

Plain Python and NumPy only: importing this module pulls in neither JAX nor PyTensor.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .errors import UsageError
from .families import BETA, DIRICHLET, GAMMA, WorkerFamily, family


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """What one model is (``docs/design.md``, "Models").

    Built with keyword arguments only (every field but ``name``, ``title`` and
    ``reference`` has a default: no worker prior, not pairwise, no exact simulator, no
    online update, not audited). The fields from ``simulate_report`` on are the model's
    functions (``"module:function"`` strings, or callables, resolved on first use by
    :meth:`fn`, so that this module stays NumPy-only).

    Attributes
    ----------
    name : str
        The name used everywhere (CLI ``--model``, files, reports).
    title : str
        One line for ``--help`` and reports.
    worker_prior : WorkerFamily or None
        The worker prior's family (:mod:`crowdrank.models.families`): :data:`DIRICHLET`,
        ``η_w ~ Dirichlet(α_w)`` over ``K`` entries (COUPLE); :data:`BETA`,
        ``Beta(a_w, b_w)`` (CrowdBT, read from :meth:`Priors.beta`); :data:`GAMMA`,
        ``Gamma(shape, rate)`` (PeerGrader's reliability, read from
        :meth:`Priors.gamma_params`); or ``None``, no worker parameter. A family's name
        (``"beta"``) is accepted and turned into the object. Layers ask the family for
        what they need (its sites, draws, marginals, flattening) instead of comparing it.
    pairwise : bool
        k-ary data are fully rank-broken into pairs before fitting (BT, CrowdBT).
    exact_simulator : bool
        The forward simulator draws exactly from the likelihood, so simulation-based
        calibration applies (stagewise COUPLE's Eq. 4 is not normalised: no).
    online : str or None
        The online approximation of this model (``inference.online`` model name), or None.
    audited : bool
        ``crowdrank audit`` compares this model's NUTS and online posteriors (models with
        a worker parameter, whose approximation is the paper's subject).
    reference : str
        The NumPy reference log-likelihood of one ranking: a name in
        :mod:`crowdrank.models.likelihood`, or ``"module:function"``. Its signature is
        ``f(lam, ranking)`` without a worker prior, ``f(lam, eta_w, ranking)`` with one
        (``eta_w`` a scalar for Beta/Gamma priors, a row for Dirichlet).
    simulate_report : str or None
        NumPy ``f(rng, lam, subsets, true_order, eta_rows) -> reported (n, k)``: how a
        worker reports a task whose true PL order was drawn (:func:`crowdrank.models.simulate.simulate`);
        ``None``: no forward simulator.
    redraw : str or None
        NumPy ``f(rng, lam, items, eta_w) -> (n, k)``: new orders of tasks of one length by
        the generative process; ``eta_w`` the rows' ``exp`` of the PPL worker table
        (:func:`crowdrank.models.simulate.redraw_orders`, PyMC's ``random``).
    numpyro_columns : str
        JAX ``f(inputs, lam, log_eta) -> (M,)``: log-likelihood of every column of the
        length-sorted layout (:func:`crowdrank.models.numpyro_models.column_loglik`).
    numpyro_fast : str or None
        JAX ``f(inputs, lam, log_eta, reduce) -> (n_obs,) or ()``: a faster twin of the
        columns with hand-written derivatives, used when ``fast=True``.
    numpyro_draw : str
        JAX ``f(key, items, log_w, lam) -> (n, k)``: the NumPyro site's ``sample``.
    pymc_columns : str
        PyTensor twin of ``numpyro_columns`` (:func:`crowdrank.models.pymc_models.column_loglik`).
    sbc_flatten : str or None
        ``f(lam, eta) -> (..., P)``: the parameters SBC ranks, from NUTS draws or the
        simulated truth (:mod:`crowdrank.validation.pipelines.sbc`); ``None`` (the default): λ,
        centred λ and the worker family's flattening of η
        (:meth:`crowdrank.models.families.WorkerFamily.flatten`).
    pair_loglik : str or None
        NumPy ``f(lam, eta, winner, loser, worker) -> (..., P)``: ``log P`` of a pair's order
        as a two-item task of that worker, vectorised over draws; the composite pairwise LOO
        unit (:mod:`crowdrank.validation.predictive`) sums it over each ranking's rank-broken pairs.
        ``None``: the model is left out of that comparison.
    array_loglik : str or None
        ``f(ops, x, valid, log_w, K) -> (n,)``: the masked log-likelihood of each row of a
        padded ``(n, K)`` table of orders (``x`` the scores ``λ`` gathered at the orders,
        ``valid`` the real positions, ``log_w`` the rows' worker table or ``None``), written
        once over the PPL's array namespace ``ops`` (:mod:`crowdrank.models.array_forms`):
        the exported form of both PPLs (:func:`crowdrank.models.numpyro.arrays.masked_loglik`,
        ``make_model``; :func:`crowdrank.models.pymc_arrays.masked_loglik`,
        ``build_data_model``) and the sampler's site under traced orders. ``None``: the
        model has no function of arrays, and asking for one is a ``ValueError`` that says
        so.
    numpyro_array_draw : str or None
        JAX ``f(key, items, lam, log_w, lengths) -> (n, K)``: new orders of the padded
        item sets by the generative process (:func:`crowdrank.models.numpyro.arrays.masked_draw`;
        PyMC's draw is the NumPy ``redraw``).
    order_prob : str or None
        NumPy ``f(lam, [eta_w,] ranking) -> float``: the probability that the generative
        process (``numpyro_draw``, ``redraw``) reports ``ranking`` for a task of its items,
        the oracle of the draw tests (``tests/test_observed.py``); ``None``: the
        likelihood is that law, ``exp(reference)`` (:meth:`draw_prob`).
    normalized : bool
        The likelihood divides Eq. 4 by its sum over the ``k!`` orderings of each task
        (its inputs carry the permutation groups, ``ModelInputs.groups``).
    sbc_hint : str or None
        Why SBC refuses the model (shown with the refusal), or ``None``.
    data : str
        What the model reads: ``"rankings"`` (:class:`crowdrank.models.data.Rankings`, the
        ranking layers apply: :data:`REGISTRY`) or ``"pair-table"`` (presented pairs with
        extra columns, :mod:`crowdrank.models.pair_table`: :data:`PAIR_TABLE`).
    table_simulate : str or None
        A pair-table model's simulator (its own signature; ``crowdrank simulate``).
    numpyro_program, pymc_program : str or None
        A pair-table model's NumPyro and PyMC program builders
        (:mod:`crowdrank.inference.nuts.pair_nuts`).
    approx : str or None
        A pair-table model's point method that the audit compares with NUTS: a method name
        of :mod:`crowdrank.inference.methods` (the inference side registers its function by
        the model's name, :mod:`crowdrank.inference.batch.pair_fits`).
    covariates : bool
        A pair-table model that reads item covariates of each pair (``--covariates``;
        simulated with ``--n-covariates``, its coefficients ``γ`` written to
        ``coefficients.csv``).
    category : bool
        A pair-table model that needs each pair's category column (``--category``): its
        worker accuracies are per category.
    worker_bias : bool
        A pair-table model with a per-worker bias towards the item shown first (simulated
        workers' ``η`` and ``β`` written to ``workers.csv``).
    """

    name: str
    title: str
    reference: str | Callable
    worker_prior: WorkerFamily | None = None
    pairwise: bool = False
    exact_simulator: bool = False
    online: str | None = None
    audited: bool = False
    simulate_report: str | None = None
    redraw: str | None = None
    numpyro_columns: str = "crowdrank.models.numpyro_models:ranking_columns"
    numpyro_fast: str | None = None
    numpyro_draw: str = "crowdrank.models.numpyro_models:draw_pl"
    pymc_columns: str = "crowdrank.models.pymc_models:ranking_columns"
    sbc_flatten: str | None = None
    pair_loglik: str | None = None
    array_loglik: str | None = None
    numpyro_array_draw: str | None = None
    order_prob: str | None = None
    normalized: bool = False
    sbc_hint: str | None = None
    data: str = "rankings"
    table_simulate: str | None = None
    numpyro_program: str | None = None
    pymc_program: str | None = None
    approx: str | None = None
    covariates: bool = False
    category: bool = False
    worker_bias: bool = False

    def __post_init__(self):
        object.__setattr__(self, "worker_prior", family(self.worker_prior))

    @property
    def has_eta(self) -> bool:
        return self.worker_prior is not None

    @property
    def eta_scalar(self) -> bool:
        """One number per worker (Beta accuracy, Gamma reliability), not a row."""
        return self.worker_prior is not None and self.worker_prior.scalar

    @property
    def has_simulator(self) -> bool:
        return self.simulate_report is not None

    def fn(self, role: str) -> Callable | None:
        """The function named by field ``role`` (``"numpyro_columns"``, ``"redraw"``, …),
        imported on first use; ``None`` when the field is ``None``.

        Parameters
        ----------
        role : str
            The name of the field that names the function.
        """
        return resolve(getattr(self, role))

    def prior_K(self, data_K: int) -> int | None:
        """Length of the worker prior this model reads for data with longest ranking
        ``data_K`` (``None``: no worker prior): Beta's 2, or the data's ``K``.

        Parameters
        ----------
        data_K : int
            The data's longest ranking.
        """
        return None if self.worker_prior is None else self.worker_prior.prior_K(data_K)

    def worker_priors(self, priors, data):
        """``priors`` checked against ``data`` and cut to this model's length.

        Parameters
        ----------
        priors : Priors
            Priors covering the data's workers.
        data : Rankings
            The data.
        """
        K = self.prior_K(data.K)
        return priors if K is None else priors.for_data(data, K=K)

    def draw_prob(self) -> Callable:
        """The law of one task's draw, ``f(lam, [eta_w,] ranking) -> float``
        (``order_prob``, or ``exp`` of the reference log-likelihood)."""
        f = self.fn("order_prob")
        if f is not None:
            return f
        ref = self.reference_loglik()
        return lambda *args: float(np.exp(ref(*args)))

    def reference_loglik(self) -> Callable:
        """The NumPy reference log-likelihood of one ranking (``reference``, resolved)."""
        ref = self.reference
        if isinstance(ref, str) and ":" not in ref:
            ref = f"crowdrank.models.likelihood:{ref}"
        return resolve(ref)


def resolve(target: str | Callable | None) -> Callable | None:
    """``"package.module:function"`` → the function (imported now); a callable or ``None``
    is returned as is.

    Parameters
    ----------
    target : str, callable or None
        ``"package.module:function"``, or what is returned as it is.
    """
    if target is None or callable(target):
        return target
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


_SIM = "crowdrank.models.simulate"
_NP = "crowdrank.models.numpyro_models"
_PM = "crowdrank.models.pymc_models"
_LL = "crowdrank.models.likelihood"
_NA = "crowdrank.models.numpyro.arrays"
_AF = "crowdrank.models.array_forms"

REGISTRY: dict[str, ModelSpec] = {spec.name: spec for spec in (
    ModelSpec(name="pl", title="Plackett–Luce [Plackett75, Luce59]", exact_simulator=True,
              online="pl", reference="pl_loglik", simulate_report=f"{_SIM}:report_true",
              redraw=f"{_SIM}:redraw_pl", pair_loglik=f"{_LL}:pair_bt",
              array_loglik=f"{_AF}:pl", numpyro_array_draw=f"{_NA}:draw_pl_array"),
    ModelSpec(name="bt", title="Bradley–Terry on fully rank-broken pairs [BT52]",
              pairwise=True, exact_simulator=True, online="bt", reference="bt_loglik",
              simulate_report=f"{_SIM}:report_true",
              redraw=f"{_SIM}:redraw_pl", numpyro_columns=f"{_NP}:pair_columns",
              pymc_columns=f"{_PM}:pair_columns", pair_loglik=f"{_LL}:pair_bt",
              array_loglik=f"{_AF}:bt", numpyro_array_draw=f"{_NA}:draw_pl_array",
              order_prob=f"{_LL}:pl_order_prob"),
    ModelSpec(name="crowdbt",
              title="CrowdBT: Bradley–Terry with a Beta accuracy per worker [Chen13]",
              worker_prior=BETA, pairwise=True, exact_simulator=True, online="crowdbt",
              audited=True, reference="crowdbt_loglik",
              simulate_report=f"{_SIM}:report_stagewise", redraw=f"{_SIM}:redraw_crowdbt",
              numpyro_columns=f"{_NP}:pair_columns", numpyro_draw=f"{_NP}:draw_crowdbt",
              pymc_columns=f"{_PM}:pair_columns", pair_loglik=f"{_LL}:pair_crowdbt",
              array_loglik=f"{_AF}:crowdbt", numpyro_array_draw=f"{_NA}:draw_crowdbt_array",
              order_prob=f"{_LL}:crowdbt_order_prob"),
    ModelSpec(name="couple", title="COUPLE: stagewise Plackett–Luce with a Dirichlet "
              "uncertainty vector per worker [Pan18, Eq. 3-4]", worker_prior=DIRICHLET,
              online="couple", audited=True, reference="couple_loglik",
              simulate_report=f"{_SIM}:report_stagewise",
              redraw=f"{_SIM}:redraw_couple", numpyro_columns=f"{_NP}:couple_columns_ad",
              numpyro_fast=f"{_NP}:couple_fast", numpyro_draw=f"{_NP}:draw_couple",
              pymc_columns=f"{_PM}:couple_columns", pair_loglik=f"{_LL}:pair_couple",
              array_loglik=f"{_AF}:couple", numpyro_array_draw=f"{_NA}:draw_couple_array",
              order_prob=f"{_LL}:couple_order_prob",
              sbc_hint="stagewise COUPLE has no normalised generative process, so no "
                       "exact simulator: use couple-normalized"),
    ModelSpec(name="couple-normalized", title="COUPLE normalised over the k! orderings of "
              "each task (exact generative process)", worker_prior=DIRICHLET,
              exact_simulator=True, online="couple", reference="couple_normalized_loglik",
              simulate_report=f"{_SIM}:report_normalized",
              redraw=f"{_SIM}:redraw_normalized", numpyro_columns=f"{_NP}:couple_columns_ad",
              numpyro_draw=f"{_NP}:draw_normalized", pymc_columns=f"{_PM}:couple_columns",
              pair_loglik=f"{_LL}:pair_couple",
              array_loglik=f"{_AF}:couple_normalized",
              numpyro_array_draw=f"{_NA}:draw_normalized_array",
              normalized=True),
    ModelSpec(name="peergrader", title="PeerGrader: Plackett–Luce on reliability-scaled "
              "scores η_g·λ, η_g ~ Gamma [Raman14]", worker_prior=GAMMA,
              exact_simulator=True, reference="peergrader_loglik",
              redraw=f"{_SIM}:redraw_peergrader",
              numpyro_columns=f"{_NP}:scaled_columns", numpyro_draw=f"{_NP}:draw_scaled",
              pymc_columns=f"{_PM}:scaled_columns", pair_loglik=f"{_LL}:pair_scaled",
              array_loglik=f"{_AF}:peergrader",
              numpyro_array_draw=f"{_NA}:draw_scaled_array"),
)}

#: Every model name, in the order ``--help`` lists them.
MODELS: tuple[str, ...] = tuple(REGISTRY)


def get(name: str) -> ModelSpec:
    """The spec of ``name``, or a one-line :class:`UsageError` naming the choices.

    Parameters
    ----------
    name : str
        The model's name (``--model``).
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown model {name!r}; expected one of {MODELS}") from None


def as_spec(model: str | ModelSpec) -> ModelSpec:
    """``model``'s spec: a :class:`ModelSpec` as it is, a name looked up (:func:`get`).

    The layers take either, so that a name is looked up once, where the user's name
    enters (a CLI command, a public function), and the spec travels down from there.

    Parameters
    ----------
    model : str or ModelSpec
        A model's name (``--model``) or its spec.
    """
    return model if isinstance(model, ModelSpec) else get(model)


def name_of(model: str | ModelSpec) -> str:
    """``model``'s name, from a name or a spec (no lookup).

    Parameters
    ----------
    model : str or ModelSpec
        A model's name or its spec.
    """
    return model.name if isinstance(model, ModelSpec) else model


def names(**where) -> tuple[str, ...]:
    """Model names whose spec has every given attribute value, e.g. ``names(pairwise=True)``
    or ``names(audited=True)``.

    Parameters
    ----------
    **where
        Attribute values of :class:`ModelSpec` every returned model has.
    """
    return tuple(n for n, s in REGISTRY.items()
                 if all(getattr(s, k) == v for k, v in where.items()))


#: Models that read *presented pairs with extra columns* (a pairwise CSV's ``left`` shown
#: first, a category, covariates: :mod:`crowdrank.models.pair_table`) instead of
#: :class:`crowdrank.models.data.Rankings`: entries of the same type with ``data="pair-table"``,
#: kept out of :data:`REGISTRY`/:data:`MODELS` because the ranking layers (model inputs,
#: online updates, SBC, LOO) do not apply to them; ``fit``/``audit`` dispatch on this
#: table. ``reference`` is the per-pair NumPy log-likelihood ``f(structure, ...)``;
#: ``table_simulate``, ``numpyro_program``, ``pymc_program`` name the model's own functions
#: and ``approx`` the point method the audit compares with NUTS (its function is
#: registered on the inference side, by the model's name).
_CBX = "crowdrank.models.crowdbt_ext"
_CTX = "crowdrank.models.contextual"
PAIR_TABLE: dict[str, ModelSpec] = {spec.name: spec for spec in (
    ModelSpec(name="crowdbt-bias", title="CrowdBT with a per-worker bias β_w towards the item "
              "shown first [Chen13]", worker_prior=BETA, pairwise=True, exact_simulator=True,
              reference=f"{_CBX}:loglik", data="pair-table", table_simulate=f"{_CBX}:simulate",
              numpyro_program=f"{_CBX}:numpyro_model", pymc_program=f"{_CBX}:pymc_model",
              approx="em", worker_bias=True),
    ModelSpec(name="crowdbt-domain", title="CrowdBT with an accuracy per worker and category "
              "ρ_{w,c} [Chen13]", worker_prior=BETA, pairwise=True, exact_simulator=True,
              reference=f"{_CBX}:loglik", data="pair-table", table_simulate=f"{_CBX}:simulate",
              numpyro_program=f"{_CBX}:numpyro_model", pymc_program=f"{_CBX}:pymc_model",
              approx="em", category=True),
    ModelSpec(name="contextual-bt", title="Contextual Bradley–Terry: (λ_i − λ_j) + "
              "x·(γ_i − γ_j) [Chiang24]", pairwise=True, exact_simulator=True,
              reference=f"{_CTX}:loglik", data="pair-table", table_simulate=f"{_CTX}:simulate",
              numpyro_program=f"{_CTX}:numpyro_model", pymc_program=f"{_CTX}:pymc_model",
              approx="map", covariates=True),
)}

#: The pair-table model names (``crowdrank fit``/``audit --model``).
PAIR_MODELS: tuple[str, ...] = tuple(PAIR_TABLE)


def pair_names(**where) -> tuple[str, ...]:
    """Pair-table model names whose spec has every given attribute value, e.g.
    ``pair_names(covariates=True)`` (as :func:`names` for :data:`REGISTRY`).

    Parameters
    ----------
    **where
        Attribute values of :class:`ModelSpec` every returned model has.
    """
    return tuple(n for n, s in PAIR_TABLE.items()
                 if all(getattr(s, k) == v for k, v in where.items()))
