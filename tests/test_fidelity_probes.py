"""``bench/fidelity_probes.py``: the probes run on the subjects whose NUTS reference is
cached, and skip the others. The reference reader is replaced, so nothing is sampled."""

from __future__ import annotations

from bench_scripts import load_script


def test_probes_visit_only_subjects_with_a_cached_reference(tmp_path, monkeypatch):
    from crowdrank.inference import nuts

    probes = load_script("bench/fidelity_probes.py", "crowdrank_fidelity_probes")
    monkeypatch.setattr(nuts, "read_nuts", lambda folder: f"draws of {folder.name}")
    (tmp_path / "default-couple").mkdir()
    (tmp_path / "default-couple" / "posterior.nc").write_bytes(b"")
    got = list(probes._with_reference(["default-couple", "default-crowdbt"], tmp_path))
    assert [(g[0], g[1], g[4]) for g in got] == [("default-couple", "couple",
                                                  "draws of default-couple")]
    _, _, d, pri, _ = got[0]
    assert d.n_rankings > 0 and pri is not None
