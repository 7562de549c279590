"""A reviewer's report with no rough edge, rendered from typed findings built here: protocol details
as readable tables, search counts that agree, tests with no power said rather than drawn, what a consistent
verdict rests on, captions of what is drawn, readable witnesses, one Rényi box, a violation's excess, readable
histograms, the confidence split counted as the figure counts it, point estimates above the claim explained,
timed parts, and a report set checked whole and written all or nothing."""

from __future__ import annotations

import math
import os
import re

import numpy as np
import pytest

import dpaudit
from dpaudit.attacks.bounds import TestCounts as Threshold
from dpaudit.attacks.result import AuditResult, ScoreHistogram
from dpaudit.attacks.sampling import score_edges, tally
from dpaudit.report import check_report_path, draw_figure, figures, html_report, markdown_report, sections, write_report
from dpaudit.report.plots import MAX_BARS, merged_bins
from dpaudit.report.reading import banner_numbers, summary
from dpaudit.runner.findings import Exact, Findings, Part, Power


def _hist(s0, s1, threshold: float = 0.0) -> ScoreHistogram:
    """The binned fresh scores a threshold test keeps (edges as the attacks fix them)."""
    s0, s1 = np.asarray(s0, dtype=float), np.asarray(s1, dtype=float)
    edges = score_edges(s0, s1, Threshold("score", threshold, 1, False))
    (_, c0, off0), (_, c1, off1) = tally(s0, 0, edges), tally(s1, 0, edges)
    return ScoreHistogram("score", 1, tuple(edges), tuple(int(c) for c in c0), tuple(int(c) for c in c1), off0 + off1)


def _test(name: str, lower: float, fpr: float, fnr: float, n: int = 1000, conf: float = 0.975, scores=None,
          witness=None, **details) -> AuditResult:
    """A threshold test's result, as the attacks record it."""
    d = {"false_positives": round(fpr * n), "false_negatives": round(fnr * n), "n_fresh_per_side": n, "fpr": fpr,
         "fnr": fnr, "fresh_runs_used": n, "fresh_runs_planned": n, "looks": 3, "stopped_early": None,
         "tests_corrected_for": 1, **details}
    w = {"label": f"{name}'s pair", "statistic": "score", "threshold": 0.5, "reject_when": "score > threshold",
         **(witness or {})}
    return AuditResult(name, lower, 1e-5, conf, w, 4 * n, 0.5, d, scores)


def _findings(attacks=(), exact=(), parts=None, verdict="consistent", claimed=1.0, beside=(), power=None,
              witness=None, ledger=None, extra=None, protocol="table") -> Findings:
    best = max([a.epsilon_lower for a in attacks] + [e.epsilon for e in exact if e.judged], default=0.0)
    if parts is None:
        parts = tuple(Part(a.attack, "bound", f"the {a.attack} test", 0.5) for a in attacks)
    return Findings(verdict=verdict, reason=f"the reason of this {verdict} audit", policy="p", params={},
                    protocol=protocol, claim=f"{claimed:g}-DP", epsilon_claimed=claimed, epsilon_lower=best,
                    gap=claimed - best, delta=1e-5, confidence=0.95, horizon=8, seed=0,
                    witness=witness if witness is not None else ({"attack": attacks[0].attack, **attacks[0].witness}
                                                                 if attacks else None),
                    attacks=tuple(attacks), ledger=ledger, notes=(), versions={"dpaudit": "0"}, seconds=1.0,
                    exact=tuple(exact), beside=tuple(beside), power=power, parts=tuple(parts), extra=dict(extra or {}))


def _section(md: str, title: str) -> str:
    return md.split(f"## {title}")[1].split("\n## ")[0]


def _banner(md: str) -> str:
    return md.split("## What ran")[0]


#: a float written as Python writes it (what a report must never show)
LONG_FLOAT = re.compile(r"\d\.\d{7,}")
SNAKE = re.compile(r"\b[a-z]+_[a-z_]+\b")


# ---- 1. protocol details: a readable table ------------------------------------------------------------

def test_protocol_details_are_readable_tables():
    extra = {
        "threshold_search": {"separated": False, "horizon": 48,
                             "tried": [{"horizon": 48, "runs_per_gap": 32,
                                        "better": {"gap_interval": [0.5400288677788593, 0.5400299505912696],
                                                   "share_jump": 0.0390625, "best_separation": 2.7801921874276636}}],
                             "best": [{"pair": "canary round 0, background arm means (0.12766304177165438, 0.8723369582283456)",
                                       "separation": 3.43, "first_difference": None},
                                      {"pair": "canary round 0, background arm means (0.12766358317785953, 0.8723364168221405)",
                                       "separation": 3.29, "first_difference": None}]},
        "batch": 1000, "lints": [], "first_dependent_round": None, "fit_runs_per_side": 0.3333333333333333,
    }
    md = markdown_report(_findings([_test("membership", 0.5, 0.2, 0.3)], extra=extra))
    details = _section(md, "Protocol details")
    prose = details.replace("'", "")
    assert not SNAKE.search(prose), SNAKE.search(prose)  # keys in words
    assert not LONG_FLOAT.search(details), LONG_FLOAT.search(details)  # numbers to 4 (or a few more) digits
    assert "None" not in details and "first round" not in details and "lints" not in details.lower()  # absent: out
    assert "| training runs per side | 0.3333 |" in details and "| batch (users) | 1000 |" in details
    # the two pairs differ in the sixth digit: they stay apart, at the fewest digits that do it
    assert "(0.127663, 0.872337)" in details and "(0.127664, 0.872336)" in details
    assert "| 0.540029, 0.54003 |" in details  # an interval's ends, told apart
    # the check is not vacuous: the JSON keys and Python floats it rules out are in the findings
    raw = str(extra)
    assert SNAKE.search(raw) and LONG_FLOAT.search(raw) and "None" in raw


# ---- 2. the search's counts -------------------------------------------------------------------------

def test_pairs_tried_and_ranked_are_counted_the_same_way():
    rows = [{"pair": f"canary round {i}, background mid", "family": "constant background",
             "membership_selection_bound": 0.1 * i, "stage": "pilot"} for i in range(36)]
    rows += [{"pair": f"canary round {i}, background mid", "family": "constant background",
              "membership_selection_bound": 0.1 * i, "stage": "ranked"} for i in range(27, 36)]
    power = Power(36, 1000, 0.14, 5.4, 0.5)
    md = markdown_report(_findings([_test("membership", 0.5, 0.2, 0.3)], power=power, extra={"search": rows}))
    power_text, search_text = _section(md, "Power"), _section(md, "Neighbouring-pair search (ranking on small samples)")
    assert "36 neighbouring pairs tried" in power_text and "the best 9 again on larger samples" in power_text
    assert "36 candidate pairs, each ranked on pilot runs; the best 9 ranked again" in search_text
    assert "45 rows: one per pair and stage" in search_text  # the rows, said to be rows
    assert "45 candidate pairs" not in md


# ---- 3. and 4. a test with no power: said, not drawn; its part labelled "no power" -------------------------

def _blind_joint() -> Findings:
    same = np.r_[np.zeros(600), np.ones(400)]
    blind = _test("membership", 0.0, 1.0, 0.0, scores=_hist(same, same, threshold=-1.0))
    rng = np.random.default_rng(0)
    tree = _test("tree-releases", 0.41, 0.04, 0.9, scores=_hist(rng.normal(0, 1, 1000), rng.normal(0.4, 1, 1000)))
    ledger = Exact("per-round ledger", 2.891, "every release composed per round", True)
    parts = (Part("ledger", "exact", "releases composed per round", 0.2),
             Part("membership", "bound", "black-box on a_(t+1)..a_T", 1.0),
             Part("tree-releases", "bound", "gray-box: the tree nodes", 1.0))
    return _findings([blind, tree], [ledger], parts, claimed=4.0, protocol="joint",
                     power=Power(5, 1000, 0.14, 5.4, 0.0))


def test_a_test_with_no_power_is_said_not_drawn():
    f = _blind_joint()
    drawn = {x["id"]: x["shows"] for x in figures(f, draw=False)}
    for fid in ("fig-bounds", "fig-tradeoff", "fig-roc", "fig-scores"):
        assert "membership" not in drawn[fid] and "tree-releases" in drawn[fid], (fid, drawn[fid])
    for cap in (x["caption"] for x in figures(f, draw=False)):
        assert "'membership'" not in cap
    md = markdown_report(f)
    test = md.split("### membership")[1].split("\n### ")[0]
    assert "> No power: 'membership' has lower bound 0" in test and "rejects every fresh view of d" in test
    assert "AUC 0.5" in test
    # with no test of any power, no figure of the tests at all
    only = _findings([f.attacks[0]], claimed=4.0)
    assert not {x["id"] for x in figures(only, draw=False)} & {"fig-tradeoff", "fig-roc", "fig-scores"}


def test_a_part_with_no_power_is_labelled_no_power():
    f = _blind_joint()
    ran = _section(markdown_report(f), "What ran")
    row = next(x for x in ran.splitlines() if x.startswith("| membership |"))
    assert "no power (lower bound 0)" in row and "consistent" not in row
    assert "eps >= 0.41" in next(x for x in ran.splitlines() if x.startswith("| tree-releases |"))
    # a sub-audit that recorded "consistent" with every bound 0 (the local BCO plan's central part)
    central = _test("central", 0.0, 1.0, 0.0)
    sub = {"verdict": "consistent", "reason": "the point-sequence attack's lower bound eps >= 0 is within the claim",
           "epsilon_claimed": 1.0, "epsilon_lower": 0.0, "gap": 1.0, "witness": central.witness,
           "attacks": [central.to_dict()], "ledger": None, "seconds": 2.0}
    md = markdown_report(_findings([_test("channel", 0.3, 0.97, 0.01), central], extra={"central": sub},
                                   protocol="local"))
    details = _section(md, "Protocol details")
    assert "no power (every lower bound 0)" in details and "consistent" not in details and "eps >= 0" not in details


# ---- 5. what the verdict rests on ---------------------------------------------------------------------

@pytest.mark.slow
def test_every_protocols_banner_says_what_the_verdict_rests_on():
    joint = markdown_report(_blind_joint())
    assert ("'membership' shows nothing (lower bound 0: no power at this sample size), so this verdict rests on "
            "'tree-releases' (eps >= 0.41) and the exact per-round ledger (eps = 2.891).") in _banner(joint)
    assert "rests on" in html_report(_blind_joint()).split("</header>")[0]
    # local: two blind parts, the channel and the ledger carry it
    local = _findings([_test("channel", 0.3, 0.97, 0.01), _test("transcript", 0.0, 1.0, 0.0),
                       _test("central", 0.0, 1.0, 0.0)], [Exact("per-user ledger", 0.75, "composed per user")],
                      protocol="local")
    assert "'transcript' and 'central' show nothing" in _banner(markdown_report(local))
    assert "rests on 'channel' (eps >= 0.3) and the exact per-user ledger" in _banner(markdown_report(local))
    # central: the black-box attack blind, the gray-box one not
    central = _findings([_test("membership", 0.0, 0.5, 0.5), AuditResult("likelihood", 1.2, 1e-5, 0.975, {}, 100)],
                        claimed=2.0)
    assert "so this verdict rests on 'likelihood' (eps >= 1.2)" in _banner(markdown_report(central))
    # nothing blind, or a verdict that is not consistent: nothing to say
    seen = _findings([_test("membership", 0.5, 0.2, 0.3)])
    assert "rests on" not in _banner(markdown_report(seen))
    inconclusive = _findings([_test("membership", 0.0, 1.0, 0.0)], verdict="inconclusive")
    assert "rests on" not in _banner(markdown_report(inconclusive))


# ---- 6. captions describe only what is drawn ------------------------------------------------------------

def _likelihood(renyi_violation=()) -> AuditResult:
    return AuditResult("likelihood", 0.9, 1e-5, 0.975, {"label": "canary round 0"}, 1000, 0.1, {
        "renyi": {"orders": [2.0, 4.0], "estimate": [0.3, 0.6], "lower": [0.2, 0.5]}, "mean_loss_kl": 0.1,
        "max_loss": 1.0, "epsilon_point_estimate": 0.95, "renyi_violation": list(renyi_violation)})


@pytest.mark.parametrize("claimed", [[math.inf, math.inf], [0.5, 1.0]])
def test_the_renyi_caption_names_the_red_curve_only_when_it_is_drawn(claimed):
    curves = {"renyi": {"orders": [2.0, 4.0], "claimed": claimed}}
    f = _findings([_likelihood()], extra={"claim_curves": curves})
    fig = next(b for s in sections(f) for b in s.blocks if getattr(b, "id", "") == "fig-renyi")
    red = [ln for ln in draw_figure(fig).axes[0].get_lines() if ln.get_color() == "tab:red"]
    finite = all(math.isfinite(c) for c in claimed)
    assert bool(red) == finite and ("(red)" in fig.caption) == finite
    if not finite:
        assert "no claimed curve is drawn" in fig.caption


# ---- 7. readable witnesses --------------------------------------------------------------------------------

def test_witnesses_are_readable_text_never_a_repr_cut_midway():
    K, d = 20, 5
    e1, e2 = [1.0] + [0.0] * (d - 1), [0.0, 1.0] + [0.0] * (d - 2)
    pair = {"label": "context: round 0's arms all e1 vs all e2", "round": 0, "horizon": 16,
            "canary_contexts_d": [e1] * K, "canary_contexts_d_prime": [e2] * K,
            "canary_rewards_d": [0.5] * K, "canary_rewards_d_prime": [0.5] * K,
            "background": "arms 0 and 1 carry +e1 and -e1 (others the zero vector), every other round"}
    tree = _test("tree-releases", 0.41, 0.04, 0.9, witness={"pair": pair, "label": pair["label"],
                                                            "threshold": 0.39830118190779517})
    md = markdown_report(_findings([tree], protocol="joint"))
    w = _section(md, "Witness")
    assert "| pair | context: round 0's arms all e1 vs all e2 |" in w and "| canary round | 0 |" in w
    assert "| canary's contexts in d | every arm e1 |" in w and "| canary's contexts in d' | every arm e2 |" in w
    assert "| canary's rewards in d | every arm 0.5 |" in w and "| threshold | 0.3983 |" in w
    assert "((" not in w and " ..." not in w and "[" not in w and not LONG_FLOAT.search(w)
    # contexts that differ by arm: grouped, short
    mixed = dict(pair, canary_contexts_d=[e1, [-1.0] + [0.0] * (d - 1)] + [[0.0] * d] * (K - 2))
    w2 = _section(markdown_report(_findings([_test("t", 0.4, 0.1, 0.5, witness={"pair": mixed})])), "Witness")
    assert "| canary's contexts in d | arm 0: e1; arm 1: -e1; arms 2-19: 0 |" in w2
    # an exact enumeration's witness: one line
    ex = Exact("joint enumeration", 1.9, "enumerated", True,
               {"label": "round 1: ('x1', 1, 0.0) vs ('x1', 1, 1.0)", "value": 1.9, "round": 1, "history": [],
                "canary": ["x1", 1, 0.0], "neighbour": ["x1", 1, 1.0], "future_contexts": ["x0", "x0"],
                "future_rewards": [[0.0, 0.0]], "event": [[0, 0], [0, 1]], "p_event": 0.875, "q_event": 0.125})
    exact = _section(markdown_report(_findings([], [ex], parts=(), protocol="joint")), "Exact figures")
    assert ("round 1: (x1, arm 1, reward 0) vs (x1, arm 1, reward 1), after no history; future contexts x0, x0; "
            "future rewards (0, 0); event: the actions after it in {(0, 0), (0, 1)}, probability 0.875 on d vs 0.125 "
            "on d'") in exact and "('x1'" not in exact


# ---- 8. one box for every Rényi order ---------------------------------------------------------------------

def test_one_renyi_box_for_every_order():
    rvs = [{"order": o, "D_alpha_lower": 0.4 * o, "claimed": 0.1 * o} for o in (1.5, 2.0, 4.0, 8.0, 16.0, 32.0)]
    md = markdown_report(_findings([_likelihood(rvs)], verdict="violation"))
    test = md.split("### likelihood")[1].split("\n## ")[0]
    assert test.count("Rényi violation") == 1 and "> Rényi violation at 6 orders" in test
    assert "> | order alpha | D_alpha lower bound | claimed D_alpha | exceeds the claim by |" in test
    assert "> | 32 | 12.8 | 3.2 | 9.6 |" in test
    page = html_report(_findings([_likelihood(rvs)], verdict="violation"))
    assert page.count("Rényi violation") == 1 and page.count("<div class='note'>") == 1


# ---- 9. a violation's excess, never a negative gap ----------------------------------------------------------

def test_a_violation_says_by_how_much_never_a_negative_gap():
    f = _findings([_test("membership", 7.17, 0.0, 0.3)], verdict="violation", claimed=1.914)
    nums = {k: v for k, v, _ in banner_numbers(summary(f))}
    assert nums["exceeds the claim by"] == "5.256" and "gap" not in nums
    md = markdown_report(f)
    assert "-5.256" not in md and "| exceeds the claim by |" in _banner(md)
    assert "5.256" in html_report(f).split("</header>")[0]
    assert "gap" in {k for k, _, _ in banner_numbers(summary(_findings([_test("m", 0.5, 0.2, 0.3)])))}
    sub = {"verdict": "violation", "epsilon_claimed": 1.0, "epsilon_lower": 3.5, "gap": -2.5, "attacks": []}
    details = _section(markdown_report(_findings([_test("channel", 0.3, 0.9, 0.01)], extra={"central": sub})),
                       "Protocol details")
    assert "| exceeds the claim by | 2.5 |" in details and "-2.5" not in details


# ---- 10. histograms with a readable number of bins ----------------------------------------------------------

def test_histograms_merge_the_tests_bins_exactly_into_at_most_40():
    rng = np.random.default_rng(1)
    s0, s1 = rng.normal(0, 1, 5000), rng.normal(0.7, 1.3, 5000)
    h = _hist(s0, s1)
    assert len(h.edges) > 200  # the test's own bins: a few hundred
    edges, m0, m1 = merged_bins(h)
    assert len(edges) - 1 <= MAX_BARS and set(edges) <= set(h.edges)  # a subset of the fixed edges
    assert m0.sum() == h.n0 and m1.sum() == h.n1
    cells = np.r_[-np.inf, edges, np.inf]
    for s, m in ((s0, m0), (s1, m1)):  # each bar counts exactly the raw scores in its cell (lo, hi]
        direct = [np.count_nonzero((s > lo) & (s <= hi)) for lo, hi in zip(cells[:-1], cells[1:])]
        assert list(m.astype(int)) == direct
    f = _findings([_test("membership", 0.5, 0.2, 0.3, scores=h)])
    fig = next(b for s in sections(f) for b in s.blocks if getattr(b, "id", "") == "fig-scores")
    stairs = [p for p in draw_figure(fig).axes[0].patches if type(p).__name__ == "StepPatch"]
    assert stairs and all(len(p.get_data().values) <= MAX_BARS + 2 for p in stairs)
    assert f"at most {MAX_BARS}" in fig.caption


# ---- 11. the confidence split counts what the figure draws -------------------------------------------------

def test_the_confidence_split_names_every_row_of_the_bounds_figure():
    sub = {"conf": 0.9917}
    attacks = [_test("channel", 0.99, 0.27, 0.27, conf=0.9833), _test("transcript", 0.95, 0.26, 0.27, conf=0.9833),
               _test("central membership", 0.95, 0.18, 0.48, **sub),
               AuditResult("central likelihood", 0.99, 1e-5, 0.9917, {}, 100)]
    exact = [Exact("per-user ledger", 1.0, "pure messages"), Exact("finite channel", 1.0, "exact eps(delta)")]
    parts = (Part("ledger", "exact", "messages composed per user"), Part("channel", "bound", "the channel"),
             Part("finite channel", "exact", "the table"), Part("transcript", "bound", "the transcript"),
             Part("central", "bound", "the central audit"))
    f = _findings(attacks, exact, parts, protocol="local", extra={"confidence_per_attack": 0.9833})
    lead = _section(markdown_report(f), "Lower bounds of the verdict").strip().split("\n\n")[0]
    assert "split equally over the 3 parts whose bounds enter the verdict ('channel', 'transcript' and 'central'" in lead
    assert "'central' splits its share between 'central membership' and 'central likelihood' (0.9917 each)" in lead
    assert "('per-user ledger' and 'finite channel') carry no sampling error and take no share" in lead
    rows = next(x["shows"] for x in figures(f, draw=False) if x["id"] == "fig-bounds")
    assert len(rows) == 6 and all(f"'{r}'" in lead for r in rows)  # every row of the figure, named in the text
    assert summary(f)["parts_judged"] == 3


# ---- 12. point estimates above the claim -------------------------------------------------------------------

def test_point_estimates_above_the_claim_are_explained():
    f = _findings([_test("channel", 0.97, 0.268, 0.2686), _test("transcript", 0.9, 0.3, 0.35)])
    # the channel's rates, without their confidence margins (the better of the two orientations)
    point = max(math.log((1 - 1e-5 - 0.268) / 0.2686), math.log((1 - 1e-5 - 0.2686) / 0.268))
    assert point > 1 > math.log((1 - 1e-5 - 0.3) / 0.35)
    bounds = _section(markdown_report(f), "Lower bounds of the verdict")
    said = [x for x in bounds.split("\n\n") if "point estimate" in x and "not a bound" in x]
    assert len(said) == 1 and f"'channel' ({point:.4g})" in said[0] and "transcript" not in said[0]
    assert "lower bound at the stated confidence" in said[0]
    below = _findings([_test("transcript", 0.9, 0.3, 0.35)])
    assert "not a bound" not in markdown_report(below)


# ---- 13. what ran, with its time -------------------------------------------------------------------------

def test_parts_show_their_time_or_a_dash_never_zero():
    parts = (Part("threshold search", "setup", "8 pairs", 1.234), Part("horizon", "setup", "T = 48"),
             Part("membership", "bound", "the test", 0.5))
    ran = _section(markdown_report(_findings([_test("membership", 0.5, 0.2, 0.3)], parts=parts)), "What ran")
    rows = {x.split(" | ")[0][2:]: x.rstrip(" |").split(" | ")[-1] for x in ran.splitlines() if x.startswith("| ")}
    assert rows["threshold search"] == "1.23" and rows["horizon"] == "—" and rows["membership"] == "0.5"


# ---- 14. the report set: checked whole before the audit, written all or nothing --------------------------------

def test_a_taken_figure_path_is_refused_before_the_audit(tmp_path, capsys, monkeypatch):
    (tmp_path / "r.fig-scores-beside.png").mkdir()  # the longest figure name a report can have
    with pytest.raises(dpaudit.DPAuditError, match=r"fig-scores-beside\.png.*folder"):
        check_report_path(tmp_path / "r.md")
    from dpaudit.cli import main

    import dpaudit.runner as runner

    called = []
    monkeypatch.setattr(runner, "run", lambda *a, **k: called.append(1))
    assert main(["check", "policy", "adac-ucb", "--report", str(tmp_path / "r.md")]) == 2 and not called
    assert "fig-scores-beside.png" in capsys.readouterr().err


@pytest.mark.slow
def test_the_report_set_is_written_all_or_nothing(tmp_path, monkeypatch):
    import dpaudit.report.writing as writing

    f = _blind_joint()
    md = tmp_path / "r.md"
    first = write_report(f, md)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert len(first) >= 6 and set(before) == {p.name for p in first}
    changed = _findings(list(f.attacks), list(f.exact), f.parts, claimed=4.0, protocol="joint",
                        extra={"notes_for_the_test": "a different report"})
    real, calls = os.replace, []

    def failing(src, dst, *a, **k):  # the fourth file's rename fails (a folder slipped in, a disk gone)
        calls.append(dst)
        if len(calls) == 4:
            raise IsADirectoryError(21, "Is a directory", str(dst))
        return real(src, dst, *a, **k)

    monkeypatch.setattr(writing.os, "replace", failing)
    with pytest.raises(dpaudit.DPAuditError, match="nothing of the report was written"):
        write_report(changed, md)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # every file as it was, nothing left over
    # a fresh folder: a failed set leaves no file at all
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    calls.clear()
    monkeypatch.setattr(writing.os, "replace", failing)
    with pytest.raises(dpaudit.DPAuditError):
        write_report(f, fresh / "r.md")
    assert list(fresh.iterdir()) == []


def test_each_ledger_part_shows_its_own_figure_and_the_banner_the_lower_bounds_source():
    """A joint audit flagged by its long-horizon ledger: each ledger part's row shows its own exact figure (not
    the other's, though both end in 'ledger'), and the banner's lower bound names the attack that gave it, the
    witness being the exact figure the violation rests on."""
    lik = _test("tree-likelihood", 1.41, 0.3, 0.1)
    exact = (Exact("per-round ledger", 3.556, "every release composed per round"),
             Exact("long-horizon ledger", 4.923, "the policy built for T = 768"))
    parts = (Part("ledger", "exact", "67 releases composed per round", 0.5),
             Part("long-horizon ledger", "exact", "8 runs at T = 768", 1.5),
             Part("tree-likelihood", "bound", "gray box", 5.0))
    f = _findings([lik], exact, parts, verdict="violation", claimed=4.0,
                  witness={"attack": "long-horizon ledger"})
    f = type(f)(**{**f.__dict__, "epsilon_lower": 1.41, "gap": 4.0 - 1.41})
    ran = _section(markdown_report(f), "What ran")
    assert "eps = 3.556 (exact)" in next(x for x in ran.splitlines() if x.startswith("| ledger |"))
    assert "eps = 4.923 (exact)" in next(x for x in ran.splitlines() if x.startswith("| long-horizon ledger |"))
    s = summary(f)
    assert s["best_attack"] == "tree-likelihood" and not s["best_is_exact"]
