"""The models, one spec each: the single place that says what a model *is*.

In the spirit of NumPyro's ``NAME_TO_MODEL`` and crowd-kit's data-set registry, every layer
and the CLI look a model up here instead of branching on its name: which worker prior it
has and how long it is, whether its data are rank-broken into pairs, whether its
generative process is exact (what SBC needs), which online approximation the audit
compares with NUTS, and its NumPy reference log-likelihood. A new model (PeerGrader,
contextual BT) is one more :class:`ModelSpec` here plus its functions.

Plain Python and NumPy only: importing this module pulls in neither JAX nor PyTensor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .errors import UsageError


@dataclass(frozen=True)
class ModelSpec:
    """What one model is (``docs/design.md``, "Models").

    Attributes
    ----------
    name : str
        The name used everywhere (CLI ``--model``, files, reports).
    title : str
        One line for ``--help`` and reports.
    worker_prior : {"dirichlet", "beta", "gamma", None}
        ``η_w ~ Dirichlet(α_w)`` over ``K`` entries (COUPLE), ``Beta(a_w, b_w)`` (CrowdBT, read
        from :meth:`Priors.beta`), ``Gamma(shape, rate)`` (PeerGrader's reliability, read
        from :meth:`Priors.gamma_params`), or no worker parameter.
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
        Name of the NumPy reference log-likelihood in :mod:`models.likelihood`.
    """

    name: str
    title: str
    worker_prior: str | None
    pairwise: bool
    exact_simulator: bool
    online: str | None
    audited: bool
    reference: str

    @property
    def has_eta(self) -> bool:
        return self.worker_prior is not None

    def prior_K(self, data_K: int) -> int | None:
        """Length of the worker prior this model reads for data with longest ranking
        ``data_K`` (``None``: no worker prior): Beta's 2, or the data's ``K``."""
        if self.worker_prior in ("beta", "gamma"):
            return 2
        if self.worker_prior == "dirichlet":
            return data_K
        return None

    def worker_priors(self, priors, data):
        """``priors`` checked against ``data`` and cut to this model's length."""
        K = self.prior_K(data.K)
        return priors if K is None else priors.for_data(data, K=K)

    def reference_loglik(self) -> Callable:
        from . import likelihood
        return getattr(likelihood, self.reference)


REGISTRY: dict[str, ModelSpec] = {spec.name: spec for spec in (
    ModelSpec("pl", "Plackett–Luce [Plackett75, Luce59]", None, False, True, "pl", False,
              "pl_loglik"),
    ModelSpec("bt", "Bradley–Terry on fully rank-broken pairs [BT52]", None, True, True, "bt",
              False, "bt_loglik"),
    ModelSpec("crowdbt", "CrowdBT: Bradley–Terry with a Beta accuracy per worker [Chen13]",
              "beta", True, True, "crowdbt", True, "crowdbt_loglik"),
    ModelSpec("couple", "COUPLE: stagewise Plackett–Luce with a Dirichlet uncertainty vector "
              "per worker [Pan18, Eq. 3-4]", "dirichlet", False, False, "couple", True,
              "couple_loglik"),
    ModelSpec("couple-normalized", "COUPLE normalised over the k! orderings of each task "
              "(exact generative process)", "dirichlet", False, True, "couple", False,
              "couple_normalized_loglik"),
    ModelSpec("peergrader", "PeerGrader: Plackett–Luce on reliability-scaled scores η_g·λ, "
              "η_g ~ Gamma [Raman14]", "gamma", False, True, None, False,
              "peergrader_loglik"),
)}

#: Every model name, in the order ``--help`` lists them.
MODELS: tuple[str, ...] = tuple(REGISTRY)


def get(name: str) -> ModelSpec:
    """The spec of ``name``, or a one-line :class:`UsageError` naming the choices."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown model {name!r}; expected one of {MODELS}") from None


def names(**where) -> tuple[str, ...]:
    """Model names whose spec has every given attribute value, e.g. ``names(pairwise=True)``
    or ``names(audited=True)``."""
    return tuple(n for n, s in REGISTRY.items()
                 if all(getattr(s, k) == v for k, v in where.items()))
