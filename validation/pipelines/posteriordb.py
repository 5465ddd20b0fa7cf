"""A NUTS reference exported in posteriordb's layout, so that a PPL or VI developer can test
a method on a crowd-ranking posterior ([Magnusson24]; none of the public reference sets
holds a ranking or crowd model).

One export writes, under ``out/``::

    posteriors/NAME-MODEL.json                         the posterior: data, model, reference
    data/info/NAME.info.json, data/data/NAME.json.zip  the rankings and the priors' numbers
    models/info/MODEL.info.json                        the model, and its code for both PPLs:
    models/numpyro/MODEL.py, models/pymc/MODEL.py      the source of the modules that build it
    reference_posteriors/draws/info/NAME-MODEL.info.json   how the draws were certified
    reference_posteriors/draws/draws/NAME-MODEL.json.zip   the draws: one dict per chain

The draws file is posteriordb's: a list with one ``{parameter: [draw, ...]}`` per chain,
parameters named ``lambda[ITEM]`` and ``eta[WORKER]`` / ``eta[WORKER,STAGE]`` with the
data's own ids. The info file carries the certification the suite's gate applies
(:mod:`crowdrank.inference.gate`: chains, draws, R-hat, bulk and tail ESS, divergences,
E-BFMI, the verdict), the sampler's settings, the date and the crowdrank version and commit.
An untrusted run is refused unless ``allow_untrusted``, and then says so in the info file.
"""

from __future__ import annotations

import datetime as _dt
import functools
import inspect
import json
import subprocess
import zipfile
from pathlib import Path

import numpy as np

from crowdrank.models.data import Rankings
from crowdrank.models.errors import UsageError
from crowdrank.models.priors import Priors
from crowdrank.models.registry import get as get_model

__all__ = ["draws_by_chain", "export_posteriordb", "read_reference_draws"]


@functools.cache
def _commit() -> str:
    # asked once per process: the files of one export name the same commit
    here = Path(__file__).resolve().parents[1]
    try:
        return subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _write_zip_json(path: Path, obj) -> Path:
    """posteriordb keeps data and draws as a one-member zip of a JSON file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(path.name.removesuffix(".zip"), json.dumps(obj))
    return path


def _write_json(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1) + "\n")
    return path


def draws_by_chain(tree) -> list[dict[str, list[float]]]:
    """The posterior group of a DataTree as posteriordb's draws: one dict per chain,
    ``lambda[ITEM]`` and ``eta[WORKER]`` or ``eta[WORKER,STAGE]`` → the chain's draws."""
    post = tree["posterior"]
    lam = np.asarray(post["lambda"].values, float)              # (C, S, L)
    items = [str(v) for v in post["item"].values]
    chains = [{f"lambda[{it}]": lam[c, :, i].tolist() for i, it in enumerate(items)}
              for c in range(lam.shape[0])]
    if "eta" in post.data_vars:
        eta = np.asarray(post["eta"].values, float)
        workers = [str(v) for v in post["worker"].values]
        for c, chain in enumerate(chains):
            for w, wid in enumerate(workers):
                if eta.ndim == 3:
                    chain[f"eta[{wid}]"] = eta[c, :, w].tolist()
                else:
                    for t, stage in enumerate(post["stage"].values):
                        chain[f"eta[{wid},{int(stage)}]"] = eta[c, :, w, t].tolist()
    return chains


def _data_json(data: Rankings, priors: Priors, model: str) -> dict:
    spec = get_model(model)
    prior = {"mu0": float(priors.mu0), "sigma0": float(priors.sigma0), "spec": priors.spec}
    if spec.worker_prior is not None:
        prior["worker_family"] = spec.worker_prior.name
        prior["worker_params"] = np.asarray(spec.worker_prior.table(priors, spec.prior_K(data.K)),
                                            float).tolist()
    return {"items": [str(i) for i in data.items], "workers": [str(w) for w in data.workers],
            # best first, as 0-based indices into "items"; "ranking_worker" into "workers"
            "rankings": data.as_lists(), "ranking_worker": np.asarray(data.worker).tolist(),
            "prior": prior, "source": str(data.source)}


def _model_code(model: str, role: str) -> str:
    """The source file of the module that holds the model's ``role`` function (its
    NumPyro or PyMC likelihood columns), headed by how to use it."""
    fn = get_model(model).fn(role)
    path = inspect.getsourcefile(fn)
    head = (f'"""crowdrank {model!r}: {role.split("_")[0]} model source, exported from '
            f"crowdrank at commit {_commit()} (module {fn.__module__}).\n"
            f"It imports crowdrank for its helpers: pip install crowdrank at that commit.\n"
            f'The data file holds the rankings and the priors\' numbers."""\n\n')
    return head + Path(path).read_text()


def _info(tree, gate, data: Rankings, name: str, model: str, settings: dict) -> dict:
    import arviz_stats as azs

    summ = azs.summary(tree, round_to="none")
    chains = int(tree["posterior"].sizes["chain"])
    draws = int(tree["posterior"].sizes["draw"])
    g = gate.to_dict()
    return {"name": f"{name}-{model}",
            "inference": {"method": "nuts", "method_arguments": settings},
            "diagnostics": {"nchains": chains, "ndraws": draws,
                            "parameters": [str(p) for p in summ.index],
                            "r_hat": summ["r_hat"].astype(float).tolist(),
                            "effective_sample_size_bulk": summ["ess_bulk"].astype(float)
                            .tolist(),
                            "effective_sample_size_tail": summ["ess_tail"].astype(float)
                            .tolist(),
                            "divergent_transitions": int(g["divergences"]),
                            "ebfmi_min": g["ebfmi_min"]},
            "checks_made": {"gate": "R-hat < 1.01, bulk and tail ESS >= 400, no divergences, "
                                    "E-BFMI >= 0.3 (crowdrank.inference.gate)",
                            "trusted": bool(g["trusted"]), "verdict": gate.verdict(),
                            "reasons": list(g["reasons"])},
            "n_rankings": int(data.n_rankings),
            "added_by": "crowdrank export",
            "added_date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "versions": {"crowdrank_commit": _commit()}}


def export_posteriordb(out, tree, gate, data: Rankings, priors: Priors, model: str, *,
                       name: str, settings: dict | None = None, description: str = "",
                       allow_untrusted: bool = False) -> dict[str, Path]:
    """Write the reference ``tree`` (a NUTS DataTree of ``model`` on ``data`` under
    ``priors``; ``gate`` its :class:`~crowdrank.inference.gate.Gate`) in posteriordb's
    layout under ``out``; returns the written paths by role.

    Raises :class:`~crowdrank.models.errors.UsageError` when the gate did not pass and
    ``allow_untrusted`` is false, or when the tree's items are not the data's."""
    if not gate.trusted and not allow_untrusted:
        raise UsageError(f"{gate.verdict()}: an untrusted run is not a reference "
                         "(--allow-untrusted exports it marked as such)")
    items = [str(v) for v in tree["posterior"]["item"].values]
    if items != [str(i) for i in data.items]:
        raise UsageError("the posterior's items are not the data's (same file and model?)")
    out = Path(out)
    post = f"{name}-{model}"
    spec = get_model(model)
    paths = {
        "data": _write_zip_json(out / "data" / "data" / f"{name}.json.zip",
                                _data_json(data, priors, model)),
        "data_info": _write_json(out / "data" / "info" / f"{name}.info.json",
                                 {"name": name, "title": description or str(data.source),
                                  "data_file": f"data/data/{name}.json",
                                  "keywords": ["rankings", "crowdsourcing"],
                                  "added_by": "crowdrank export"}),
        "numpyro": out / "models" / "numpyro" / f"{model}.py",
        "pymc": out / "models" / "pymc" / f"{model}.py",
        "draws": _write_zip_json(out / "reference_posteriors" / "draws" / "draws"
                                 / f"{post}.json.zip", draws_by_chain(tree)),
        "draws_info": _write_json(out / "reference_posteriors" / "draws" / "info"
                                  / f"{post}.info.json",
                                  _info(tree, gate, data, name, model, settings or {})),
    }
    for role, key in (("numpyro_columns", "numpyro"), ("pymc_columns", "pymc")):
        paths[key].parent.mkdir(parents=True, exist_ok=True)
        paths[key].write_text(_model_code(model, role))
    paths["model_info"] = _write_json(
        out / "models" / "info" / f"{model}.info.json",
        {"name": model, "title": spec.title, "keywords": ["ranking", "crowdsourcing"],
         "model_implementations": {"numpyro": {"model_code": f"models/numpyro/{model}.py"},
                                   "pymc": {"model_code": f"models/pymc/{model}.py"}},
         "added_by": "crowdrank export"})
    paths["posterior"] = _write_json(
        out / "posteriors" / f"{post}.json",
        {"name": post, "model_name": model, "data_name": name,
         "reference_posterior_name": post if gate.trusted else None,
         "dimensions": {"lambda": len(items),
                        **({"eta": int(np.prod(tree["posterior"]["eta"].shape[2:]))}
                           if "eta" in tree["posterior"].data_vars else {})},
         "keywords": ["crowdrank", "trusted" if gate.trusted else "not certified"],
         "added_by": "crowdrank export"})
    return paths


def read_reference_draws(path) -> list[dict[str, list[float]]]:
    """The chains of a ``*.json.zip`` draws file (posteriordb's format)."""
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read(z.namelist()[0]))
