"""Simulation-based calibration (validation/pipelines/sbc.py, `crowdrank sbc`).

The machinery is tested without NUTS through the prior oracle (the exact posterior given no
data is the prior, so its ranks are uniform), and it must *fail* a deliberately shifted
posterior; the NUTS route runs end to end on tiny data in the slow tests.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from crowdrank.reports.cli import main
from crowdrank.validation.pipelines.sbc import (
    SbcConfig,
    cauchy_combination,
    chi2_test,
    draw_dirichlet,
    ecdf_test,
    holm,
    online_pit,
    run_sbc,
    sbc_ranks,
    thin_draws,
)


# ----------------------------------------------------------------------------- ranks
def test_ranks_hand_cases():
    draws = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]])
    assert sbc_ranks(draws, np.array([2.5, 0.0])).tolist() == [2, 0]
    assert sbc_ranks(draws, np.array([5.0, 25.0])).tolist() == [4, 2]


def test_ranks_break_ties_uniformly():
    draws = np.zeros((3, 1))       # every draw equals the truth: rank uniform on 0..3
    rng = np.random.default_rng(1)
    got = [int(sbc_ranks(draws, np.zeros(1), rng)[0]) for _ in range(400)]
    counts = np.bincount(got, minlength=4)
    assert counts.size == 4 and counts.min() > 60


def test_ranks_bad_input():
    with pytest.raises(ValueError, match="NaN"):
        sbc_ranks(np.array([[np.nan]]), np.array([0.0]))
    with pytest.raises(ValueError, match="draws must be"):
        sbc_ranks(np.zeros((3, 2)), np.zeros(3))


def test_thin_draws_even_spacing_across_chains():
    x = np.arange(20.0).reshape(2, 10)        # (chain, draw)
    assert thin_draws(x, 4).tolist() == [0.0, 6.0, 13.0, 19.0]
    with pytest.raises(ValueError, match="cannot thin"):
        thin_draws(x, 21)


# ----------------------------------------------------------------------------- tests of uniformity
def test_ecdf_test_accepts_uniform_and_rejects_non_uniform():
    rng = np.random.default_rng(3)
    S = 100
    uniform = rng.integers(0, S + 1, size=200)
    assert ecdf_test(uniform, S + 1).p_value > 0.05
    too_wide = np.clip(np.round(rng.normal(S / 2, S / 8, size=200)), 0, S)  # ∩ ECDF
    shifted = np.minimum(rng.integers(0, S + 1, size=200) + 25, S)           # biased
    for bad in (too_wide, shifted):
        e = ecdf_test(bad, S + 1)
        assert e.p_value < 0.01 and not e.inside
    u = rng.random(150)
    assert ecdf_test(u).p_value > 0.05
    assert ecdf_test(u ** 1.6).p_value < 0.01


def test_ecdf_test_size_is_nominal():
    """Under uniformity about 5 % of samples leave the simultaneous 95 % band."""
    rng = np.random.default_rng(11)
    rej = [ecdf_test(rng.integers(0, 51, size=80), 51, n_sim=1000).p_value < 0.05
           for _ in range(300)]
    assert 0.02 <= np.mean(rej) <= 0.09


def test_ecdf_band_matches_arviz_stats():
    """The continuous-PIT band agrees with arviz_stats' simulated band within one count."""
    from arviz_stats.ecdf_utils import ecdf_pit

    u = np.random.default_rng(0).random(100)
    mine = ecdf_test(u, None, n_sim=4000)
    _, ecdf, lo, hi = ecdf_pit(u, 0.95, 4000, rng=np.random.default_rng(1))
    assert np.allclose(mine.ecdf, ecdf[1:-1])
    assert np.abs(mine.lower - lo[1:-1]).max() <= 0.0101
    assert np.abs(mine.upper - hi[1:-1]).max() <= 0.0101


def test_ecdf_test_bad_input():
    with pytest.raises(ValueError, match="integers"):
        ecdf_test(np.array([0, 1, 5]), 5)
    with pytest.raises(ValueError, match="PIT"):
        ecdf_test(np.array([0.1, 1.2]))
    with pytest.raises(ValueError, match="NaN"):
        ecdf_test(np.array([0.1, np.nan]))


def test_chi2_and_combinations():
    rng = np.random.default_rng(5)
    assert chi2_test(rng.integers(0, 101, size=300), 101) > 0.01
    assert chi2_test(rng.integers(0, 40, size=300), 101) < 1e-6
    assert cauchy_combination([0.5, 0.5, 0.5]) == pytest.approx(0.5)
    assert cauchy_combination([1e-6, 0.6, 0.7, 0.8]) < 1e-4
    assert cauchy_combination([0.9, 0.95]) > 0.8
    assert holm([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.06, 0.06])


def test_family_verdict_false_alarm_rate():
    """Exact Gaussian PITs of λ and of the (dependent, sum-zero) centred λ: the verdict's
    family-wise false-alarm rate stays near or below alpha = 0.05 despite the dependence."""
    from scipy.stats import norm

    from crowdrank.validation.pipelines.sbc import uniformity_summary

    N, L = 40, 10
    names = [f"l{i}" for i in range(L)] + [f"c{i}" for i in range(L)]
    fams = ["lambda"] * L + ["lambda_centred"] * L
    rng = np.random.default_rng(0)
    alarms = 0
    for _ in range(100):
        lam = rng.normal(size=(N, L))
        c = lam - lam.mean(1, keepdims=True)
        pit = np.concatenate([norm.cdf(lam), norm.cdf(c / np.sqrt(1 - 1 / L))], axis=1)
        alarms += not uniformity_summary(pit, names, fams, None, n_sim=1000)["calibrated"]
    assert alarms <= 8


# ----------------------------------------------------------------------------- prior draws, PIT
def test_draw_dirichlet_tiny_concentrations():
    alpha = np.tile(10 * 6.0 ** -np.arange(1, 5), (4000, 1))   # the paper's geometric prior
    eta = draw_dirichlet(np.random.default_rng(2), alpha)
    assert np.all(np.isfinite(eta)) and np.allclose(eta.sum(1), 1)
    mean = alpha[0] / alpha[0].sum()
    assert np.allclose(eta.mean(0), mean, atol=4 * eta.std(0) / np.sqrt(4000))


def test_online_pit_at_the_mean_is_a_half():
    class Post:
        mu = np.array([0.3, -0.3])
        sigma2 = np.array([0.5, 0.5])
        alpha = np.array([[2.0, 2.0]])

    truth = np.array([0.3, -0.3, 0.3, -0.3, 0.5])   # λ, centred λ, CrowdBT accuracy
    assert np.allclose(online_pit("crowdbt", Post, truth), 0.5)


# ----------------------------------------------------------------------------- the oracle
@pytest.mark.parametrize("model", ["pl", "crowdbt", "couple-normalized"])
def test_prior_oracle_passes(tmp_path, model):
    """Exact posterior (the prior, given no data): ranks and PITs must be uniform."""
    s = run_sbc(SbcConfig(model=model, backend="prior", sims=120, seed=4), tmp_path,
                processes=1, progress=False, n_sim=1000)
    assert s["nuts"]["calibrated"], s["nuts"]["families"]
    assert s["online"]["calibrated"], s["online"]["families"]
    assert set(s["nuts"]["families"]) == ({"lambda", "lambda_centred"} | (
        {"eta"} if model != "pl" else set()))


def test_shifted_posterior_fails(tmp_path):
    """Every λ draw moved by +0.5 posterior sd: SBC must reject the λ family."""
    s = run_sbc(SbcConfig(model="pl", backend="prior", sims=120, seed=4, shift_sd=0.5),
                tmp_path, processes=1, progress=False, n_sim=1000)
    assert not s["nuts"]["calibrated"]
    assert not s["nuts"]["families"]["lambda"]["calibrated"]
    assert s["nuts"]["families"]["lambda"]["ecdf_p_combined"] < 0.01
    assert s["online"]["calibrated"]          # the hook touches the draws, not the online fit


def test_oracle_is_seeded_and_resumes(tmp_path):
    cfg = SbcConfig(model="crowdbt", backend="prior", sims=6, seed=9)
    a = run_sbc(cfg, tmp_path / "a", processes=1, progress=False, n_sim=200)
    b = run_sbc(cfg, tmp_path / "b", processes=1, progress=False, n_sim=200)
    assert (tmp_path / "a" / "ranks.csv").read_text() == (tmp_path / "b" / "ranks.csv").read_text()
    assert a["nuts"]["parameters"] == b["nuts"]["parameters"]
    again = run_sbc(cfg, tmp_path / "a", processes=1, progress=False, n_sim=200)
    assert again["timing"]["computed_this_run"] == 0
    more = run_sbc(SbcConfig(model="crowdbt", backend="prior", sims=8, seed=9), tmp_path / "a",
                   processes=1, progress=False, n_sim=200)
    assert more["timing"]["computed_this_run"] == 2 and more["replicates"] == 8


def test_config_errors():
    with pytest.raises(ValueError, match="couple-normalized"):
        SbcConfig(model="couple")
    with pytest.raises(ValueError, match="pairwise"):
        SbcConfig(model="crowdbt", kmax=3)
    with pytest.raises(ValueError, match="cannot thin"):
        SbcConfig(chains=1, draws=50, n_ranks=100)


def test_nuts_defaults_per_model():
    """Normalised COUPLE runs 4 x (300 + 500) by default (its gradient sums over k!
    orderings), the others 4 x (500 + 1000); explicit values win, and the resolved numbers
    are in the replicate's cache key, so the pl/crowdbt keys are those of earlier studies."""
    from crowdrank.validation.pipelines.sbc import NUTS_DEFAULTS

    c = SbcConfig(model="couple-normalized")
    assert (c.tune, c.draws) == NUTS_DEFAULTS["couple-normalized"] == (300, 500)
    assert c.spec(0)["tune"] == 300 and c.spec(0)["draws"] == 500
    for m in ("pl", "crowdbt"):
        c = SbcConfig(model=m)
        assert (c.tune, c.draws) == (500, 1000)
        assert c.spec(3) == SbcConfig(model=m, tune=500, draws=1000).spec(3)
    c = SbcConfig(model="couple-normalized", tune=200, draws=700)
    assert (c.tune, c.draws) == (200, 700)
    with pytest.raises(ValueError, match="cannot thin"):
        SbcConfig(model="couple-normalized", chains=1, draws=None, n_ranks=600)


def test_lane_options_errors_and_cache_keys():
    """``lane_groups`` changes the schedule of a batch, not its draws: it is not part of a
    replicate's cache key; ``warmup_depth`` changes the chains: it is, but only when set,
    so studies cached before the option existed keep their keys."""
    with pytest.raises(ValueError, match="lane_groups must be"):
        SbcConfig(lane_groups=0)
    with pytest.raises(ValueError, match="warmup_depth must be"):
        SbcConfig(warmup_depth=11)
    for kw in ({"backend": "pymc", "lane_groups": 2}, {"batch": 1, "warmup_depth": 5}):
        with pytest.raises(ValueError, match="vmapped NumPyro batches"):
            SbcConfig(**kw)
    base = SbcConfig(model="crowdbt").spec(3)
    assert "lane_groups" not in base and "warmup_depth" not in base
    assert SbcConfig(model="crowdbt", lane_groups=4).spec(3) == base
    capped = SbcConfig(model="crowdbt", warmup_depth=6).spec(3)
    assert capped["warmup_depth"] == 6 and capped != base


def test_batch_job_receives_the_lane_options(tmp_path, monkeypatch):
    """``run_sbc`` hands ``lane_groups`` and ``warmup_depth`` to the batched sampler (a
    stand-in here that records them and returns prior draws), and a study cached with one
    lane grouping is reused by another."""
    import types

    from crowdrank.inference.nuts import batched

    seen = []

    def fake(datasets, model, priors, *, seeds, chains, tune, draws, **kw):
        seen.append(kw)
        rng = np.random.default_rng(0)
        out = []
        for d in datasets:
            lam = rng.normal(priors.mu0, priors.sigma0, size=(chains, draws, d.n_items))
            gate = types.SimpleNamespace(trusted=True, to_dict=lambda: {
                "trusted": True, "reasons": [], "divergences": 0, "ess_bulk_min": 1e3})
            out.append({"posterior": {"lambda": lam}, "gate": gate,
                        "stats": {}, "timings": {"total": 0.0}})
        return out

    monkeypatch.setattr(batched, "fit_nuts_batched", fake)
    cfg = SbcConfig(model="pl", sims=4, batch=2, chains=1, draws=20, n_ranks=10,
                    online=False, lane_groups=3, warmup_depth=5)
    s = run_sbc(cfg, tmp_path, processes=1, progress=False, n_sim=100)
    assert s["replicates"] == 4 and s["timing"]["lane_groups"] == 3
    assert [k["lane_groups"] for k in seen] == [3, 3]
    assert [k["warmup_max_tree_depth"] for k in seen] == [5, 5]
    again = run_sbc(SbcConfig(model="pl", sims=4, batch=2, chains=1, draws=20, n_ranks=10,
                              online=False, lane_groups=1, warmup_depth=5),
                    tmp_path, processes=1, progress=False, n_sim=100)
    assert again["timing"]["computed_this_run"] == 0 and len(seen) == 2


# ----------------------------------------------------------------------------- the command
def test_cli_writes_three_files(tmp_path, capsys):
    out = tmp_path / "sbc"
    rc = main(["sbc", "--model", "couple-normalized", "--backend", "prior", "--sims", "20",
               "--kmax", "3", "--processes", "1", "--no-progress", "--out", str(out)])
    assert rc == 0
    assert {"ranks.csv", "sbc.json", "sbc.html"} <= {p.name for p in out.iterdir()}
    summary = json.loads((out / "sbc.json").read_text())
    assert summary["replicates"] == 20 and summary["n_draws"] == 100
    lines = (out / "ranks.csv").read_text().splitlines()
    assert lines[0] == "sim,param,family,rank,n_draws,gate_passed,truth,online_pit"
    assert len(lines) == 1 + 20 * (10 + 10 + 4 * 3)
    page = (out / "sbc.html").read_text()
    assert "data:image/png;base64," in page and "<script" not in page
    assert "calibrated" in capsys.readouterr().out


def test_cli_bad_model_is_one_line_error(tmp_path, capsys):
    # no exact simulator: one line naming those that have one, and --posterior
    rc = main(["sbc", "--model", "peergrader", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "exact simulator for" in err and "--posterior" in err
    assert len(err.strip().splitlines()) == 1
    # stagewise COUPLE has an exact simulator on pairs only: beyond them, a one-line refusal
    rc = main(["sbc", "--model", "couple", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and "couple-normalized" in err and len(err.strip().splitlines()) == 1
    rc = main(["sbc", "--backend", "prior", "--worker-prior", "uniform", "--out",
               str(tmp_path)])
    assert rc == 2 and "worker prior" in capsys.readouterr().err


def test_cli_check_flag_fails_shifted(tmp_path):
    rc = main(["sbc", "--model", "pl", "--backend", "prior", "--sims", "120", "--shift-sd",
               "0.5", "--processes", "1", "--no-progress", "--no-online", "--check",
               "--out", str(tmp_path)])
    assert rc == 3


# ----------------------------------------------------------------------------- NUTS, tiny
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["numpyro", "pymc"])
def test_nuts_end_to_end_tiny(tmp_path, backend):
    s = run_sbc(SbcConfig(model="crowdbt", backend=backend, sims=2, n_items=4, n_workers=2,
                          tasks_per_worker=6, chains=2, tune=150, draws=100, n_ranks=50),
                tmp_path, processes=1, progress=False, n_sim=200)
    assert s["replicates"] == 2 and not s["failed_replicates"]
    assert s["gate"]["passed"] + s["gate"]["failed"] == 2
    ranks = np.loadtxt(tmp_path / "ranks.csv", delimiter=",", skiprows=1,
                       usecols=3, dtype=int)
    assert ranks.size == 2 * (4 + 4 + 2) and ranks.min() >= 0 and ranks.max() <= 50


@pytest.mark.slow
def test_numpyro_replicates_do_not_leak_memory_mappings():
    """Replicates in one process must not accumulate compiled programs: each kept ~2,000
    memory mappings, and ~30 replicates reached vm.max_map_count and crashed the run."""
    import os
    from pathlib import Path

    from crowdrank.validation.pipelines.sbc import sbc_job

    maps = Path(f"/proc/{os.getpid()}/maps")
    if not maps.exists():
        pytest.skip("needs /proc")
    # PL, the cheapest program to compile: a leak of compiled programs shows on any model
    cfg = SbcConfig(model="pl", backend="numpyro", sims=3, n_items=4, n_workers=2,
                    tasks_per_worker=6, chains=2, tune=30, draws=20, n_ranks=10, online=False)
    # The same replicate three times: its program is the same each time, so the 2nd and 3rd
    # load it from the run's compilation cache instead of compiling it (39 -> 28 s alone, idle);
    # a loaded executable holds its mappings as a compiled one does (a planted leak, the
    # cache clear skipped, still adds ~1,500 mappings a replicate here).
    counts = []
    for _ in range(3):
        sbc_job(cfg.spec(0))
        counts.append(len(maps.read_text().splitlines()))
    assert counts[2] - counts[1] < 300, counts


def test_cli_option_errors_are_one_line(tmp_path, capsys):
    """Bad option values are the user's to fix: one line, exit 2 (not a traceback)."""
    from crowdrank.reports.cli import main

    for argv, needle in [(["--sims", "1"], "at least 2 replicates"),
                         (["--chains", "2", "--draws", "20"], "cannot thin"),
                         (["--backend", "pymc", "--lane-groups", "2"], "vmapped NumPyro"),
                         (["--warmup-depth", "0"], "warmup_depth must be")]:
        rc = main(["sbc", "--model", "pl", "--out", str(tmp_path / "o"), *argv])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and len(err.splitlines()) == 1 and needle in err, err


def test_a_truth_piling_up_at_rank_zero_fails_through_the_tail_sensitive_test():
    """The pattern an outside SBC found for CrowdBT's accuracy (4 of 65 ranks exactly 0,
    about 0.6 expected): the ECDF band's family combination alone passes it even at the
    whole alpha, the combined pot_c p-value does not, and the verdict follows pot_c."""
    from crowdrank.validation.pipelines.sbc import uniformity_summary

    n_values, N = 101, 65
    rng = np.random.default_rng(3)
    ranks = rng.integers(0, n_values, size=(N, 3)).astype(float)
    ranks[:4, 0] = 0                                   # four truths below every draw
    ranks[4:7, 0] = rng.integers(1, 7, size=3)         # and three more in the lowest cells
    out = uniformity_summary(ranks, ["e0", "e1", "e2"], ["eta"] * 3, n_values, n_sim=1000)
    fam = out["families"]["eta"]
    assert fam["ecdf_p_combined"] >= 0.05               # the band alone: no alarm
    assert fam["pot_c_p_combined"] < fam["threshold"] == 0.05 / 2
    assert not out["calibrated"] and out["verdict"] == "NOT calibrated: eta"
