"""The one prior object that both inference routes read (docs/design.md, Models, Online).

``λ_r ~ Normal(mu0, sigma0²)`` for every item; for every worker a Dirichlet concentration
vector ``α_w`` of length ``K`` (COUPLE), whose first two entries are the Beta ``(a_w, b_w)``
of CrowdBT — so ``Dir(α1, α2) = Beta(α1, α2)`` and COUPLE with ``k = 2`` is CrowdBT under the
*same* prior. NUTS and the online methods must be given the same :class:`Priors`, otherwise
a comparison between them means nothing.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from crowdrank.models.errors import UsageError

from .data import DataError, Rankings

#: PeerGrader's prior on every grader's reliability ``η_g ~ Gamma(shape, rate)``: mean 1
#: (a grader as reliable as the average; ``η_g → 0`` is a random grader), sd ``1/√10``.
#: [Raman14] use a Gamma prior of mean 1; these hyperparameters are ours (configurable
#: through :attr:`Priors.gamma`).
PEERGRADER_GAMMA = (10.0, 10.0)


@dataclass(frozen=True, eq=False)
class Priors:
    """Item and worker priors.

    Attributes
    ----------
    workers : tuple of str
        Worker ids, in the order of the rows of :attr:`alpha`.
    alpha : ndarray, shape (W, K)
        Dirichlet concentrations ``α_w`` (COUPLE); CrowdBT reads ``alpha[:, :2]`` as
        ``(a_w, b_w)``.
    mu0, sigma0 : float
        The Normal prior on every item score.
    spec : str
        How the worker prior was made (for reports), e.g. ``"geometric:a0=10,a=6"``.
    ab : ndarray, shape (W, 2), optional
        CrowdBT's ``(a_w, b_w)`` when they are not ``alpha[:, :2]``: gold priors count
        correct and wrong rank-broken *pairs* for CrowdBT but stage offsets for COUPLE,
        which differ for ``k >= 3`` (and agree on pairwise gold), and the paper's real-data
        choice ``Beta(5, 1)`` for every worker (:meth:`with_crowdbt_beta`).
    gamma : ndarray, shape (W, 2), optional
        PeerGrader's ``Gamma(shape, rate)`` on each grader's reliability ``η_g``
        [Raman14]; default :data:`PEERGRADER_GAMMA` for every worker (:meth:`gamma_params`).
    """

    workers: tuple[str, ...]
    alpha: np.ndarray
    mu0: float = 0.0
    sigma0: float = 1.0
    spec: str = "explicit"
    ab: np.ndarray | None = None
    gamma: np.ndarray | None = None

    def __post_init__(self):
        alpha = np.array(self.alpha, dtype=float)
        if alpha.ndim != 2 or alpha.shape[0] != len(self.workers) or alpha.shape[1] < 2:
            raise UsageError(f"alpha must be (W={len(self.workers)}, K>=2), got {alpha.shape}")
        if not np.all(np.isfinite(alpha)) or np.any(alpha <= 0):
            raise UsageError("every worker prior concentration must be finite and > 0")
        if not (math.isfinite(self.mu0) and math.isfinite(self.sigma0) and self.sigma0 > 0):
            raise UsageError("prior mu0 must be finite and sigma0 finite and > 0")
        alpha.setflags(write=False)
        object.__setattr__(self, "alpha", alpha)
        if self.ab is not None:
            ab = np.array(self.ab, dtype=float)
            if ab.shape != (len(self.workers), 2) or not np.all(np.isfinite(ab)) \
                    or np.any(ab <= 0):
                raise UsageError("ab must be (W, 2), finite and > 0")
            ab.setflags(write=False)
            object.__setattr__(self, "ab", ab)
        if self.gamma is not None:
            g = np.array(self.gamma, dtype=float)
            if g.shape != (len(self.workers), 2) or not np.all(np.isfinite(g)) \
                    or np.any(g <= 0):
                raise UsageError("gamma must be (W, 2) (shape, rate), finite and > 0")
            g.setflags(write=False)
            object.__setattr__(self, "gamma", g)
        object.__setattr__(self, "workers", tuple(self.workers))

    @property
    def K(self) -> int:
        return int(self.alpha.shape[1])

    def beta(self) -> np.ndarray:
        """CrowdBT's ``(a_w, b_w)`` per worker, shape ``(W, 2)``: :attr:`ab` if given, else
        ``alpha[:, :2]`` (so ``Dir(α1, α2) = Beta(α1, α2)``)."""
        return (self.alpha[:, :2] if self.ab is None else self.ab).copy()

    def gamma_params(self) -> np.ndarray:
        """PeerGrader's ``(shape, rate)`` per worker, shape ``(W, 2)``: :attr:`gamma` if
        given, else :data:`PEERGRADER_GAMMA` for every worker."""
        if self.gamma is not None:
            return self.gamma.copy()
        return np.tile(np.array(PEERGRADER_GAMMA, float), (len(self.workers), 1))

    def with_crowdbt_beta(self, a: float = 5.0, b: float = 1.0) -> Priors:
        """The same priors with CrowdBT's ``(a_w, b_w) = (a, b)`` for every worker.

        [Pan18], Sect. 5.1 fits CrowdBT on real data with ``Beta(5, 1)`` for every worker
        (``E[η_w] ≈ 0.83``, matched to COUPLE's geometric ``E[η_w^1]`` for ``a0 = 10,
        a = 6``), *not* the first two geometric entries ``(10/6, 10/36)`` that
        :meth:`beta` would read from :attr:`alpha`. COUPLE's :attr:`alpha` is unchanged.

        Parameters
        ----------
        a, b : float
            CrowdBT's Beta parameters, the same for every worker.
        """
        if not (math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0):
            raise UsageError("the CrowdBT Beta prior needs finite a > 0 and b > 0")
        ab = np.tile(np.array([a, b], float), (len(self.workers), 1))
        return Priors(self.workers, self.alpha, self.mu0, self.sigma0,
                      f"{self.spec};crowdbt=beta:{a:g},{b:g}", ab, self.gamma)

    def for_data(self, data: Rankings, K: int | None = None) -> Priors:
        """Check that the priors cover ``data`` and return them in ``data.workers`` order.

        ``K`` is the length the model needs (default ``data.K``; CrowdBT needs only 2).

        Parameters
        ----------
        data : Rankings
            The data whose workers the priors must cover.
        K : int, optional
            The length of a worker's row the model reads.
        """
        K = data.K if K is None else K
        index = {w: i for i, w in enumerate(self.workers)}
        missing = [w for w in data.workers if w not in index]
        if missing:
            raise DataError(f"no worker prior for {len(missing)} worker(s), e.g. {missing[:5]}",
                            self.spec)
        if self.K < K:
            raise DataError(f"worker priors have length {self.K} but the model needs {K} "
                            f"(the data's longest ranking has k={data.K})", self.spec)
        rows = [index[w] for w in data.workers]
        return Priors(data.workers, self.alpha[rows], self.mu0, self.sigma0, self.spec,
                      None if self.ab is None else self.ab[rows],
                      None if self.gamma is None else self.gamma[rows])

    # ------------------------------------------------------------ constructors
    @classmethod
    def geometric(cls, workers: Sequence[str], K: int, a0: float = 10.0, a: float = 6.0,
                  mu0: float = 0.0, sigma0: float = 1.0) -> Priors:
        """``α_w = a0 · (a^-1, …, a^-K)`` for every worker ([Pan18], Sect. 5.3; paper
        ``a0 = 10, a = 6``), so ``E[η_w^1] = 1 / (1 + a^-1 + … + a^-(K-1))``.

        Parameters
        ----------
        workers : sequence of str
            The worker ids.
        K : int
            The length of a worker's row.
        a0, a : float
            The profile's scale and ratio.
        mu0, sigma0 : float
            The items' prior ``λ_r ~ N(mu0, sigma0²)``.
        """
        if not (a0 > 0 and a > 0):
            raise UsageError("geometric prior needs a0 > 0 and a > 0")
        row = a0 * float(a) ** -np.arange(1, K + 1, dtype=float)
        return cls(tuple(workers), np.tile(row, (len(workers), 1)), mu0, sigma0,
                   f"geometric:a0={a0:g},a={a:g}")

    @classmethod
    def explicit(cls, table: Mapping[str, Sequence[float]], workers: Sequence[str] | None = None,
                 mu0: float = 0.0, sigma0: float = 1.0, spec: str = "explicit") -> Priors:
        """From ``{worker: [α_1, …, α_K]}``; ``workers`` fixes the row order.

        Parameters
        ----------
        table : mapping of str to sequence of float
            Each worker's ``α`` row.
        workers : sequence of str, optional
            The row order (default: the table's).
        mu0, sigma0 : float
            The items' prior ``λ_r ~ N(mu0, sigma0²)``.
        spec : str
            How the prior was given, recorded with it (``--worker-prior``'s text).
        """
        workers = tuple(table) if workers is None else tuple(workers)
        missing = [w for w in workers if w not in table]
        if missing:
            raise DataError(f"no worker prior for {missing[:5]}", spec)
        K = {len(table[w]) for w in workers}
        if len(K) != 1:
            raise DataError("worker prior rows have different lengths", spec)
        return cls(workers, np.array([list(table[w]) for w in workers], float), mu0, sigma0, spec)

    @classmethod
    def from_gold(cls, gold: Rankings, K: int, *, true_order: np.ndarray | None = None,
                  true_scores: np.ndarray | None = None, base: Priors | None = None,
                  mu0: float = 0.0, sigma0: float = 1.0) -> Priors:
        """Worker priors from gold tasks with known true order ([Pan18], Sect. 5.1,
        following [Chen13]).

        The true order of each gold task is ``true_order[:, n]`` (per-position layout, as
        :attr:`Simulation.gold_true_order`) or, failing that, the order by ``true_scores``
        (aligned with ``gold.items``). For every stage of a gold ranking the reported
        item's offset ``t`` in the true order of the remaining items is counted, and
        ``α_w[t] = base_w[t] + count_w[t]``. For pairs this is ``(a, b) = base + (#correct,
        #wrong)``, CrowdBT's Beta update on gold answers. ``base`` defaults to ``Dir(1,…,1)``.

        CrowdBT's ``(a_w, b_w)`` (:attr:`ab`) count the gold rankings' rank-broken pairs
        reported in the true (``a``) or the reversed (``b``) order: a worker who often swaps
        the top two of four items has a small ``α_1/Σα`` but still gets most pairs right,
        and taking ``α[:2]`` for CrowdBT would call that worker adversarial (and, CrowdBT
        being symmetric under ``(λ, η) → (−λ, 1−η)``, can flip the whole ranking).

        Parameters
        ----------
        gold : Rankings
            The gold tasks' rankings.
        K : int
            The length of a worker's row.
        true_order : ndarray, optional
            ``(K, N)`` true order of each gold task, per position.
        true_scores : ndarray, optional
            Scores aligned with ``gold.items`` whose order is the truth, when ``true_order`` is
            not given.
        base : Priors, optional
            The prior the counts are added to (default ``Dir(1, ..., 1)``).
        mu0, sigma0 : float
            The items' prior ``λ_r ~ N(mu0, sigma0²)``.
        """
        if true_order is None and true_scores is None:
            raise UsageError("from_gold needs true_order or true_scores")
        if true_scores is not None:
            true_scores = np.asarray(true_scores, float)
            if true_scores.shape != (gold.n_items,):
                raise UsageError("true_scores must align with gold.items")
        counts = np.zeros((gold.n_workers, K))
        pairs = np.zeros((gold.n_workers, 2))   # CrowdBT: (#correct, #wrong) rank-broken pairs
        for n in range(gold.n_rankings):
            r = gold.ranking(n)
            if true_order is not None:
                truth = [int(x) for x in true_order[: len(r), n]]
                if sorted(truth) != sorted(r.tolist()):
                    raise DataError(f"gold task {n}: true order has other items than the "
                                    "reported ranking", gold.source)
            else:
                truth = list(r[np.argsort(-true_scores[r], kind="stable")])
            pos = {item: j for j, item in enumerate(truth)}
            for i in range(len(r)):
                for j in range(i + 1, len(r)):
                    pairs[gold.worker[n], 0 if pos[r[i]] < pos[r[j]] else 1] += 1
            for i in range(len(r) - 1):
                counts[gold.worker[n], truth.index(r[i])] += 1
                truth.remove(r[i])
        if base is None:
            alpha0, ab0 = np.ones((gold.n_workers, K)), np.ones((gold.n_workers, 2))
        else:
            if base.K < K:
                raise UsageError("base prior shorter than K")
            based = base.for_data(gold, K=K)
            alpha0, ab0 = based.alpha[:, :K], based.beta()
        return cls(gold.workers, alpha0 + counts, mu0, sigma0, "gold", ab0 + pairs)


def parse_worker_prior(spec: str, workers: Sequence[str], K: int, mu0: float = 0.0,
                       sigma0: float = 1.0) -> Priors:
    """Parse a CLI spec such as ``geometric:a0=10,a=6`` (the only named profile)."""
    name, _, rest = spec.partition(":")
    if name != "geometric":
        raise DataError(f"unknown worker prior {spec!r}; use geometric:a0=..,a=.. or a file",
                        "--worker-prior")
    kw = {"a0": 10.0, "a": 6.0}
    for part in filter(None, rest.split(",")):
        key, eq, val = part.partition("=")
        if not eq or key.strip() not in kw:
            raise DataError(f"bad geometric parameter {part!r} (expected a0=.. or a=..)",
                            "--worker-prior")
        try:
            kw[key.strip()] = float(val)
        except ValueError:
            raise DataError(f"{key}={val!r} is not a number", "--worker-prior") from None
    return Priors.geometric(workers, K, mu0=mu0, sigma0=sigma0, **kw)


def read_worker_prior_file(path: str | Path, mu0: float = 0.0, sigma0: float = 1.0) -> Priors:
    """Read ``worker,alpha1,…,alphaK`` (CrowdBT: ``worker,a,b``) with a header line."""
    path = Path(path)
    table: dict[str, list[float]] = {}
    with path.open(newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if not header or header[0].strip() != "worker" or len(header) < 3:
            raise DataError("header must be worker,alpha1,...,alphaK (at least 2 values)",
                            str(path), 1)
        for lineno, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(header):
                raise DataError(f"expected {len(header)} fields, got {len(row)}", str(path), lineno)
            w = row[0].strip()
            if not w:
                raise DataError("empty worker id", str(path), lineno)
            if w in table:
                raise DataError(f"worker {w!r} given twice", str(path), lineno)
            try:
                vals = [float(c) for c in row[1:]]
            except ValueError:
                raise DataError("a concentration is not a number", str(path), lineno) from None
            if not all(math.isfinite(v) and v > 0 for v in vals):
                raise DataError("concentrations must be finite and > 0", str(path), lineno)
            table[w] = vals
    return Priors.explicit(table, mu0=mu0, sigma0=sigma0, spec=f"file:{path}")


DEFAULT_WORKER_PRIOR = "geometric:a0=10,a=6"


def build_priors(data: Rankings, *, worker_prior: str | None = None,
                 worker_prior_file: str | Path | None = None,
                 gold: str | Path | tuple[Rankings, np.ndarray] | None = None,
                 mu0: float = 0.0, sigma0: float = 1.0,
                 crowdbt_beta: tuple[float, float] | None = None) -> Priors:
    """The priors for ``data`` from the user's choices, in one place for every command.

    Precedence: an explicit ``worker_prior_file``; then ``gold`` tasks (a gold CSV path
    read by :func:`crowdrank.models.io.read_gold`, or ``(gold rankings, true_order)``), turned into
    ``α_w`` by :meth:`Priors.from_gold` ([Pan18], Sect. 5.1); then the ``worker_prior``
    spec (default :data:`DEFAULT_WORKER_PRIOR`, the paper's geometric profile). Rows are
    *not* reordered here: call :meth:`Priors.for_data` with the model's ``K``.
    ``crowdbt_beta=(a, b)`` then gives CrowdBT ``Beta(a, b)`` for every worker
    (:meth:`Priors.with_crowdbt_beta`; the paper's real-data choice is ``(5, 1)``).
    """
    out = _build_priors(data, worker_prior, worker_prior_file, gold, mu0, sigma0)
    return out if crowdbt_beta is None else out.with_crowdbt_beta(*crowdbt_beta)


def _build_priors(data, worker_prior, worker_prior_file, gold, mu0, sigma0) -> Priors:
    if worker_prior_file:
        return read_worker_prior_file(worker_prior_file, mu0, sigma0)
    if gold is not None:
        if isinstance(gold, (str, Path)):
            from .io import read_gold

            gold = read_gold(gold)
        gold_data, true_order = gold
        return Priors.from_gold(gold_data, max(data.K, gold_data.K, 2), true_order=true_order,
                                mu0=mu0, sigma0=sigma0)
    return parse_worker_prior(worker_prior or DEFAULT_WORKER_PRIOR, data.workers,
                              max(data.K, 2), mu0, sigma0)
