"""A model is one entry: a toy model registered by a fixture runs through every layer.

The toy "pl2" is Plackett–Luce on doubled scores, ``P(order | λ) = PL(order | 2λ)``, and is
defined here only, as docs/design.md's "Adding a model" says: its functions (each a
wrapper of PL's, applied to ``2λ``: one definition per role, the exported form one
function for both NumPyro and PyMC) and one :class:`ModelSpec` naming them.
A fixture adds the spec to the registry; nothing else in the repository names it. The
tests then run it through the simulator, both fits of the method registry (NUTS and the
PPL's Laplace), the exported array functions of both PPLs, the audit (NUTS against an
approximation) and SBC, against closed forms: ``σ(2(λ_i − λ_j))`` for pair frequencies,
the NumPy reference (PL on ``2λ``) for every density.

And the goal "no model-name branch in product code outside the model modules": a grep of
the product's layers for ``model == "…"`` / ``model in (…)``.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit

from crowdrank.models import registry
from crowdrank.models.likelihood import pl_loglik
from crowdrank.models.priors import Priors
from crowdrank.models.registry import ModelSpec

NAME = "pl2"
ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- the toy model's functions
def pl2_loglik(lam, ranking):
    """Reference: Plackett–Luce of ``2λ``."""
    return pl_loglik(2.0 * np.asarray(lam, float), ranking)


def pl2_redraw(rng, lam, items, eta_w):
    from crowdrank.models.simulate import pl_true_order

    return pl_true_order(rng, 2.0 * np.asarray(lam, float), items)


def pl2_report(rng, lam, subsets, true_order, eta_rows):
    """The report is a fresh PL draw of ``2λ`` (the simulator's true order is PL of λ)."""
    return pl2_redraw(rng, lam, subsets, eta_rows)


def pl2_numpyro_columns(inputs, lam, log_eta):
    from crowdrank.models.numpyro_models import ranking_columns

    return ranking_columns(inputs, 2.0 * lam, log_eta)


def pl2_numpyro_draw(key, items, log_w, lam):
    from crowdrank.models.numpyro_models import draw_pl

    return draw_pl(key, items, log_w, 2.0 * lam)


def pl2_pymc_columns(inputs, lam, log_eta):
    from crowdrank.models.pymc_models import ranking_columns

    return ranking_columns(inputs, 2.0 * lam, log_eta)


def pl2_array(ops, x, valid, log_w, K):
    """The exported form of both PPLs, written once (``ops``: jax.numpy's or pytensor's
    namespace, :mod:`crowdrank.models.array_forms`): PL's masked stages of ``2λ``."""
    return ops.pl(2.0 * x, valid, K)


def pl2_array_draw(key, items, lam, log_w=None, lengths=None):
    from crowdrank.models.numpyro.arrays import draw_pl_array

    return draw_pl_array(key, items, 2.0 * lam, log_w, lengths)


def pl2_pair(lam, eta, winner, loser, worker):
    from crowdrank.models.likelihood import pair_bt

    return pair_bt(2.0 * np.asarray(lam, float), eta, winner, loser, worker)


TOY = ModelSpec(name=NAME, title="Plackett–Luce on 2λ (test toy)", exact_simulator=True,
                reference=pl2_loglik, simulate_report=pl2_report, redraw=pl2_redraw,
                numpyro_columns=pl2_numpyro_columns, numpyro_draw=pl2_numpyro_draw,
                pymc_columns=pl2_pymc_columns, array_loglik=pl2_array,
                numpyro_array_draw=pl2_array_draw, pair_loglik=pl2_pair)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(registry.REGISTRY, NAME, TOY)
    return TOY


@pytest.fixture
def sim(toy):
    from crowdrank.models.simulate import simulate

    return simulate(NAME, n_items=5, n_workers=2, tasks_per_worker=40, kmax=3, seed=3)


def _priors(data):
    return Priors(data.workers, np.ones((data.n_workers, data.K)), mu0=0.1, sigma0=1.2,
                  spec="test")


def _reference(data, lam):
    return np.array([pl2_loglik(lam, data.ranking(n)) for n in range(data.n_rankings)])


# ---------------------------------------------------------------- simulate
def test_simulate_draws_the_toys_law(toy):
    """The simulator found through the entry: pair frequencies ``σ(2(λ_0 − λ_1))``."""
    from crowdrank.models.simulate import simulate

    lam = np.array([0.4, -0.1])
    data = simulate(NAME, n_items=2, n_workers=1, tasks_per_worker=20_000, kmax=2, lam=lam,
                    seed=1).rankings
    p = expit(2.0 * (lam[0] - lam[1]))
    # 20 000 Bernoulli draws: sd ≤ 0.0036, 5 sd 0.018
    assert abs((data.order[0] == 0).mean() - p) < 0.018
    assert NAME not in registry.MODELS          # registered by the fixture only


def test_unregistered_after_the_fixture():
    assert NAME not in registry.REGISTRY


# ---------------------------------------------------------------- fit: NUTS and Laplace
@pytest.mark.slow
def test_fit_by_nuts_and_by_the_ppl_laplace(sim):
    """Both fits through the method registry, by name, with nothing but the entry: NUTS's
    stored pointwise log-likelihood is the reference; the Laplace approximation's means
    are within NUTS's posterior sd."""
    from crowdrank.inference import methods

    data, pri = sim.rankings, _priors(sim.rankings)
    nuts = methods.get("nuts")
    post = nuts.run(data, NAME, pri, nuts.options(chains=2, tune=150, draws=150),
                    seed=1)
    lam = post.tree["posterior"]["lambda"].values
    ll = post.tree["log_likelihood"]["rankings"].values
    np.testing.assert_allclose(ll[0, 7], _reference(data, lam[0, 7]), rtol=1e-8)
    lap = methods.get("laplace-ppl").run(data, NAME, pri, seed=1)
    assert lap.model == NAME and lap.diagnostics["psis_khat"] is not None
    mean, sd = lam.mean(axis=(0, 1)), lam.std(axis=(0, 1))
    # the posterior of PL on 2λ is close to Gaussian: the Laplace means sit within 0.5 sd
    assert np.all(np.abs(np.asarray(lap.mu) - mean) < 0.5 * sd + 0.05), (lap.mu, mean, sd)


@pytest.mark.slow
def test_cli_simulate_and_fit_a_registered_toy(tmp_path):
    """With the toy in the registry before the CLI is imported (as an entry written in
    models/registry.py is), ``crowdrank simulate``, ``crowdrank fit --method
    laplace-ppl`` and ``crowdrank audit --approx laplace-ppl`` take ``--model pl2`` with
    no other change; the audit without ``--approx`` refuses it (no online update), in
    one line naming the approximations that fit it (a subprocess: the CLI's choices are
    read when the parser is built; the subprocess keeps the toy out of this process's
    registry while the CLI's lazy imports run)."""
    import subprocess
    import sys

    code = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
import crowdrank.models.registry as R
import test_model_entry as T
R.REGISTRY[T.NAME] = T.TOY
from crowdrank.reports.cli import main
out = {str(tmp_path)!r}
assert main(["simulate", "--model", "pl2", "--items", "5", "--workers", "2", "--tasks", "20",
             "--kmax", "3", "--out", out + "/sim", "--quiet"]) == 0
assert main(["fit", out + "/sim/rankings.csv", "--model", "pl2", "--method", "laplace-ppl",
             "--out", out + "/fit"]) == 0
audit = ["audit", out + "/sim/rankings.csv", "--model", "pl2", "--chains", "2", "--tune",
         "100", "--draws", "100", "--permutations", "0", "--no-checks", "--posterior-sbc",
         "0", "--max-nuts-minutes", "0", "--quiet"]
assert main(audit + ["--out", out + "/refused"]) == 2     # no online update, no --approx
assert main(audit + ["--approx", "laplace-ppl", "--out", out + "/audit"]) == 0
"""
    r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "laplace-ppl [numpyro, pl2]" in r.stdout
    assert (tmp_path / "fit" / "posterior.nc").exists()
    assert "--model pl2 has no online update to audit" in r.stderr
    assert (tmp_path / "audit" / "report.html").exists()
    assert (tmp_path / "audit" / "pl2").is_dir()


def test_cli_offers_a_model_registered_before_the_parser_is_built(toy):
    """The ``--model`` choices of fit, simulate, story and audit are read from the
    registry when the parser is built, not when the CLI is imported."""
    from crowdrank.reports.cli import build_parser

    for command in ("fit", "simulate", "story", "audit"):
        sub = build_parser(command)._subparsers._group_actions[0].choices[command]
        model = next(a for a in sub._actions if a.dest == "model")
        assert NAME in model.choices, command


# ---------------------------------------------------------------- the exported array forms
def test_exported_numpyro_and_pymc_forms_are_the_reference(sim):
    """``make_model(NAME)`` (NumPyro) and ``build_data_model(NAME, ...)`` (PyMC), read
    from the entry: the observed site's log density per ranking is the reference."""
    jax = pytest.importorskip("jax")
    from crowdrank.models.model_inputs import model_inputs
    from crowdrank.models.numpyro import arrays as A

    data = sim.rankings
    inp = model_inputs(NAME, data, _priors(data))
    lam = np.random.default_rng(0).normal(size=data.n_items)
    with jax.enable_x64(True):
        got = np.asarray(A.masked_loglik(NAME, lam, inp.order, inp.obs_worker))
    ref = np.array([pl2_loglik(lam, inp.order[r][inp.order[r] >= 0])
                    for r in range(inp.order.shape[0])])
    np.testing.assert_allclose(got, ref, rtol=1e-9)
    assert NAME in A.array_models() and callable(A.make_model(NAME))


@pytest.mark.usefixtures("pytensor_without_c")
def test_exported_pymc_form_is_the_reference(sim):
    pytest.importorskip("pymc")
    import pymc as pm

    from crowdrank.models.model_inputs import model_inputs
    from crowdrank.models.numpyro.arrays import model_arrays
    from crowdrank.models.pymc_arrays import build_data_model

    data = sim.rankings
    kw = model_arrays(model_inputs(NAME, data, _priors(data)))
    m = build_data_model(NAME, **kw)
    lam = np.random.default_rng(1).normal(size=data.n_items)
    f = m.compile_fn(pm.logp(m["rankings"], m["rankings_data"]), inputs=[m["lambda"]],
                     mode="FAST_COMPILE")
    got = np.asarray(f({"lambda": lam}))
    ref = np.array([pl2_loglik(lam, o[o >= 0]) for o in kw["rankings"]])
    np.testing.assert_allclose(got, ref, rtol=1e-9)


# ---------------------------------------------------------------- the audit
@pytest.mark.slow
def test_audit_compares_nuts_with_an_approximation(sim, tmp_path):
    """The audit's pipeline (validation.pipelines.audit.audit_model) on the toy with the
    PPL's Laplace as the approximation (the toy has no online update): fitted, compared
    and written like every audited model."""
    from crowdrank.validation.pipelines.audit import audit_model
    from crowdrank.validation.pipelines.audit_config import AuditConfig, Subject

    data = sim.rankings
    cfg = AuditConfig(models=(NAME,), chains=2, tune=100, draws=100, permutations=0,
                      checks=False, warm_start=False)
    audit = audit_model(Subject(data, truth=sim.lam), NAME, _priors(data), cfg, tmp_path,
                        variants=[{"method": "laplace-ppl"}])
    assert audit.model == NAME and len(audit.comparisons) == 1
    lam = audit.comparisons[0].parameters
    lam = lam[lam.kind == "lambda"]
    assert len(lam) == data.n_items
    assert np.all(np.abs(lam.approx_mean - lam.mcmc_mean) < 0.5 * lam.mcmc_sd + 0.05)
    assert (tmp_path / NAME).is_dir()


# ---------------------------------------------------------------- SBC
def test_sbc_runs_the_toy(toy):
    """SBC finds the toy (exact simulator, no worker prior) without being told; the prior
    oracle's ranks are in range."""
    from crowdrank.validation.pipelines.sbc import SbcConfig, sbc_job, sbc_models

    assert NAME in sbc_models()
    cfg = SbcConfig(model=NAME, backend="prior", sims=2, n_items=5, n_workers=2,
                    tasks_per_worker=4, n_ranks=20, online=False)
    out = sbc_job(cfg.spec(0))
    assert len(out["truth"]) == 2 * 5                    # λ and centred λ
    assert all(0 <= r <= 20 for r in out["rank"])


def test_sbc_refusal_reads_the_typed_hint():
    """SBC refuses a model without an exact simulator with the entry's ``sbc_hint`` (a
    typed field: the specs have no ``extra`` dict or view)."""
    from crowdrank.models.errors import UsageError
    from crowdrank.validation.pipelines.sbc import SbcConfig

    spec = next(s for s in registry.REGISTRY.values() if s.sbc_hint)
    with pytest.raises(UsageError, match=re.escape(spec.sbc_hint)):
        SbcConfig(model=spec.name)
    assert not hasattr(spec, "extra")


@pytest.mark.slow
def test_sbc_by_nuts_runs_the_toy(toy):
    """An SBC replicate of the toy by NUTS: truth from the prior, data from the toy's
    simulator, ranks of the truth among NUTS's thinned draws."""
    from crowdrank.validation.pipelines.sbc import SbcConfig, sbc_job

    cfg = SbcConfig(model=NAME, backend="numpyro", sims=2, n_items=4, n_workers=2,
                    tasks_per_worker=8, n_ranks=20, online=False, tune=100, draws=100)
    out = sbc_job(cfg.spec(0))
    assert len(out["rank"]) == 2 * 4 and all(0 <= r <= 20 for r in out["rank"])


# ---------------------------------------------------------------- every entry's functions
def test_every_entry_names_functions_of_the_models_layer():
    """Every ``"module:function"`` an entry names (ranking and pair-table models alike)
    resolves, and lives in ``crowdrank.models``: the registry points at no upper layer."""
    from dataclasses import fields

    for spec in (*registry.REGISTRY.values(), *registry.PAIR_TABLE.values()):
        for f in fields(spec):
            value = getattr(spec, f.name)
            if isinstance(value, str) and ":" in value and value.startswith("crowdrank."):
                assert value.startswith("crowdrank.models."), (spec.name, f.name, value)
                assert callable(spec.fn(f.name)), (spec.name, f.name)
        assert callable(spec.reference_loglik())


# ---------------------------------------------------------------- no model-name branches
#: ``model == "…"``, ``model != "…"``, ``model in ("…", …)``, ``model not in (…)``, on any
#: variable ending in ``model`` (``args.model``, ``post.model``).
BRANCH = re.compile(r"""\bmodel\s*(==|!=)\s*["'](?!all["'])|\bmodel\s+(not\s+)?in\s+\(\s*["']""")
#: Product code outside the model modules.
LAYERS = ("inference", "validation", "reports")


def model_name_branches() -> list[str]:
    out = []
    for top in LAYERS:
        for p in sorted((ROOT / top).rglob("*.py")):
            for n, line in enumerate(p.read_text().splitlines(), 1):
                if BRANCH.search(line.split("#")[0]):
                    out.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()}")
    return out


def test_the_grep_finds_a_planted_branch():
    assert BRANCH.search('if args.model == "crowdbt":')
    assert BRANCH.search("if model in ('pl', 'bt'):")
    assert BRANCH.search('if model != "couple":')
    assert not BRANCH.search("if spec.pairwise and model in PAIR_MODELS:")


def test_no_model_name_branch_outside_the_model_modules():
    """Product code asks a model's typed spec (``PAIR_TABLE[m].covariates``, ``.category``,
    ``.worker_bias``, ``.normalized``) or a method's own table (``BATCH_MODELS``, Weng–Lin's
    ``GAMES``, ``EXPERIMENT_MODELS``, an online algorithm's ``saved_defaults``, the ``em``
    entry's models), never a model's name."""
    found = model_name_branches()
    assert not found, (f"{len(found)} model-name branch(es) in product code outside "
                       "models/:\n" + "\n".join(found))
