"""The membership test's ROC in the report: the two sides' fresh scores binned in the typed
findings (ScoreHistogram, a few hundred numbers, backward-compatible JSON), the ROC and AUC computed exactly
from the binned counts, TPR at FPR 1e-3 and 1e-2 ("n/a" below 1 / FPR runs), the ROC and histogram figures
present exactly when a threshold test ran, fonts of at least 10 pt, the Markdown's figures as PNG files
beside it, no raw Markdown or JSON in the HTML, unique pair labels, and a violation said in words."""

from __future__ import annotations

import html
import io
import json
import re
from html.parser import HTMLParser

import numpy as np
import pytest

import dpaudit
from dpaudit.attacks.bounds import TestCounts as Threshold
from dpaudit.attacks.result import ScoreHistogram
from dpaudit.attacks.sampling import MAX_EDGES, score_edges, tally
from dpaudit.report import (draw_figure, exceeded, figures, html_report, markdown_report, roc_summary, sections,
                            write_report, Figure)
from dpaudit.runner.findings import Findings


def _hist(s0, s1, direction=1, threshold=None, chunks=1) -> ScoreHistogram:
    """The ScoreHistogram the attacks build: edges from (here the same) scores, chunks tallied and summed."""
    s0, s1 = np.asarray(s0, dtype=float), np.asarray(s1, dtype=float)
    test = Threshold("score", float(np.median(np.r_[s0, s1]) if threshold is None else threshold), direction, False)
    edges = score_edges(s0, s1, test)
    parts = []
    for s in (s0, s1):
        got = [tally(c, 0, edges) for c in np.array_split(s, chunks)]
        parts.append((sum(g[1] for g in got), sum(g[2] for g in got)))
    return ScoreHistogram("score", direction, tuple(edges), tuple(parts[0][0]), tuple(parts[1][0]),
                          parts[0][1] + parts[1][1])


def _mann_whitney_auc(s0, s1) -> float:
    """P(s1 > s0) + P(s1 == s0) / 2 over all pairs: the empirical AUC, by brute force."""
    a, b = np.asarray(s0)[:, None], np.asarray(s1)[None, :]
    return float(np.mean(b > a) + 0.5 * np.mean(b == a))


# ---- the ROC from the binned counts -------------------------------------------------------------

def test_auc_known_cases():
    assert _hist([0, 1, 2] * 10, [5, 6, 7] * 10).auc() == 1.0  # perfectly separated
    assert _hist([0, 1, 2] * 10, [0, 1, 2] * 10).auc() == 0.5  # identical
    assert _hist([3.0] * 50, [3.0] * 50).auc() == 0.5  # one value on both sides
    assert _hist([0, 1], [1, 2]).auc() == pytest.approx(0.875)  # 3 of 4 pairs ordered, 1 tie
    # a test that rejects low scores: the ROC is oriented by its direction
    assert _hist([5, 6, 7] * 10, [0, 1, 2] * 10, direction=-1).auc() == 1.0
    assert _hist([5, 6, 7] * 10, [0, 1, 2] * 10, direction=+1).auc() == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_binned_auc_is_the_exact_empirical_auc_for_a_score_with_few_values(seed):
    rng = np.random.default_rng(seed)
    s0, s1 = rng.binomial(20, 0.4, 3000), rng.binomial(20, 0.5, 3000)  # like a pull count
    h = _hist(s0, s1, chunks=7)
    assert h.exact and h.n0 == h.n1 == 3000
    assert h.auc() == pytest.approx(_mann_whitney_auc(s0, s1), abs=1e-12)
    fpr, tpr = h.roc()
    assert fpr[0] == tpr[0] == 0.0 and fpr[-1] == tpr[-1] == 1.0
    assert all(np.diff(fpr) >= 0) and all(np.diff(tpr) >= 0)
    # every threshold's empirical (FPR, TPR) on the raw scores is a point of the curve
    for c in np.unique(np.r_[s0, s1]):
        assert any(abs(x - np.mean(s0 > c)) < 1e-12 and abs(y - np.mean(s1 > c)) < 1e-12 for x, y in zip(fpr, tpr))


def test_continuous_scores_are_binned_compactly_and_the_tests_point_is_on_the_curve():
    rng = np.random.default_rng(3)
    s0, s1 = rng.normal(0, 1, 50_000), rng.normal(1, 1, 50_000)
    h = _hist(s0, s1, threshold=1.3, chunks=5)
    assert not h.exact and len(h.edges) <= MAX_EDGES  # a few hundred numbers, not 100,000 floats
    assert h.auc() == pytest.approx(_mann_whitney_auc(s0[:4000], s1[:4000]), abs=0.02)
    fpr, tpr = h.roc()
    assert any(abs(x - np.mean(s0 > 1.3)) < 1e-12 and abs(y - np.mean(s1 > 1.3)) < 1e-12 for x, y in zip(fpr, tpr))


def test_tpr_at_small_fpr_and_na_below_one_over_fpr():
    # side 0: 2,000 runs, 1 above 10 (FPR 5e-4) and 19 more above 5 (FPR 1e-2); side 1 has 30% above 10, 60% above 5
    s0 = np.r_[np.zeros(1980), np.full(19, 6.0), [11.0]]
    s1 = np.r_[np.zeros(800), np.full(600, 6.0), np.full(600, 11.0)]
    h = _hist(s0, s1)
    assert h.tpr_at(1e-3) == pytest.approx(0.3) and h.tpr_at(1e-2) == pytest.approx(0.6)
    small = _hist(s0[::4], s1[::4])  # 500 runs per side: FPR 1e-3 is not resolved
    assert small.tpr_at(1e-3) is None and small.tpr_at(1e-2) is not None
    assert _hist(s0, s1[:900]).tpr_at(1e-3) is None  # nor with a side of 900 runs


# ---- the typed findings and their JSON -------------------------------------------------------------

@pytest.fixture(scope="module")
def violation():
    return dpaudit.audit("mutant-first-unnoised", params={"n_arms": 2}, horizon=6, runs=1500, workers=1, seed=0)


@pytest.fixture(scope="module")
def exact_only():
    return dpaudit.audit("jdp-finite-rr-uneven", protocol="joint")  # an enumeration: no threshold test ran


def test_the_membership_attack_keeps_its_binned_fresh_scores(violation):
    mem = next(a for a in violation.attacks if a.attack == "membership")
    h = mem.scores
    assert isinstance(h, ScoreHistogram) and h.n0 == h.n1 == mem.details["n_fresh_per_side"]
    assert h.statistic == mem.witness["statistic"]
    # the counts the bound is computed from are the ROC point of the test's own threshold
    fpr, tpr = h.roc()
    n = mem.details["n_fresh_per_side"]
    point = (mem.details["false_positives"] / n, 1 - mem.details["false_negatives"] / n)
    assert any(abs(x - point[0]) < 1e-12 and abs(y - point[1]) < 1e-12 for x, y in zip(fpr, tpr))
    assert next(a for a in violation.attacks if a.attack == "likelihood").scores is None  # no threshold test


@pytest.mark.slow
def test_json_round_trip_and_json_without_scores(violation):
    d = json.loads(violation.to_json())
    assert d["format"] == "dpaudit.audit/2"  # an optional key: the same version
    back = Findings.from_dict(d)
    assert back.attacks[0].scores == violation.attacks[0].scores
    assert len(json.dumps(d["attacks"][0]["scores"])) < 20_000  # compact: no raw per-run scores
    for a in d["attacks"]:  # findings written without scores
        a.pop("scores", None)
    old = Findings.from_dict(d)
    assert all(a.scores is None for a in old.attacks)
    assert {f["id"] for f in figures(old, draw=False)}.isdisjoint({"fig-roc", "fig-scores"})
    assert "fig-roc" not in html_report(d) and "AUC" not in markdown_report(d)


# ---- the report ------------------------------------------------------------------------------------

def test_roc_figure_and_summary_when_the_membership_attack_ran(violation):
    ids = {f["id"]: f for f in figures(violation, draw=False)}
    assert {"fig-roc", "fig-scores", "fig-tradeoff"} <= set(ids)
    assert ids["fig-roc"]["shows"] == ["membership"] and "membership" in ids["fig-roc"]["caption"]
    assert "likelihood" not in ids["fig-roc"]["caption"]  # only what has a ROC
    rows = roc_summary(violation)
    assert [r["attack"] for r in rows] == ["membership"]
    assert rows[0]["auc"] == violation.attacks[0].scores.auc()
    md = markdown_report(violation)
    assert "| attack | statistic | AUC | TPR at FPR 1e-3 | TPR at FPR 1e-2 |" in md
    # the ROC sits beside the trade-off region of the claim, in the same section
    bounds = next(s for s in sections(violation) if s.id == "bounds")
    fig_ids = [b.id for b in bounds.blocks if isinstance(b, Figure)]
    assert fig_ids.index("fig-roc") == fig_ids.index("fig-tradeoff") + 1


def test_no_roc_figure_when_no_threshold_test_ran(exact_only):
    ids = {f["id"] for f in figures(exact_only, draw=False)}
    assert ids and not ids & {"fig-roc", "fig-scores", "fig-roc-beside", "fig-scores-beside"}
    assert roc_summary(exact_only) == [] and "AUC" not in markdown_report(exact_only)


def test_na_in_the_summary_table_below_one_over_fpr(violation):
    d = violation.to_dict()
    h = d["attacks"][0]["scores"]
    k = -(-500 // sum(h["counts0"]))  # 500 to 999 runs per side (the count stopped at its first look)
    h["counts0"] = [c * k for c in h["counts0"]]
    h["counts1"] = [c * k for c in h["counts1"]]
    assert 500 <= sum(h["counts0"]) < 1000
    row = roc_summary(d)[0]
    assert row["tpr_at_fpr_0.001"] is None and row["tpr_at_fpr_0.01"] is not None
    line = next(x for x in markdown_report(d).splitlines() if x.startswith("| membership | histogram |"))
    assert "| n/a |" in line


@pytest.mark.slow
def test_every_figure_text_is_at_least_10_pt(violation):
    from matplotlib.text import Text

    for sec in sections(violation):
        for b in sec.blocks:
            if isinstance(b, Figure):
                fig = draw_figure(b)
                fig.savefig(io.BytesIO(), format="png")  # lays out every tick label
                sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
                assert sizes and min(sizes) >= 10, (b.id, min(sizes))


class _Text(HTMLParser):
    """The page's visible text outside <pre> (the command line may be Python)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._pre = 0

    def handle_starttag(self, tag, attrs):
        self._pre += tag == "pre"

    def handle_endtag(self, tag):
        self._pre -= tag == "pre"

    def handle_data(self, data):
        if not self._pre:
            self.parts.append(data)


RAW = re.compile(r"\*\*|`|\{\"|\[\"|\"\s*:|\{'|\[\[")


def _raw_in_html(page: str) -> list[str]:
    p = _Text()
    p.feed(page)
    text = " ".join(p.parts)
    return [text[max(0, m.start() - 50): m.start() + 50] for m in RAW.finditer(text)]


@pytest.mark.slow
def test_no_raw_markdown_or_json_in_the_html(violation, exact_only):
    for a in (violation, exact_only):
        assert _raw_in_html(a.to_html()) == []
    # nested protocol details (a pair's description, a search's record) are plain text, not JSON
    d = violation.to_dict()
    d["threshold_search"] = {"tried": [{"horizon": 48, "better": {"gap_interval": [0.2, 0.3], "share_jump": 0.06}}],
                             "best": [{"pair": "canary round 1", "contexts": [[1.0, 0.0], [0.0, 1.0]]}]}
    d["witness"] = {**d["witness"], "pair": {"label": "x", "rounds": [1, 2]}}
    assert _raw_in_html(html_report(d)) == []
    assert RAW.search('{"gap_interval": [0.2, 0.3]}')  # the check is not vacuous


def test_two_different_pairs_never_share_a_label(violation):
    from dpaudit.protocols import PairSpec

    a = PairSpec(3, "means", means=(0.5 + 1e-9, 0.5 - 1e-9))
    b = PairSpec(3, "means", means=(0.5, 0.5))
    assert a.label() != b.label() and PairSpec(3, "means", means=(0.75, 0.25)).label().endswith("(0.75, 0.25)")
    specs = [PairSpec(j, bg, adv, m) for j in (0, 1) for bg in ("low", "high") for adv in ("none", "identity")
             for m in (None,)] + [a, b]
    assert len({s.label() for s in specs}) == len(specs)
    for stage in ("pilot", "ranked"):
        rows = [r["pair"] for r in violation.extra["search"] if r.get("stage") == stage]
        assert len(rows) == len(set(rows)), stage


@pytest.mark.slow
def test_a_violation_says_in_words_what_exceeded_what(violation):
    said = exceeded(violation)
    assert said and "membership attack's lower bound" in said[0] and "0.1-zCDP claim" in said[0]
    assert f"{violation.attacks[0].epsilon_lower:.4g}" in said[0] and "exceeds" in said[0]
    assert said[0] in html.unescape(html_report(violation)) and f"- {said[0]}" in markdown_report(violation)
    # a ledger that composes to more than the claim, in the guarantee's own words
    d = violation.to_dict()
    d["ledger"] = {**d["ledger"], "implied": "0.2-zCDP", "implied_epsilon": 2.9}
    words = exceeded(d)
    assert any("ledger, composed per round, implies 0.2-zCDP" in w and "against the 0.1-zCDP claim" in w
               for w in words)
    d["renyi_violation"] = [{"order": o, "D_alpha_lower": lo, "claimed": c} for o, lo, c in
                            ((2.0, 0.7, 0.2), (16.0, 2.9, 1.6), (32.0, 3.5, 3.2))]
    renyi = [w for w in exceeded(d) if "Rényi" in w]  # one sentence, the largest excess, however many orders
    assert renyi == ["The likelihood attack's lower bound on the Rényi divergence of order 16, D >= 2.9, exceeds the "
                     "1.6 the 0.1-zCDP claim allows at that order (and at 2 more orders)."]
    consistent = {**violation.to_dict(), "verdict": "consistent"}
    for a in consistent["attacks"]:
        a["epsilon_lower"] = 0.5
    consistent.pop("renyi_violation", None)
    assert exceeded(consistent) == []


@pytest.mark.slow
def test_markdown_figures_are_png_files_beside_it_and_linked(violation, tmp_path, monkeypatch):
    md = tmp_path / "r.md"
    paths = write_report(violation, md)
    text = md.read_text()
    pngs = [p for p in paths if p.suffix == ".png"]
    assert {p.name for p in pngs} == {f"r.{f['id']}.png" for f in figures(violation, draw=False)}
    for p in pngs:
        assert p.parent == md.parent and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert re.search(rf"!\[[^\]]+\]\({re.escape(p.name)}\)", text), p.name
    assert "in the HTML page beside this file" not in text
    # a stale figure of an earlier report of the same name goes; other files stay
    (tmp_path / "r.fig-horizon.png").write_bytes(b"old")
    (tmp_path / "notes.png").write_bytes(b"mine")
    write_report(violation, md)
    assert not (tmp_path / "r.fig-horizon.png").exists() and (tmp_path / "notes.png").exists()
    # the last figure fails to write: nothing of the new report replaces the old one
    import os

    import dpaudit.report.writing as rep

    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    real, calls = os.fdopen, []

    def failing(fd, *a, **k):
        calls.append(fd)
        if len(calls) == len(paths):
            os.close(fd)
            raise OSError(28, "No space left on device")
        return real(fd, *a, **k)

    monkeypatch.setattr(rep.os, "fdopen", failing)
    with pytest.raises(dpaudit.DPAuditError, match="No space left"):
        write_report({**violation.to_dict(), "seed": 7}, md)  # a different report
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_binned_scores_survive_looks_left_empty_by_a_tiny_sample():
    """With one fresh run per side the first look takes it all and the later looks are empty: the binned
    counts of that look are still returned."""
    import numpy as np

    from dpaudit.attacks.sampling import Stop, count_in_looks

    def chunk(side, m, cs):
        return 0, np.full(3, m, dtype=np.int64), 0

    c = count_in_looks(chunk, lambda side, m, cs: (side, m, cs), 1, tuple(np.random.SeedSequence(0).spawn(2)),
                       cells_per_run=1, stop=Stop(1e-5, 0.95, 1.0))
    assert c.n == 1 and c.binned is not None and list(c.binned[0]) == [1, 1, 1]
