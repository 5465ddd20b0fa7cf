"""NUTS on many small data sets at once: one XLA program for every replicate and chain.

Simulation-based calibration fits the same model to hundreds of small simulated data sets.
Fitted one by one (:func:`crowdrank.inference.nuts.fit_nuts`), a 10-item, 100-ranking fit spends
almost all its time in the sampler's per-step overhead, not in the model: measured on 2
cores, ~0.6 ms per leapfrog step for four vectorised chains against ~0.1 ms for the
gradient itself, plus a fresh compilation per data set (its arrays are baked into the
program). Here the data become *arguments* of the potential energy
(``numpyro.infer.util.initialize_model(..., dynamic_args=True)``), every data set is
padded to one common layout, and NumPyro's own NUTS kernel (``numpyro.infer.hmc.hmc``) is
``vmap``-ed over lanes = data sets × chains: one compilation for the whole study, and one
pass of per-step overhead shared by all lanes.

What is the same as :func:`~crowdrank.inference.nuts.fit_nuts`: the model (the same
:func:`crowdrank.models.numpyro_models.item_scores`, :func:`~crowdrank.models.numpyro_models.worker_log_eta`
and :func:`~crowdrank.models.numpyro_models.column_loglik`, in the default ``simplex="gamma"``,
``level="centered"`` coordinates), NumPyro's NUTS with its window adaptation of step size
and diagonal mass matrix, float64, and the gate (:func:`crowdrank.inference.gate.check`) applied to
each data set's chains, and the start (:func:`~crowdrank.inference.nuts.numpyro.default_start`):
``Uniform(-2, 2)`` on the unconstrained scale (NumPyro's ``init_to_uniform``), except for a
mirror-symmetric model (CrowdBT), whose lanes start at the median of 15 prior draws
(``init_to_median``): from a uniform start one chain of a CrowdBT replicate could settle in
the mirror mode, fail the gate and, its trajectories long, hold its whole batch back
(docs/sbc.md, "The slowest lane"). What differs: there is no warm start from an
approximation. Each lane's computation is its own (``vmap``
semantics): a data set's draws do not depend on which others share its batch, up to
floating-point reassociation.

Padding. Data sets differ in how many rankings of each length they hold. Each length's
block is padded to the largest count in the study with dummy columns (items ``0..k-1``,
worker 0) whose log-likelihood is multiplied by a weight 0; the real columns have weight 1,
so the total is exactly the data set's log-likelihood.

The slowest lane. A vmapped NUTS iteration runs its tree-building ``while_loop`` until the
longest trajectory among its lanes has finished; the other lanes idle (their updates are
masked) but are still computed. So every iteration costs as much as its hardest lane, and
one hard data set (a bimodal posterior, trees at the depth cap) makes the whole batch as
slow as itself. Two levers, both leaving the sampled chains exact:

* ``lane_groups``: before each chunk of iterations the lanes are sorted by the leapfrog
  steps they took in the previous chunk and run as that many vmapped calls of equal size
  (one compiled program), so a hard lane holds back only the lanes of its own group. A
  lane's state, key and data move with it, so its draws do not change. The price is one
  pass of per-step overhead per group: worth it when the gradient, not the overhead,
  dominates a step (normalised COUPLE), not for PL.
* ``warmup_max_tree_depth``: early warm-up, with a poor step size and unit mass matrix, is
  where trajectories run to the cap; a lower cap there only shortens discarded draws.

``timings`` records what the batch ran (``batch_steps``: Σ over groups and iterations of
the longest lane), what the lanes needed (``lane_steps``, ``lane_steps_mean``,
``lane_steps_max``: the max is what per-lane termination would cost), and
``vmap_step_overhead`` = lane-steps evaluated / lane-steps needed.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from itertools import permutations

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.model_inputs import ModelInputs, PermGroup, model_inputs
from crowdrank.models.priors import Priors
from crowdrank.models.registry import ModelSpec, as_spec

from ..gate import check
from .config import nuts_default
from .numpyro import mirror_symmetric


@dataclasses.dataclass
class BatchLayout:
    """Padded arrays of ``R`` data sets in one layout.

    ``template`` is a :class:`ModelInputs` whose ``blocks`` (and ``groups``) describe the
    common layout; ``index`` ``(R, K, M)``, ``worker`` ``(R, M)`` and ``weight`` ``(R, M)``
    are the per-data-set arrays (weight 1 on real columns, 0 on padding).
    """

    template: ModelInputs
    index: np.ndarray
    worker: np.ndarray
    weight: np.ndarray
    n_real: np.ndarray          # (R,) real columns per data set


def pad_layout(datasets: Sequence[Rankings], model: str | ModelSpec, priors: Priors,
               counts: dict[int, int] | None = None) -> BatchLayout:
    """Put ``datasets`` into one padded layout (module doc).

    ``model`` is a name of the model registry (looked up once, here) or its spec.
    ``counts`` (length ``k`` → columns) fixes the block sizes, e.g. the largest over a
    whole study, so that every batch of it has the same shapes and one compilation serves
    all; by default the largest counts among ``datasets``.
    """
    spec = as_spec(model)
    ins = [model_inputs(spec, d, priors) for d in datasets]
    K = max(mi.K for mi in ins)
    ref = max(ins, key=lambda mi: mi.K)
    for mi in ins:
        a, b = mi.alpha, ref.alpha
        if (a is None) != (b is None) or (a is not None and not np.array_equal(
                a, b[:, : a.shape[1]])):
            raise ValueError("batched NUTS needs the same worker prior for every data set")
    need: dict[int, int] = {}
    for mi in ins:
        for k, a, b in mi.blocks:
            need[k] = max(need.get(k, 0), b - a)
    if counts is not None:
        short = {k: n for k, n in need.items() if counts.get(k, 0) < n}
        if short:
            raise ValueError(f"block sizes {counts} are smaller than the data's {need}")
        need = {k: int(n) for k, n in counts.items()}
    lengths = sorted(need, reverse=True)
    blocks, start = [], 0
    for k in lengths:
        blocks.append((k, start, start + need[k]))
        start += need[k]
    M = start
    R = len(ins)
    index = np.zeros((R, K, M), np.int32)
    mask = np.zeros((K, M), bool)          # the same for every data set: row < k in block k
    worker = np.zeros((R, M), np.int32)
    weight = np.zeros((R, M), float)
    for r, mi in enumerate(ins):
        have = {k: (a, b) for k, a, b in mi.blocks}
        for k, a0, _ in blocks:
            # gather-safe dummies: items 0..k-1 (distinct), rows below k unused
            index[r, :k, a0:a0 + need[k]] = np.arange(k)[:, None]
            mask[:k, a0:a0 + need[k]] = True
            if k in have:
                a, b = have[k]
                n = b - a
                index[r, : mi.K, a0:a0 + n] = mi.index[:, a:b]
                worker[r, a0:a0 + n] = mi.worker[a:b]
                weight[r, a0:a0 + n] = 1.0
    groups = ()
    if spec.normalized:   # Σ over the k! orderings; Z = 1 exactly for pairs
        groups = tuple(PermGroup(k, a, b, np.array(list(permutations(range(k))), np.int32))
                       for k, a, b in blocks if k >= 3)
    template = dataclasses.replace(
        ref, n_obs=M, index=index[0], mask=mask, worker=worker[0],
        origin=np.arange(M), blocks=tuple(blocks), groups=groups)
    return BatchLayout(template, index, worker, weight,
                       np.array([mi.index.shape[1] for mi in ins]))


def _program(template: ModelInputs, simplex: str = "gamma"):
    """The NumPyro program of ``template.model`` with the data as arguments; the worker
    simplex ``simplex`` (:func:`crowdrank.models.numpyro_models.worker_log_eta`)."""
    import jax.numpy as jnp
    import numpyro

    from crowdrank.models import numpyro_models as npm

    def prog(index, worker, weight):
        inputs = dataclasses.replace(template, index=index, worker=worker)
        lam = npm.item_scores(inputs, "centered")
        log_eta = npm.worker_log_eta(inputs, simplex) if inputs.has_eta else None
        ll = npm.column_loglik(inputs, lam, log_eta=log_eta)
        numpyro.factor("loglik", jnp.sum(weight * ll))

    return prog


def _run_grouped(run_c, state, args, n, groups, recent):
    """One chunk of ``n`` iterations for all lanes, in ``groups`` vmapped calls of equal
    size, the lanes sorted by ``recent`` (steps in the last chunk), hardest first; the
    last group is padded with copies of a lane (computed twice, kept once). Returns the
    new state and outputs in lane order, and ``(Σ_groups Σ_iter max steps, lane-steps
    evaluated)``."""
    import jax
    import jax.numpy as jnp

    N = int(recent.size)
    if groups == 1:
        state, out = run_c(state, args, n)
        m = np.asarray(out[-1]).max(axis=1)
        return state, out, (float(m.sum()), float(m.sum()) * N)
    size = -(-N // groups)
    order = np.argsort(-recent, kind="stable")
    pad = np.concatenate([order, np.repeat(order[-1:], groups * size - N)])
    states, outs, seq, computed = [], [], 0.0, 0.0
    for g in range(groups):
        idx = jnp.asarray(pad[g * size:(g + 1) * size])
        sg, og = run_c(jax.tree.map(lambda x, idx=idx: x[idx], state),
                       jax.tree.map(lambda x, idx=idx: x[idx], args), n)
        m = np.asarray(og[-1]).max(axis=1)
        seq += float(m.sum())
        computed += float(m.sum()) * size
        states.append(sg)
        outs.append(og)
    inv = np.empty(N, int)
    inv[pad[::-1]] = np.arange(pad.size)[::-1]     # first position of every lane
    inv = jnp.asarray(inv)
    state = jax.tree.map(lambda *xs: jnp.concatenate(xs)[inv], *states)
    out = jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=1)[:, inv], *outs)
    return state, out, (seq, computed)


def _prior_median_starts(prog, args0: tuple, keys) -> dict:
    """Each lane's start as :func:`~crowdrank.inference.nuts.numpyro.default_start` starts
    a mirror-symmetric model in ``fit_nuts``: the median of 15 prior draws of every latent
    site (NumPyro's ``init_to_median``), on the unconstrained scale, one set of draws per
    lane key. The prior draws do not depend on the data, so the first data set's arguments
    serve every lane. One compiled program for all lanes."""
    import jax
    from numpyro.infer import init_to_median
    from numpyro.infer.util import initialize_model

    def one(key):
        return initialize_model(key, prog, init_strategy=init_to_median(num_samples=15),
                                model_args=args0, dynamic_args=True).param_info.z
    return jax.jit(jax.vmap(one))(keys)


def chunk_length(tune: int, draws: int, chunk: int) -> int | None:
    """The common length of every chunk: the largest divisor of both ``tune`` and
    ``draws`` up to ``chunk``, so that no chunk straddles the end of warm-up and warm-up
    and sampling chunks are one compiled program (each compile of the vmapped NUTS step
    costs ~8 s; the chunking never changes the draws). ``None`` when that divisor is under
    a fifth of ``chunk`` (too many calls): the chunks are then ``chunk`` long, each phase's
    last one shorter."""
    g = math.gcd(int(tune), int(draws))
    d = next((d for d in range(min(g, int(chunk)), 0, -1) if g % d == 0), 1)
    return d if d >= max(1, int(chunk) // 5) else None


def _run_chunks(run_c, state, lane_args, tune: int, draws: int, chunk: int,
                lane_groups: int, R: int, C: int, progress: bool, timings: dict):
    """Warm-up then sampling in compiled chunks of ``chunk`` iterations over all lanes
    (``lane_groups`` groups, hardest first: :func:`_run_grouped`); ``timings`` gains the
    phases' seconds, the leapfrog counts and the price of sharing one program. Returns the
    last state and the sampling chunks' ``(z, diverging, energy, num_steps)``."""
    import jax
    from tqdm.auto import tqdm

    total = tune + draws
    bar = tqdm(total=total, desc=f"NUTS x {R} data sets x {C} chains",
               disable=not progress, unit="it")
    warm_steps, samples, lane_max, lane_sum = 0.0, [], 0.0, 0.0
    lane_tot = np.zeros(R * C)                   # leapfrog steps each lane needed
    chunk_log = []                               # (phase, iterations, s, Σ max, Σ mean)
    groups = max(1, min(int(lane_groups), R * C))
    recent = np.zeros(R * C)                     # each lane's steps in the last chunk
    lane_computed = 0.0                          # lane-steps evaluated (padding too)
    done, first = 0, True
    phase_t = {"warmup": 0.0, "sampling": 0.0}
    common = chunk_length(tune, draws, chunk)
    while done < total:
        collect = done >= tune
        n = common or min(chunk, (tune if not collect else total) - done)
        t1 = time.perf_counter()
        state, out, ran = _run_grouped(run_c, state, lane_args, n, groups, recent)
        jax.block_until_ready(state.z)
        dt = time.perf_counter() - t1
        if first:
            timings["compile_and_first_chunk"] = dt
            first = False
        phase_t["sampling" if collect else "warmup"] += dt
        steps = np.asarray(out[-1])                  # (n, lanes)
        recent = steps.sum(axis=0)
        # a vmapped iteration lasts as long as its longest trajectory (in its group)
        lane_max += ran[0]
        lane_computed += ran[1]
        lane_sum += float(steps.sum())
        lane_tot += steps.sum(axis=0)
        chunk_log.append(("sampling" if collect else "warmup", n, round(dt, 3),
                          ran[0],
                          round(float(steps.mean(axis=1).sum()), 1)))
        if collect:
            samples.append(out)
        else:
            warm_steps += float(steps.sum())
        done += n
        bar.update(n)
    bar.close()
    timings.update(phase_t)
    timings["warmup_gradients"] = warm_steps
    # leapfrog steps the vmapped program ran per lane (the longest trajectory of each
    # iteration) over the steps the lanes needed: the price of sharing one program
    timings["vmap_step_overhead"] = lane_computed / max(lane_sum, 1.0)
    timings["lane_groups"] = groups
    # steps the batch ran in sequence (Σ over groups and iterations of the longest
    # lane), against the most
    # any one lane needed (what per-lane termination would cost) and the mean lane
    timings["batch_steps"] = lane_max
    timings["lane_steps_max"] = float(lane_tot.max())
    timings["lane_steps_mean"] = float(lane_tot.mean())
    timings["lane_steps"] = lane_tot.tolist()
    timings["chunks"] = chunk_log
    return state, samples


def _per_dataset(lam, eta, div, energy, nsteps, R: int, C: int, timings: dict) -> list[dict]:
    """Each data set's draws, gate and statistics from the lanes' arrays (its ``C`` lanes
    in a row)."""
    from arviz_base import from_dict

    results = []
    for r in range(R):
        post = {"lambda": lam[r]}
        if eta is not None:
            post["eta"] = eta[r]
        sl = slice(r * C, (r + 1) * C)
        stats = {"diverging": div[sl].astype(bool), "energy": energy[sl]}
        gate = check(from_dict({"posterior": post, "sample_stats": stats}))
        results.append({"posterior": post, "gate": gate,
                        "stats": {"divergences": int(div[sl].sum()),
                                  "leapfrogs": float(nsteps[sl].sum())},
                        "timings": timings})
    return results


def fit_nuts_batched(datasets: Sequence[Rankings], model: str | ModelSpec, priors: Priors, *,
                     seeds: Sequence[int], chains: int = nuts_default("chains"),
                     tune: int = nuts_default("tune"), draws: int = nuts_default("draws"),
                     target_accept: float = nuts_default("target_accept"),
                     max_tree_depth: int = nuts_default("max_tree_depth"),
                     warmup_max_tree_depth: int | None = None,
                     counts: dict[int, int] | None = None, chunk: int = 50,
                     lane_groups: int = 1, progress: bool = False,
                     simplex: str = nuts_default("simplex")) -> list[dict]:
    """NUTS for every data set of ``datasets`` in one vmapped program (module doc).

    The sampler's settings (``chains``, ``tune``, ``draws``, ``target_accept``,
    ``max_tree_depth``, ``simplex``) default to :class:`~crowdrank.inference.nuts.config.NutsConfig`'s.

    Parameters
    ----------
    seeds : sequence of int
        One per data set: its chains' keys are ``split(PRNGKey(seed), chains)``.
    counts : dict, optional
        Block sizes of the padded layout (:func:`pad_layout`).
    chunk : int
        Iterations per compiled ``scan`` (the progress bar's step).
    lane_groups : int
        Split the lanes (data sets × chains) into this many groups of equal size for each
        chunk, hardest first: before every chunk the lanes are sorted by the leapfrog steps
        they took in the previous one, so a lane with long trajectories holds back only
        the lanes of its own group (module doc, "The slowest lane"). Each lane's draws are
        the same for every value (its state, key and data travel with it).
    warmup_max_tree_depth : int, optional
        A lower tree-depth cap during warm-up only (NumPyro's ``(warm-up, sampling)``
        pair): early warm-up, with a poor step size and mass matrix, is where trajectories
        run to the cap. Warm-up draws are discarded, so the sampled chain stays exact; the
        adaptation sees shorter trajectories. Default: ``max_tree_depth``.
    simplex : {"gamma", "dirichlet"}
        The worker simplex's coordinates (docs/design.md §5.1): the Gamma construction
        with the boost (the sampler's default) or the PPL's own Dirichlet/Beta site.

    Returns
    -------
    list of dict
        Per data set: ``posterior`` (``lambda`` ``(chains, draws, L)`` and ``eta`` when the
        model has it), ``gate`` (:class:`crowdrank.inference.gate.Gate`), ``stats`` (divergences,
        leapfrog steps) and the batch's ``timings`` (shared by its data sets).
    """
    import jax
    import jax.numpy as jnp
    from numpyro.infer.hmc import hmc
    from numpyro.infer.util import initialize_model

    if len(seeds) != len(datasets):
        raise ValueError("one seed per data set")
    R, C = len(datasets), int(chains)
    prev_x64 = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    timings: dict = {"replicates": R, "lanes": R * C}
    try:
        lay = pad_layout(datasets, model, priors, counts)
        prog = _program(lay.template, simplex)
        args = (jnp.asarray(lay.index), jnp.asarray(lay.worker), jnp.asarray(lay.weight))
        # Traced abstractly: only the potential's generator, the constraining map and the
        # sites' shapes are used (the lanes start from their own uniform draws), and run
        # eagerly NumPyro's search for a valid start compiles ~150 one-operation programs
        # (~13 CPU-s of a fresh process's SBC).
        box = {}

        def init_info():
            info = initialize_model(jax.random.PRNGKey(0), prog,
                                    model_args=tuple(a[0] for a in args), dynamic_args=True)
            box.update(pot=info.potential_fn, post=info.postprocess_fn,
                       shapes={k: tuple(v.shape) for k, v in info.param_info.z.items()})
            return 0

        jax.eval_shape(init_info)
        pot_gen, post_gen, z_shape = box["pot"], box["post"], box["shapes"]
        init_kernel, sample_kernel = hmc(potential_fn_gen=pot_gen, algo="NUTS")

        lane_args = tuple(jnp.repeat(a, C, axis=0) for a in args)
        keys = jnp.concatenate([jax.random.split(jax.random.PRNGKey(int(s)), C)
                                for s in seeds])
        init_keys = jax.vmap(lambda k: jax.random.split(k))(keys)
        if mirror_symmetric(lay.template):
            z0 = _prior_median_starts(prog, tuple(a[0] for a in args), init_keys[:, 0])
        else:
            z0 = {}
            for j, (name, shp) in enumerate(sorted(z_shape.items())):
                z0[name] = jax.vmap(lambda k, j=j, shp=shp: jax.random.uniform(
                    jax.random.fold_in(k, j), shp, minval=-2.0, maxval=2.0))(init_keys[:, 0])

        depth = (max_tree_depth if warmup_max_tree_depth is None
                 else (int(warmup_max_tree_depth), int(max_tree_depth)))

        def init_one(z, key, a):
            return init_kernel(z, tune, target_accept_prob=target_accept,
                               max_tree_depth=depth, model_args=a, rng_key=key)

        t = time.perf_counter()
        state = jax.jit(jax.vmap(init_one))(z0, init_keys[:, 1], lane_args)

        def step(s, a):
            return sample_kernel(s, model_args=a)

        def run(s, a, n):
            # warm-up chunks keep their draws too (then dropped): one program for both
            def body(s, _):
                s = jax.vmap(step)(s, a)
                return s, (s.z, s.diverging, s.energy, s.num_steps)
            return jax.lax.scan(body, s, None, length=n)

        run_c = jax.jit(run, static_argnums=(2,))
        state, samples = _run_chunks(run_c, state, lane_args, tune, draws, chunk,
                                     lane_groups, R, C, progress, timings)
        timings["total"] = time.perf_counter() - t

        z = {k: jnp.concatenate([s[0][k] for s in samples], axis=0) for k in z_shape}
        z = {k: jnp.swapaxes(v, 0, 1) for k, v in z.items()}           # (lanes, draws, …)
        div = np.concatenate([np.asarray(s[1]) for s in samples], 0).T
        energy = np.concatenate([np.asarray(s[2]) for s in samples], 0).T
        nsteps = np.concatenate([np.asarray(s[3]) for s in samples], 0).T
        timings["sampling_gradients"] = float(nsteps.sum())

        def constrain(zl, *a):
            return jax.vmap(lambda zz: post_gen(*a)(zz))(zl)

        cons = jax.jit(jax.vmap(constrain))(z, *lane_args)
        lam = np.asarray(cons["lambda"], float).reshape(R, C, draws, -1)
        eta = None
        if "eta" in cons:
            e = np.asarray(cons["eta"], float)
            eta = e.reshape((R, C, draws) + e.shape[2:])
    finally:
        jax.config.update("jax_enable_x64", prev_x64)

    return _per_dataset(lam, eta, div, energy, nsteps, R, C, timings)
