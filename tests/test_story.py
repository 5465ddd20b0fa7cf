"""crowdrank story: runs, writes its files, and its numbers say what the text says."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crowdrank.models.likelihood import couple_normalizer
from crowdrank.reports import cli
from crowdrank.reports.story import eq4_normalizers, kendall_tau_rows, story_report_prob, tell


def test_story_command_writes_markdown_json_and_figures(tmp_path, capsys):
    out = tmp_path / "story"
    assert cli.main(["story", "--seed", "1", "--out", str(out)]) == 0
    md = (out / "story.md").read_text()
    facts = json.loads((out / "story.json").read_text())
    pngs = sorted((out / "figures").glob("story_*.png"))
    assert len(pngs) == 5 and all(0 < p.stat().st_size < 200_000 for p in pngs)
    for p in pngs:
        assert f"figures/{p.name}" in md
    for heading in ("true scores", "uncertainty vector", "true order", "stage by stage",
                    "Eq. 4", "normalised COUPLE", "prior predictive"):
        assert heading in md
    z = facts["normalizer"]
    assert z["k"] == 4 and abs(z["Z"] - 1) > 1e-6            # Eq. 4 is not normalised
    assert z["normalized_sum"] == pytest.approx(1, abs=1e-12)
    assert z["story_sum"] == pytest.approx(1, abs=1e-12)
    assert z["Z_pair"] == pytest.approx(1, abs=1e-12)        # k = 2: CrowdBT, normalised
    assert f"Z = {z['Z']:.4f}" in md
    assert len(facts["stages"]) == 3 and sorted(facts["reported"]) == sorted(facts["task"])
    # the simulators against exact probabilities: 20,000 draws, gaps under ~4 standard errors
    g = facts["gumbel_check"]
    np.testing.assert_allclose(g["simulated"], g["softmax"], atol=0.015)
    assert z["sampler_max_gap"] < 0.008
    for st in facts["stages"]:
        assert st["true_winner"] == st["candidates"][0]
        assert st["reported"] == st["candidates"][st["offset"] - 1]
        assert sum(st["etabar"]) == pytest.approx(1)


def test_story_is_seeded():
    a = tell(seed=5, figures=False)
    b = tell(seed=5, figures=False)
    c = tell(seed=6, figures=False)
    assert a.markdown == b.markdown
    # another seed draws another example (the markdown alone differs anyway: it names
    # the seed)
    assert a.facts["lambda"] == b.facts["lambda"] and a.facts["lambda"] != c.facts["lambda"]


@pytest.mark.parametrize("model", ["pl", "bt", "crowdbt", "couple-normalized"])
def test_story_for_every_model(model, tmp_path):
    s = tell(model, "spammer", seed=2, out=tmp_path, figures=False, predictive_workers=10,
             predictive_tasks=10)
    assert s.path.is_file() and s.facts["model"] == model
    z = s.facts["normalizer"]
    assert z["k"] == 4 and z["normalized_sum"] == pytest.approx(1)
    if model in ("pl", "bt"):  # perfect workers report the true order
        assert s.facts["reported"] == s.facts["true_order"]
        assert s.facts["prior_predictive"]["types"]["malicious"]["tau_true_mean"] == 1.0


def test_story_probabilities_sum_to_one_and_normalizer_matches_reference():
    rng = np.random.default_rng(0)
    lam = rng.normal(size=5)
    eta = np.array([0.5, 0.3, 0.15, 0.05])
    from itertools import permutations
    sub = [0, 2, 4]
    tot = sum(story_report_prob(lam, eta, sub, list(p)) for p in permutations(sub))
    assert tot == pytest.approx(1)
    lams = rng.normal(size=(20, 4))
    etas = rng.dirichlet(np.ones(4), size=20)
    z = eq4_normalizers(lams, etas, 4)
    ref = [couple_normalizer(lams[i], etas[i], np.arange(4)) for i in range(20)]
    np.testing.assert_allclose(z, ref, rtol=1e-12)


def test_kendall_tau_rows():
    a = np.array([[0, 1, 2], [2, 1, 0], [1, 0, 2]])
    b = np.array([[0, 1, 2]] * 3)
    np.testing.assert_allclose(kendall_tau_rows(a, b), [1, -1, 1 / 3])


def test_story_html_is_one_self_contained_page(tmp_path):
    """story.html beside story.md: every figure embedded, no external resource, the same
    sections and numbers as the Markdown."""
    import re

    s = tell(seed=1, out=tmp_path, predictive_workers=10, predictive_tasks=10)
    page = s.html_path.read_text(encoding="utf-8")
    assert s.html_path == tmp_path / "story.html"
    assert page.count('src="data:image/png;base64,') == len(s.figures) == 5
    assert not re.search(r'(src|href)="(?!data:|#)', page)      # nothing outside the file
    assert "<script" not in page
    for h in re.findall(r"^## (.+)$", s.markdown, flags=re.MULTILINE):
        assert f">{h.replace(chr(39), '&#x27;').replace('`', '')}</h2>" in page.replace(
            "<code>", "").replace("</code>", "")
    assert f"Z = {s.facts['normalizer']['Z']:.4f}" in page
    tables = re.findall(r"^\|---", s.markdown, flags=re.MULTILINE)
    assert page.count("<table>") == len(tables) >= 5
    assert tell(seed=1, out=tmp_path / "n", html=False, figures=False,
                predictive_workers=5, predictive_tasks=5).html_path is None


def test_story_page_escapes_text_and_refuses_a_missing_figure(tmp_path):
    from crowdrank.reports.story_html import story_page

    p = story_page("# T <b>\n\nintro\n\n## A & B\n\ntext <script>x</script>\n", tmp_path,
                   tmp_path / "p.html")
    page = p.read_text(encoding="utf-8")
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert ">A &amp; B</h2>" in page and "<p>intro</p>" in page
    with pytest.raises(FileNotFoundError, match="missing.png"):
        story_page("# T\n\n## A\n\n![x](figures/missing.png)\n", tmp_path, tmp_path / "q.html")
