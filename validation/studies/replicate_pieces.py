"""The pieces every replication experiment shares (:mod:`crowdrank.validation.studies.replicate`):
the seeds of the repeats' orders, the machine's description, the paper's pairwise
accuracy, one online fit through the method registry, the workers' quality and the
accuracy curve over a growing sample."""

from __future__ import annotations

import platform
import time
from datetime import UTC, datetime

import numpy as np


def order_seed(seed: int, r: int) -> int:
    """The seed of repeat ``r``'s sample order (independent streams per repeat)."""
    return int(np.random.SeedSequence([int(seed), int(r), 0x0D3]).generate_state(1)[0])


def machine() -> dict:
    import os
    return {"python": platform.python_version(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "date": datetime.now(UTC).isoformat(timespec="seconds")}


def accuracy(truth, scores, components=None) -> float:
    """The paper's pairwise accuracy ([Pan18], Sect. 5.1), over comparable pairs."""
    from crowdrank.validation.compare import pairwise_accuracy_comparable
    acc = pairwise_accuracy_comparable(truth, scores, components)
    return float("nan") if acc.accuracy is None else float(acc.accuracy)


def online_fit(data, model: str, priors, seed: int | None = None):
    """One pass of the model's online update through the method registry
    (:mod:`crowdrank.inference.methods`, entry ``online``): in a seeded shuffled order, or
    in the file's order when ``seed`` is None. A
    :class:`~crowdrank.inference.posterior.Posterior` (``mu``, ``alpha``, ``seconds`` of
    the update loop)."""
    from crowdrank.inference.methods import get as get_method

    m = get_method("online")
    opts = m.options(order="file" if seed is None else "shuffle")
    return m.run(data, model, priors, opts, seed=0 if seed is None else int(seed))


def worker_quality(post) -> np.ndarray | None:
    """COUPLE's ``E[η_w^1] = α_w^1/Σα_w``, CrowdBT's ``E[η_w] = a_w/(a_w+b_w)`` ([Pan18],
    Sect. 5.3, noisy worker detection); ``None`` for PL/BT."""
    if post.alpha is None:
        return None
    from crowdrank.models.registry import get as get_model

    a = np.asarray(post.alpha, float)
    # a Beta's two parameters, or the Dirichlet's whole row
    return a[:, 0] / (a[:, :2].sum(axis=1) if get_model(post.model).eta_scalar
                      else a.sum(axis=1))


def online_curve(data, model: str, priors, perm: np.ndarray, truth, fractions, components):
    """One pass of ``model`` over ``data`` in the order ``perm``, with the accuracy after
    each share of ``fractions``; resuming a state chunk after chunk gives the same numbers
    as one pass (``inference.online.api``). Returns ``(accuracies, posterior, seconds)``."""
    from crowdrank.inference.online import OnlinePosterior, fit_online
    from crowdrank.inference.online.api import algorithm_options

    n = len(perm)
    cuts = sorted({max(1, round(f * n)) for f in fractions})
    # the start state sized for the whole data (a first chunk may hold no ranking of the
    # longest length, and COUPLE's worker vectors must have the data's K from the start)
    from crowdrank.models.registry import get as get_model

    spec = get_model(model)
    pri = priors if not spec.has_eta else priors.for_data(
        data, K=spec.prior_K(max(data.K, 2)))
    post = OnlinePosterior.from_priors(model, data.items, pri, workers=data.workers,
                                       K=max(data.K, 2),
                                       options=algorithm_options(model, priors=priors))
    start, accs, secs = 0, {}, 0.0
    for c in cuts:
        t = time.perf_counter()
        post = fit_online(data.subset(perm[start:c]), model, priors, state=post,
                          progress=False)
        secs += time.perf_counter() - t
        accs[c] = accuracy(truth, post.mu, components)
        start = c
    return [accs[max(1, round(f * n))] for f in fractions], post, secs
