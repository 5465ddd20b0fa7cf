"""The method registry (crowdrank.inference.methods): its contract, and a toy method
registered by a fixture and run through ``crowdrank fit``, the audit and ``compare``
without touching any other file (as tests/test_registry.py does for a toy model)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields

import pytest

from crowdrank.inference import methods
from crowdrank.models.errors import DataError, UsageError


# ====================================================================== the contract
@pytest.mark.parametrize("name", list(methods.REGISTRY))
def test_every_entry_has_defaults_help_and_a_loadable_fit(name):
    m = methods.get(name)
    methods.check_options_class(m.options_class)     # raises on a field without either
    opts = m.options()                               # every default fills the dataclass
    assert {f.name for f in fields(opts)} == {f.name for f in fields(m.options_class)}
    assert callable(m.fn("fit")) and m.title
    assert m.model_names(), f"{name} fits no registered model"
    if m.backends:
        assert m.options().backend in m.backends


def test_check_options_class_refuses_a_field_without_help_or_default():
    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class NoHelp:
        x: int = 1

    @dataclass(frozen=True)
    class NoDefault:
        x: int = field(metadata={"help": "x"})

    for cls in (NoHelp, NoDefault):
        with pytest.raises(UsageError):
            methods.check_options_class(cls)


def test_get_and_options_errors_name_the_choices():
    with pytest.raises(UsageError, match="choose one of nuts, gibbs, online"):
        methods.get("nope")
    with pytest.raises(UsageError, match="has no option 'tayler'"):
        methods.get("online").options(tayler="paper")
    with pytest.raises(UsageError, match="fits models crowdbt, not 'bt'"):
        methods.get("em").check_model("bt")


def test_which_methods_fit_which_models():
    assert set(methods.names(model="bt")) >= {"nuts", "online", "ep", "map", "ml",
                                              "laplace", "bootstrap", "trueskill"}
    assert "online" not in methods.names(model="couple-normalized")
    crowdbt = methods.names(model="crowdbt", reference=False)
    assert {"online", "ep", "map", "em"} <= set(crowdbt)
    assert not {"laplace", "bootstrap", "ml", "trueskill"} & set(crowdbt)
    assert methods.names(reference=True) == ("nuts", "gibbs")
    assert methods.names(model="couple-normalized", reference=True) == ("nuts",)


def test_every_method_choice_of_fit_and_audit_is_an_entry():
    """``crowdrank fit --method`` offers exactly the registry; ``audit --approx`` takes
    every approximation of it (and refuses the reference)."""
    from crowdrank.reports.cli import build_parser
    from crowdrank.validation.pipelines.audit import parse_variants

    fit = build_parser("fit")._subparsers._group_actions[0].choices["fit"]
    (method,) = [a for a in fit._actions if a.dest == "method"]
    assert tuple(method.choices) == tuple(methods.REGISTRY)
    approx = methods.approximations()
    assert parse_variants([f"method={','.join(approx)}"])["method"] == list(approx)
    with pytest.raises(DataError, match="method takes online"):
        parse_variants(["method=nuts"])


def test_importing_the_registry_is_cheap():
    """``crowdrank --help`` imports the registry: no NumPy, JAX, PyTensor or pandas."""
    code = ("import sys; import crowdrank.inference.methods; "
            "print(sorted(m for m in ('numpy', 'jax', 'pytensor', 'pandas') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


# ====================================================================== a toy method
def fit_prior(data, model, priors, options, *, seed=0, progress=False):
    """The toy method: the prior's marginals as the posterior (λ_r ~ N(μ0, (scale·σ0)²))."""
    import numpy as np

    from crowdrank.inference.posterior import Posterior

    L = len(data.items)
    return Posterior.from_marginals(
        model, "prior", items=data.items, mu=np.full(L, priors.mu0),
        sigma2=np.full(L, (options.scale * priors.sigma0) ** 2), options={"scale": options.scale},
        seconds=0.0)


@pytest.fixture
def toy_method():
    from dataclasses import dataclass, field

    @dataclass(frozen=True)
    class PriorOptions:
        scale: float = field(default=1.0, metadata={"help": "multiplies the prior sd"})

    m = methods.register(methods.Method(
        name="prior", title="the prior itself (a toy method)", fit=fit_prior,
        options_class=PriorOptions, models=("bt", "pl")))
    yield m
    methods.unregister("prior")


def _bt_file(tmp_path, seed=0, n_items=5, tasks=30):
    from crowdrank.models.io import write_rankings
    from crowdrank.models.simulate import simulate

    sim = simulate("bt", n_items=n_items, n_workers=2, tasks_per_worker=tasks, seed=seed)
    f = tmp_path / "pairs.csv"
    write_rankings(sim.rankings, f)
    return f, sim.rankings


def test_register_refuses_a_taken_name(toy_method):
    with pytest.raises(UsageError, match="already registered"):
        methods.register(toy_method)
    assert "prior" in methods.names(model="bt") and "prior" not in methods.names(model="couple")


def test_toy_method_through_crowdrank_fit(toy_method, tmp_path, capsys):
    import numpy as np

    from crowdrank.inference.posterior_io import read_posterior
    from crowdrank.reports.cli import main

    f, data = _bt_file(tmp_path)
    with pytest.raises(SystemExit):
        main(["fit", "--method", "prior", "--help"])
    text = capsys.readouterr().out
    assert "--method prior: the prior itself" in text and "--scale" in text
    with pytest.raises(SystemExit):                 # the short help lists it
        main(["fit", "--help"])
    assert "the prior itself (a toy method)" in capsys.readouterr().out
    assert main(["fit", str(f), "--model", "bt", "--method", "prior", "--prior-mu", "0.5",
                 "--prior-sigma", "2", "--scale", "1.5", "--out", str(tmp_path / "o")]) == 0
    post = read_posterior(tmp_path / "o")         # the loader the audit uses
    assert post.method == "prior" and set(post.items) == set(data.items)
    np.testing.assert_array_equal(post.mu, 0.5)                  # the prior mean, exactly
    np.testing.assert_allclose(post.sigma2, (1.5 * 2.0) ** 2)    # (scale · σ0)²
    assert (tmp_path / "o" / "items.csv").exists()
    # the toy fits BT and PL only: a clear one-line error otherwise
    assert main(["fit", str(f), "--model", "crowdbt", "--method", "prior",
                 "--out", str(tmp_path / "x")]) == 2
    assert "fits models bt, pl, not 'crowdbt'" in capsys.readouterr().err


def test_toy_method_through_compare(toy_method):
    """Reference draws from the very law the toy returns: z ≈ 0, sd ratio ≈ 1, nominal
    coverage; a reference from twice the sd: sd ratio ≈ 0.5."""
    import arviz_base as ab
    import numpy as np

    from crowdrank.models.priors import Priors
    from crowdrank.models.simulate import simulate
    from crowdrank.validation.compare import compare

    data = simulate("bt", n_items=6, n_workers=2, tasks_per_worker=10, seed=1).rankings
    pri = Priors.geometric(data.workers, K=2, a0=10, a=3)
    approx = methods.get("prior").run(data, "bt", pri)
    rng = np.random.default_rng(0)

    def reference(sd):
        lam = rng.normal(pri.mu0, sd, size=(4, 4000, len(data.items)))
        stats_ = {"diverging": np.zeros((4, 4000), bool), "energy": rng.normal(size=(4, 4000))}
        t = ab.from_dict({"posterior": {"lambda": lam}, "sample_stats": stats_},
                         dims={"lambda": ["item"]}, coords={"item": list(data.items)})
        t.attrs["model"] = "bt"
        return t

    c = compare(reference(pri.sigma0), approx, identified=False)
    agg = c.aggregates["lambda"]
    assert agg["median_abs_z"] < 0.05 and abs(agg["median_sd_ratio"] - 1) < 0.03
    assert abs(agg["mean_coverage_90"] - 0.9) < 0.02
    wide = compare(reference(2 * pri.sigma0), approx, identified=False)
    assert abs(wide.aggregates["lambda"]["median_sd_ratio"] - 0.5) < 0.02


def test_toy_method_through_the_audit(toy_method, tmp_path):
    """``crowdrank audit --approx prior`` on tiny data with a tiny NUTS run: the toy is
    fitted, compared and written like every approximation (its label in metrics.json and
    parameters.csv, its file under variants/)."""
    import json

    import pandas as pd

    from crowdrank.reports.cli import main

    f, _ = _bt_file(tmp_path, n_items=4, tasks=15)
    out = tmp_path / "audit"
    assert main(["audit", str(f), "--model", "bt", "--approx", "prior", "--chains", "2",
                 "--tune", "30", "--draws", "30", "--permutations", "0", "--no-checks",
                 "--posterior-sbc", "0", "--quiet", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())["models"]["bt"]
    assert [v["variant"] for v in m["variants"]] == ["default", "method=prior"]
    table = pd.read_csv(out / "parameters.csv")
    prior_rows = table[table.variant == "method=prior"]
    assert len(prior_rows) == 4 and (prior_rows.approx_mean == 0.0).all()
    assert (out / "bt" / "online" / "variants" / "method-prior.json").exists()


def test_contracts_md_lists_posterior_and_method():
    """docs/contracts.md names the fields and signatures the code has (the helpers of
    tests/test_docs.py)."""
    from test_docs import _check_signature, _contract_params

    from crowdrank.inference.posterior import Marginals, Posterior
    from crowdrank.inference.posterior_io import read_posterior

    for cls in (Posterior, Marginals, methods.Method):
        assert _contract_params(cls.__name__)[0] == [f.name for f in fields(cls)]
    for name in ("from_marginals", "from_draws", "from_tree"):
        _check_signature(f"Posterior.{name}", getattr(Posterior, name))
    _check_signature("Method.run", methods.Method.run, skip_self=True)
    _check_signature("register", methods.register)
    _check_signature("read_posterior", read_posterior)


def test_laplace_is_the_ppl_laplace_where_the_batch_one_does_not_fit():
    """``--method laplace`` / ``--approx laplace``: the batch Laplace on BT and PL, the
    PPL's Laplace at the mode on the models the batch one does not fit (the issue's
    ``audit --approx advi,fullrank-advi,pathfinder,laplace`` on COUPLE and CrowdBT)."""
    from crowdrank.inference import methods
    from crowdrank.validation.pipelines.variants import model_variants

    assert methods.resolve("laplace", "bt") == "laplace"
    assert methods.resolve("laplace", "pl") == "laplace"
    for model in ("couple", "crowdbt"):
        assert not methods.get("laplace").fits(model)
        assert methods.resolve("laplace", model) == "laplace-ppl"
        got = [v["method"] for v in model_variants(model, {"method": ["advi", "laplace"]})]
        assert got[1:] == ["advi", "laplace-ppl"]
    assert methods.resolve("advi", "couple") == "advi"
    assert methods.resolve("nosuch", "couple") == "nosuch"
