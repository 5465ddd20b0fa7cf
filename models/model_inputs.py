"""Padded NumPy arrays that the NumPyro and PyMC models consume (docs/design.md, Models).

Both PPL routes read the *same* :class:`ModelInputs`, built once here from a
:class:`~crowdrank.models.data.Rankings` and a :class:`~crowdrank.models.priors.Priors`, so that the two
back-ends cannot disagree on the data or the prior. Everything is plain NumPy: importing
this module pulls in neither JAX nor PyTensor.

Layouts
-------
* PL, COUPLE, normalised COUPLE: the per-position layout ``index, mask`` of shape
  ``(K, N)`` from :meth:`Rankings.positions` (one column per ranking).
* BT, CrowdBT: the fully rank-broken pairs ([Pan18], Lemma 1) as ``(2, P)`` with an
  ``origin`` array mapping each pair to its source ranking, so that the pointwise
  log-likelihood can be summed back to one value per *ranking* (LOO compares models on the
  same observations).
* Columns are sorted by ranking length (longest first, stable), and :attr:`ModelInputs.blocks`
  gives the ``(k, start, stop)`` column range of each length. The models then work on dense
  ``(k, n_k)`` slices with static shapes: no masks, no ``-inf`` padding and no work on the
  stages a short ranking does not have (measured ~3x faster at the paper's scale than the
  masked ``(K, N)`` form). ``origin`` maps every column back to its source ranking.
* Normalised COUPLE also needs, for every ranking length ``k >= 3``, the ``k!``
  permutations of positions, to sum Eq. 4 over all orderings of the task (``k = 2`` is
  skipped: the two orderings' Eq. 4 values sum to exactly 1).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import permutations

import numpy as np

from .data import DataError, Rankings
from .priors import Priors
from .registry import MODELS, ModelSpec, as_spec, get, names  # noqa: F401  (MODELS re-exported)
from .reparam import (  # noqa: F401  (the model inputs' names, re-exported)
    BOOST_BELOW,
    INFORMED_ALPHA,
    LEVEL_SD,
    boost_mask,
    boost_split,
    level_log_ratio,
)

PAIRWISE = names(pairwise=True)
#: Normalised COUPLE enumerates ``k!`` orderings per ranking.
MAX_K_NORMALIZED = 6


@dataclass(frozen=True, eq=False)
class PermGroup:
    """Rankings of one length ``k`` with the ``k!`` position permutations.

    ``start:stop`` is the block's column range; ``perms`` ``(P, k)`` with ``perms[0]`` the
    identity.
    """

    k: int
    start: int
    stop: int
    perms: np.ndarray


@dataclass(frozen=True, eq=False)
class ModelInputs:
    """Everything a PPL model needs, as arrays.

    Attributes
    ----------
    model : str
        One of :data:`MODELS`.
    n_items, n_workers, n_obs : int
        ``L``, ``W`` and the number of *source* rankings (pointwise log-lik length).
    index, mask : ndarray, shape (K, M)
        Gather-safe item indices and the real-position mask; ``M = N`` rankings, or the
        number of rank-broken pairs (``K = 2``) for BT/CrowdBT.
    worker : ndarray, shape (M,)
    origin : ndarray, shape (M,)
        Source ranking ``0..n_obs-1`` of each column.
    alpha : ndarray or None
        ``(W, K)`` Dirichlet concentrations (COUPLE), ``(W, 2)`` Beta ``(a, b)`` (CrowdBT),
        ``(W, 2)`` Gamma ``(shape, rate)`` (PeerGrader), ``None`` for PL/BT.
    mu0, sigma0 : float
        ``λ_r ~ Normal(mu0, sigma0)``.
    blocks : tuple of (k, start, stop)
        Column range of the rankings of each length ``k`` (columns sorted by length).
    groups : tuple of PermGroup
        Normalised COUPLE only: one per ranking length ``k >= 3``.
    order : ndarray, shape (n_obs, K_data)
        The observed rankings in the data's order (item indices best first, ``-1``
        padding): the value of the PPLs' observed site (``docs/design.md``, "Observed
        likelihoods"). The item set and worker of each row are the task; the order is
        the observation.
    obs_worker : ndarray, shape (n_obs,)
        The worker of each observed ranking.
    """

    model: str
    n_items: int
    n_workers: int
    n_obs: int
    index: np.ndarray
    mask: np.ndarray
    worker: np.ndarray
    origin: np.ndarray
    alpha: np.ndarray | None
    mu0: float
    sigma0: float
    blocks: tuple = ()
    groups: tuple = ()
    order: np.ndarray | None = None
    obs_worker: np.ndarray | None = None
    #: The model's :class:`~crowdrank.models.registry.ModelSpec`, carried so that the
    #: programs traced from these inputs read it instead of looking ``model`` up again
    #: (looked up here when only the name is given).
    spec: ModelSpec | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self):
        if self.spec is None:
            object.__setattr__(self, "spec", get(self.model))

    @property
    def K(self) -> int:
        return int(self.index.shape[0])

    @property
    def has_eta(self) -> bool:
        return self.alpha is not None


def model_inputs(model: str | ModelSpec, data: Rankings, priors: Priors) -> ModelInputs:
    """Build the arrays of ``model`` (a name or its spec) for ``data`` under ``priors``.

    Worker priors are re-ordered to ``data.workers`` (:meth:`Priors.for_data`), which also
    raises a :class:`DataError` when a worker has no prior or the prior is too short.
    """
    spec = as_spec(model)
    if data.n_rankings == 0:
        raise DataError("no rankings to fit", data.source)
    # A fresh origin 0..N-1: the pointwise log-lik is indexed by this data set's rankings,
    # whatever subset history the container carries.
    fresh = dataclasses.replace(data, origin=None)
    fam = spec.worker_prior
    # the family reads its own parameters: Dirichlet α[:, :K], Beta (a, b), Gamma (shape, rate)
    alpha = None if fam is None else fam.table(spec.worker_priors(priors, data), data.K)
    return ModelInputs(
        model=spec.name, n_items=data.n_items, n_workers=data.n_workers,
        n_obs=data.n_rankings, alpha=None if alpha is None else np.asarray(alpha, float),
        mu0=float(priors.mu0), sigma0=float(priors.sigma0), spec=spec,
        **_layout(spec, fresh))


def _layout(spec: ModelSpec, data: Rankings) -> dict:
    """The column layout of the model ``spec`` for ``data`` (origin ``0..N-1``): the
    fields of :class:`ModelInputs` that depend on the observed orders."""
    if spec.pairwise:
        pairs = data.rank_break()
        index, mask = pairs.positions()
        worker, origin = pairs.worker, pairs.origin
    else:
        index, mask = data.positions()
        worker, origin = data.worker, data.origin
    # longest rankings first, file order within a length: one dense block per length
    lengths = mask.sum(axis=0)
    srt = np.argsort(-lengths, kind="stable")
    index, mask, worker, origin, lengths = (index[:, srt], mask[:, srt], worker[srt],
                                            origin[srt], lengths[srt])
    blocks = []
    for k in sorted(set(lengths.tolist()), reverse=True):
        sel = np.flatnonzero(lengths == k)
        blocks.append((int(k), int(sel[0]), int(sel[-1]) + 1))
    groups = ()
    if spec.normalized:
        # the model divides Eq. 4 by its sum over the k! orderings of each task
        if data.K > MAX_K_NORMALIZED:
            raise DataError(f"normalised COUPLE enumerates k! orderings and supports "
                            f"k <= {MAX_K_NORMALIZED}; the data have k = {data.K}", data.source)
        groups = tuple(PermGroup(k, a, b, np.array(list(permutations(range(k))), np.int32))
                       for k, a, b in blocks if k >= 3)  # Z = 1 exactly for pairs
    return {"index": np.ascontiguousarray(index, dtype=np.int32),
            "mask": np.asarray(mask, bool), "worker": np.asarray(worker, np.int32),
            "origin": np.asarray(origin, np.int64), "blocks": tuple(blocks), "groups": groups,
            "order": np.ascontiguousarray(data.order.T, dtype=np.int32),
            "obs_worker": np.asarray(data.worker, np.int32)}


def with_orders(inputs: ModelInputs, order) -> ModelInputs:
    """``inputs`` for other orders of the same tasks: ``order`` ``(n_obs, K)`` (item
    indices best first, ``-1`` padding) must have each observation's length; workers,
    priors and sizes are kept. What an observed-data distribution's ``log_prob`` scores
    when it is handed orders other than the data's (e.g. its own draws)."""
    order = np.asarray(order)
    if inputs.order is not None and order.shape == inputs.order.shape \
            and np.array_equal(order, inputs.order):
        return inputs
    if inputs.order is None or order.shape != inputs.order.shape or \
            not np.array_equal(order >= 0, inputs.order >= 0):
        raise DataError(f"orders of shape {order.shape} do not match the {inputs.n_obs} "
                        "tasks (their lengths) of these inputs", "<orders>")
    data = Rankings(items=[str(r) for r in range(inputs.n_items)],
                    workers=[str(w) for w in range(inputs.n_workers)],
                    order=order.T, lengths=(order >= 0).sum(axis=1),
                    worker=inputs.obs_worker, source="<orders>")
    return dataclasses.replace(inputs, **_layout(inputs.spec, data))


def eta_site_shape(inputs: ModelInputs) -> tuple[int, ...] | None:
    """Shape of the ``eta`` parameter: ``(W, K)`` COUPLE, ``(W,)`` CrowdBT, ``None``."""
    spec = inputs.spec
    if spec.eta_scalar:
        return (inputs.n_workers,)
    if spec.has_eta:
        return (inputs.n_workers, inputs.K)
    return None
