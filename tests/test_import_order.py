"""A program that imports ArviZ before any NumPyro module (ArviZ puts a lazy placeholder
for numpyro in ``sys.modules``) still runs NUTS from a warm start, whose start-up traces the
program for its sites' bijections (``inference/nuts/starts.py``): the first numpyro import
there was a submodule's, which left ``numpyro.distributions`` without its ``distribution``
attribute and ``numpyro.factor`` failing."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_nuts_warm_start_after_importing_arviz_first(tmp_path):
    code = textwrap.dedent("""
        import arviz_base  # noqa: F401  (first: its lazy numpyro placeholder)
        from crowdrank.inference.nuts import fit_nuts
        from crowdrank.inference.online import fit_online
        from crowdrank.models.priors import build_priors
        from crowdrank.models.simulate import simulate

        d = simulate("couple", n_items=5, n_workers=2, tasks_per_worker=6, seed=0).rankings
        pri = build_priors(d)
        on = fit_online(d, "couple", pri, progress=False)
        r = fit_nuts(d, "couple", pri, chains=1, tune=5, draws=5, approx=on,
                     progress=False, pointwise=False, predictive=False)
        print("draws", r.idata["posterior"]["lambda"].shape)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "draws (1, 5, 5)" in out.stdout
