"""The report's sections, in order (:data:`SECTIONS`): each builder reads the findings and returns a
:class:`~dpaudit.report.blocks.Section` (or None when it has nothing to say); :func:`sections` lists them and
:func:`figures` lists their figures. The sections, in order:

* the parts that ran (``parts``: each with what it found, its bound, "no power" for a bound of 0, or its
  exact figure, and its time, a dash where none was recorded), the claim with the upper side beside it (the
  bracket [lower, upper], a claim looser than what dpaudit proves, the assumptions), and the ledger, rendered by its
  kind: per user (local), per round (table, view, interactive) or per round in a tree (joint, where every
  round feeds one node per tree level by design, so its usage figure says what the counts mean instead of
  raising an alarm);
* the exact figures (judged by the verdict or reported), each lower bound of the verdict with its test
  (threshold, FPR/FNR, counts, corrections; a test with no power said in a sentence instead of drawn; every
  Rényi order a bound exceeds in one box), how the confidence is split (every row of the bounds figure
  named: the parts, a part's own split, the exact figures that take no share), point estimates above the
  claim explained, the bounds reported beside the verdict in their own section;
* the power, the protocol's own details as readable tables (keys in words, numbers to 4 significant digits,
  absent values left out: a local audit's channel, lints and central sub-audit; the exact joint enumeration
  by view; anything a protocol adds), the neighbouring-pair search (pairs on the pilot and ranked again,
  counted as the power counts them; every ranking folded), leakage against the horizon, the witness (a
  pair's label and round, contexts as short vectors), the notes;
* how to reproduce (command, seed, parameters, versions as a table) and the verdict again.

The verdict banner above them is written by each writer (:mod:`dpaudit.report.markdown`,
:mod:`dpaudit.report.html`) from :func:`dpaudit.report.reading.banner_numbers` and
:func:`dpaudit.report.reading.rests_on`.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Callable, Mapping

from dpaudit.jsontypes import JSONMapping, JSONObject, JSONValue

from dpaudit.report.blocks import (Block, Box, Code, Figure, Fold, Para, Section, Sub, Table, data_blocks, kv_table,
                                   records_table, walk_blocks)
from dpaudit.report.plots import (fig_bounds, fig_horizon, fig_ledger, fig_profile, fig_renyi, fig_roc, fig_scores,
                                  fig_tradeoff, png_base64, roc_auc, roc_table)
from dpaudit.report.reading import (FindingsLike, Verbatim, as_float, cell, contexts_text, findings_dict, fmt,
                                    is_threshold_test,
                                    label, label_digits, ledger_kind, no_power, no_power_sentence, number,
                                    part_result, point_estimate, points_above_claim, quoted_list, renyi_zero_notes,
                                    summary, tidy_text, upper_reading, upper_sentences, verdict_parts)

#: what each part's kind means, in the table of the parts that ran
_ROLES = {"bound": "lower bound (enters the verdict)", "exact": "exact figure (no sampling)",
          "beside": "reported beside the verdict", "setup": "setup"}


def _core_keys() -> set[str]:
    from dpaudit.runner.findings import Findings

    return {f.name for f in fields(Findings)} | {"format"}


def _c(x: object) -> str:
    """Inline code (plain text if it holds a backtick)."""
    s = str(x)
    return s if "`" in s else f"`{s}`"


def _seconds(v: object) -> str:
    """A part's time: a dash where the findings record none (a part that is not timed on its own)."""
    x = as_float(v)
    return "—" if not x > 0 else fmt(x, 3)


def _parts_section(out: JSONObject) -> Section:
    parts = out.get("parts") or []
    if not parts:
        return Section("parts", "What ran", (Para("No part of the audit finished." if out["verdict"] == "interrupted"
                                                   else "The findings record no part."),))
    lead = ("These parts finished before the interruption; the others did not run."
            if out["verdict"] == "interrupted" else "Every part of this audit, in the order it ran.")
    lead += (" What each found is its bound at its confidence (a part with lower bound 0 had no power: it shows "
             "nothing about the claim) or its exact figure; a dash in the time column: not timed on its own.")
    rows = tuple((p["name"], _ROLES.get(p["kind"], p["kind"]), p["summary"], part_result(p, out) or "—",
                  _seconds(p.get("seconds"))) for p in verdict_parts(out)[:len(parts)])
    return Section("parts", "What ran", (Para(lead), Table(("part", "role", "what it did", "what it found", "time (s)"),
                                                           rows, frozenset({4}))))


def _claim_section(out: JSONObject) -> Section:
    if out.get("epsilon_claimed") is None:
        return Section("claim", "The claim", (Para("The policy states no claim, so there is nothing to judge; the "
                                                   "exact figures below stand alone."),))
    text = (f"The policy declares **{out['claim']}**. At delta = {fmt(out['delta'])} this is eps = "
            f"**{as_float(out['epsilon_claimed']):.6g}** ({out.get('claim_method') or 'conversion not recorded'}).")
    return Section("claim", "The claim", (Para(text),) + _upper_blocks(out))


def _upper_blocks(out: JSONObject) -> tuple[Block, ...]:
    """The upper side beside the claim: the bracket [lower, upper], a claim looser than what dpaudit proves, the
    assumptions the proof rests on (or why there is none, or why the figure is no proof)."""
    said = upper_sentences(out)
    if not said:
        return ()
    u = upper_reading(out) or {}
    blocks: list[Block] = [Para(" ".join(said), note=bool(u.get("refuted")))]
    if u.get("assumptions") and not u.get("refuted"):
        blocks.append(Fold("What the upper bound assumes", (Table(("assumption",), tuple((a,) for a in u["assumptions"])),)))
    return tuple(blocks)


_LEDGER_LABELS = {
    "per-user": [("users", "users"), ("messages", "messages recorded"), ("max_messages_per_user", "most per user"),
                 ("kinds", "kinds of message"), ("pure_epsilon", "pure eps per message"), ("mu", "Gaussian mu per user"),
                 ("min_recorded_sensitivity", "smallest recorded sensitivity"), ("epsilon", "eps per user (exact)"),
                 ("method", "how it was composed")],
    "per-round": [("runs", "runs"), ("releases", "batched releases"), ("max_releases_per_round", "most releases a round fed"),
                  ("shared_rounds", "(run, round) pairs that fed more than one release"),
                  ("releases_without_fed", "releases without a record of the rounds that fed them"),
                  ("implied", "guarantee implied, composed per round"), ("implied_epsilon", "its eps at the audit's delta")],
}


def _ledger_section(out: JSONObject) -> Section:
    led = out.get("ledger")
    kind = ledger_kind(led)
    ran = any(p["name"] == "ledger" for p in out.get("parts") or [])
    judged = [e for e in out.get("exact") or [] if "ledger" in e["part"]]
    if kind is None:
        text = ("The policy keeps no ledger (it does not record its releases through dpaudit's mechanisms), so the "
                "attacks alone judge it." if ran else "No ledger part ran in this audit (this protocol's plan reads "
                "no ledger), so no per-round or per-user composition is reported.")
        return Section("ledger", "Ledger", (Para(text),))
    role = ("The verdict judges this exact figure (a figure above the claim proves the claim too low)."
            if judged and judged[0].get("judged", True) else
            "It is reported beside the verdict; the verdict does not judge it.")
    if kind == "per-user":
        title = "Ledger: per user"
        if led.get("epsilon") is None:
            text = "No message was recorded in the ledger (the channel does not use dpaudit.mechanisms)."
        else:
            text = (f"Every message a user sent, composed per user: {led.get('users')} users sent "
                    f"{led.get('messages')} messages (at most {led.get('max_messages_per_user')} each), giving the "
                    f"exact per-user eps = **{fmt(led['epsilon'])}** ({led.get('method')}). {role}")
        labels = _LEDGER_LABELS["per-user"]
    else:
        title = "Ledger: per round, a tree" if kind == "tree" else "Ledger: per round"
        usage = ("In a tree ledger (continual release) every round's data feeds one node per tree level by design, so "
                 f"a round feeding several releases (here at most {led.get('max_releases_per_round')}) is the "
                 "mechanism, not reuse; the per-round composition prices all of them."
                 if kind == "tree" else
                 (f"{led['shared_rounds']} (run, round) pairs fed more than one release (at most "
                  f"{led.get('max_releases_per_round')} per round): such a round's data was used more than once, so "
                  "its guarantees compose." if led.get("shared_rounds") else "No round fed more than one release."))
        text = (f"Over {led.get('runs', 'the')} runs the policy made {led.get('releases')} batched releases; composed "
                f"per round (every release each round fed) they imply **{fmt(led.get('implied'))}** (eps = "
                f"{fmt(led.get('implied_epsilon'))} at the same delta). {usage} {role}")
        if as_float(led.get("releases_without_fed")) > 0:
            text += f" {led['releases_without_fed']} releases carry no record of the rounds that fed them."
        labels = _LEDGER_LABELS["per-round"]
    known = {k for k, _ in labels} | {"kind", "tree", "usage_max_per_round", "usage_mean_per_round"}
    rows = [(label, led[k]) for k, label in labels if k in led]
    rows += [(label(k), v) for k, v in led.items() if k not in known and v is not None]  # anything a ledger adds
    fig = fig_ledger(out)
    return Section("ledger", title, (Para(text), kv_table(rows)) + ((fig,) if fig else ()))


def _exact_section(out: JSONObject) -> Section | None:
    exact = out.get("exact") or []
    if not exact:
        return None
    claimed = out.get("epsilon_claimed")
    rows = tuple((e["part"], e["epsilon"], claimed if e.get("claimed") is None else e["claimed"],
                  "judged by the verdict" if e.get("judged", True) else "reported", e["method"]) for e in exact)
    blocks: list[Block] = [
        Para("Figures computed exactly, without sampling (a ledger composed per round or per user, a finite channel, "
             "an enumeration). A judged figure above the claim it is compared with is a violation."),
        Table(("part", "eps", "compared with", "role", "method"), rows, frozenset({1, 2}))]
    for e in exact:
        w = dict(e.get("witness") or {})
        extra = []
        if "canary" in w and "neighbour" in w:  # an enumeration's witness: one readable line
            extra.append(("witness", cell(w)))
        else:
            extra += [(f"witness: {label(k)}", v) for k, v in w.items() if v is not None]
        for k, v in (e.get("details") or {}).items():
            if k == "renyi" and isinstance(v, Mapping) and "value" in v:
                extra += [(f"Rényi divergence at order {number(o)}", x) for o, x in zip(v["orders"], v["value"])]
            elif k == "delta_at_epsilon" and isinstance(v, Mapping):
                extra.append((f"delta at eps = {number(as_float(v.get('epsilon')))}", v.get("delta")))
            elif v is not None:
                extra.append((label(k), v))
        if extra:
            blocks.append(Sub(f"{e['part']} (exact)", (kv_table(extra, ("field", "value")),)))
    if not out.get("attacks"):  # no sampling: the figures against the claim show the exact figures
        blocks[2:2] = _claim_figures(out)
    return Section("exact", "Exact figures", tuple(blocks))


#: what a test's ``stopped_early`` says, in words
_STOPPED = {None: "no", "futile": "yes: its counts could no longer reach the claim",
            "violation": "yes: its bound already exceeded the claim"}


#: a candidate's key and the key of the same value in its attack's details or witness
_ALIAS = {"n": "n_fresh_per_side", "score": "statistic", "fp": "false_positives", "fn": "false_negatives"}


def _same(x: object, y: object) -> bool:
    if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
        return math.isclose(float(x), float(y), rel_tol=1e-12, abs_tol=0.0) or x == y
    return x == y and x is not None


def _test_blocks(a: JSONMapping, digits: int = 6) -> list[Block]:
    """One bound with its test: the pair, the statistic and threshold, the counts, the corrections;
    a likelihood attack's Rényi table (and one box for every order whose bound exceeds the claim's);
    any other number the attack recorded, in words."""
    d, w = dict(a.get("details") or {}), dict(a.get("witness") or {})
    blocks: list[Block] = []
    if w.get("label"):
        blocks.append(Para(f"{'Canaries' if a.get('attack') == 'one-run' else 'Pair'}: "
                           f"{tidy_text(str(w['label']), digits)}."))
    if is_threshold_test(a):
        sel = d.pop("selection_bound", None)
        blocks.append(Para(
            f"Test: reject d when {_c(w.get('statistic', 'the score'))} {w.get('reject_when', '')} (threshold "
            f"{fmt(w.get('threshold'))}), chosen on a separate selection split"
            + (f" (selection bound {fmt(sel)})" if sel is not None else "") + f". On {d.pop('n_fresh_per_side')} fresh "
            f"views per side: {d.pop('false_positives')} false positives (FPR {fmt(d.pop('fpr'))}), "
            f"{d.pop('false_negatives')} false negatives (FNR {fmt(d.pop('fnr'))}); Clopper-Pearson bounds at "
            f"{fmt(a['confidence'])} confidence, corrected for {d.pop('tests_corrected_for', 1)} test(s)."))
        if no_power(a):
            blocks.append(Para(no_power_sentence(a, roc_auc(a)), note=True))
    if "renyi" in d:
        r = d.pop("renyi")
        blocks.append(Para(
            f"Exact privacy loss of {a['samples']} runs from the ledger: mean loss (KL) {fmt(d.pop('mean_loss_kl', None))}, "
            f"largest {fmt(d.pop('max_loss', None))}; point estimate of eps(delta) "
            f"{fmt(d.pop('epsilon_point_estimate', None))}; tests corrected for: {d.pop('tests_corrected_for', 'n/a')}."))
        os_ = d.pop("order_statistic", None)
        if isinstance(os_, dict) and os_.get("rank") is not None:
            blocks.append(Para(
                f"The eps bound is the value of rank {os_['rank']} from the top of L + log(1 - U) over the runs (U uniform): the "
                f"largest eps whose Clopper-Pearson lower bound on delta(eps) exceeds delta, at error "
                f"{fmt(os_.get('alpha'))} for every eps at once (no grid); the Rényi orders share the rest of the "
                f"error budget ({fmt(r.get('alpha_each'))} each)."))
        if "lower" in r:
            blocks.append(Table(("order alpha", "D_alpha estimate", "D_alpha lower bound"),
                                tuple(zip(r["orders"], r["estimate"], r["lower"])), frozenset({0, 1, 2})))
        rvs = d.pop("renyi_violation", None) or []
        if rvs:  # one box for every order, not one per order
            n = len(rvs)
            blocks.append(Box(
                f"Rényi violation at {n} order{'s' if n > 1 else ''}: the lower bound on D_alpha exceeds what the claim "
                f"allows at {'each' if n > 1 else 'that'} order.",
                (Table(("order alpha", "D_alpha lower bound", "claimed D_alpha", "exceeds the claim by"),
                       tuple((rv["order"], rv["D_alpha_lower"], rv["claimed"],
                              as_float(rv["D_alpha_lower"]) - as_float(rv["claimed"])) for rv in rvs),
                       frozenset({0, 1, 2, 3})),)))
        blocks += [Para(n, note=True) for n in renyi_zero_notes({"attacks": [a]})]
    d.pop("profile", None)  # drawn in the privacy-profile figure
    lists = {k: v for k, v in d.items() if isinstance(v, list) and v and all(isinstance(r, Mapping) for r in v)}
    rest = [(label(k), _STOPPED.get(v, v) if k == "stopped_early" else v) for k, v in d.items()
            if k not in lists and (v is not None or k == "stopped_early")]
    if rest:
        blocks.append(kv_table(rest, ("detail", "value")))
    said = {**(a.get("details") or {}), **w}
    for k, v in lists.items():
        # a column that repeats, in every row, what the test's own lines above say is left out
        same = {c for c in v[0] if all(_same(r.get(c), said.get(_ALIAS.get(c, c))) for r in v)}
        blocks.append(Fold(f"{a['attack']}: {label(k)} ({len(v)} candidates, each evaluated on the same fresh samples)",
                           (records_table([{c: x for c, x in r.items() if c not in same} for r in v]),)))
    return blocks


def _bound_table(results: list[JSONMapping]) -> Table:
    return Table(("attack", "eps lower bound", "point estimate", "delta", "confidence", "samples", "time (s)"),
                 tuple((a["attack"], a["epsilon_lower"], point_estimate(a), a["delta"], a["confidence"], a["samples"],
                        fmt(as_float(a.get("seconds")), 3)) for a in results), frozenset(range(1, 7)))


def _claim_figures(out: JSONObject) -> list[Figure]:
    return [f for f in (fig_bounds(out), fig_profile(out), fig_renyi(out), fig_tradeoff(out), fig_roc(out),
                        fig_scores(out)) if f]


def _bounds_section(out: JSONObject) -> Section | None:
    attacks = out.get("attacks") or []
    if not attacks:
        return None
    s = summary(out)
    parts = [p for p in verdict_parts(out) if p.get("kind") == "bound" and p["attacks"]]
    n = len(parts)
    text = f"Overall confidence {fmt(out['confidence'])}"
    if s["confidence_per_part"] is not None and n > 1:
        text += (f", split equally over the {n} parts whose bounds enter the verdict ({quoted_list([p['name'] for p in parts])};"
                 f" {fmt(s['confidence_per_part'])} each)")
    for p in parts:
        if len(p["attacks"]) > 1:
            text += (f"; '{p['name']}' splits its share between {quoted_list([a['attack'] for a in p['attacks']])} "
                     f"({fmt(p['attacks'][0].get('confidence'))} each)")
    text += "; each attack corrects for every test it evaluates on fresh samples."
    judged = [e["part"] for e in out.get("exact") or [] if e.get("judged", True)]
    if judged:
        text += (f" The exact figure{'s' if len(judged) > 1 else ''} the verdict judges ({quoted_list(judged)}) "
                 + ("carry no sampling error and take" if len(judged) > 1 else "carries no sampling error and takes")
                 + " no share of the confidence.")
    blind = [a["attack"] for a in attacks if no_power(a)]
    if blind:
        text += (f" {quoted_list(blind)} had no power (lower bound 0) and no figure draws "
                 f"{'it' if len(blind) == 1 else 'them'}; {'its' if len(blind) == 1 else 'each'} test is below.")
    roc = roc_table(out)
    blocks: list[Block] = [Para(text), *_claim_figures(out), _bound_table(attacks)]
    above = points_above_claim(out)
    if above:
        blocks.append(Para(above))
    if roc is not None:
        blocks += [Para("The ROC of each threshold test on its fresh samples: its AUC and its true-positive rate at a "
                        "false-positive rate of 1e-3 and 1e-2 (n/a when a side has fewer fresh runs than 1 / FPR)."),
                   roc]
    blocks += [Sub(a["attack"], tuple(_test_blocks(a, label_digits(out)))) for a in attacks]
    return Section("bounds", "Lower bounds of the verdict", tuple(blocks))


def _beside_section(out: JSONObject) -> Section | None:
    beside = out.get("beside") or []
    if not beside:
        return None
    why = [f"{p['name']}: {p['summary']}" for p in out.get("parts") or [] if p.get("kind") == "beside"]
    blocks: list[Block] = [Para("These bounds are measured on a view the claim does not promise to hide; they are "
                              "reported for information and do **not** enter the verdict, whatever their size."
                              + (" " + "; ".join(why) + "." if why else "")), _bound_table(beside)]
    blocks += [b for b in (fig_roc(out, True), fig_scores(out, True), roc_table(out, True)) if b is not None]
    for a in beside:
        blocks.append(Sub(f"{a['attack']} (beside the verdict)", tuple(_test_blocks(a, label_digits(out)))))
    return Section("beside", "Bounds beside the verdict (not judged)", tuple(blocks))


def _search_counts(out: JSONMapping) -> tuple[int, int]:
    """(pairs ranked on the pilot, pairs ranked again on larger samples) in the search's rows; with no
    pilot stage every pair was ranked once, on the full ranking sizes: (0, pairs)."""
    rows = out.get("search") or []
    return (sum(1 for r in rows if r.get("stage") == "pilot"), sum(1 for r in rows if r.get("stage") != "pilot"))


def _power_section(out: JSONObject) -> Section | None:
    pw = out.get("power")
    if not pw:
        return None
    if (pw.get("details") or {}).get("method") == "one-run":  # its power is the cap of its guesses
        return Section("power", "Power", (Para(pw.get("note") or ""),))
    used = pw.get("fresh_runs_used")
    pilot, ranked = _search_counts(out)
    searched = ""
    if pilot or ranked:
        searched = (f" (each ranked on pilot runs, the best {ranked} again on larger samples: the search below)" if pilot
                    else " (each ranked on small samples: the search below)")
    text = (f"{pw.get('pairs_tried')} neighbouring pairs tried{searched}; with {pw.get('fresh_runs_per_side')} fresh "
            f"runs per side the black-box attack can show eps from {fmt(pw.get('smallest_detectable'))} up to "
            f"{fmt(pw.get('largest_bound'))}" + (f"; it showed eps >= {fmt(pw['shown'])}" if pw.get("shown") is not None
                                                  else "")
            + (f" after {used} of them (it stopped once settled; see below)." if used is not None else "."))
    if pw.get("shown") is not None and not as_float(pw["shown"]) > 0:
        text += " It had no power here: its bound is 0, so it shows nothing about the claim."
    blocks: list[Block] = [Para(text)]
    if pw.get("note"):
        blocks.append(Para(pw["note"], note=True))
    if pw.get("details"):
        blocks += data_blocks(pw["details"])
    return Section("power", "Power", tuple(blocks))


def _one_run_section(out: JSONObject) -> Section | None:
    """A one-run audit (``--method one-run``): its canaries, the pilot's choice, the count, and what it can and
    cannot show beside the multi-run audit."""
    o = out.get("one_run")
    if not isinstance(o, Mapping):
        return None
    tried = o.get("layouts_tried") or []
    if len(tried) > 1:
        pilots = (f"{o['runs']} runs: {len(tried)} pilots, one per canary layout ("
                  + "; ".join(f"{t['layout']} with {t['n_arms']} arms, {t['canaries_per_run']} canaries, predicted bound "
                              f"{fmt(t['predicted_cautious'])}" for t in tried)
                  + f"; the counted runs take the larger), {o['counted_runs']} counted")
    else:
        pilots = f"{o['runs']} runs: run 0 the pilot, {o['counted_runs']} counted"
    text = (f"{pilots}; {o['canaries_per_run']} canaries per run "
            f"({o['layout']}), each canary's bit drawn uniformly from the audit's seed. The pilot chose the guesses: "
            f"{o['rule']}. On the counted runs {o['correct']} of {o['guesses']} guesses were right, so by "
            f"{o['analysis_text']} eps >= **{fmt(o['bound'])}** at confidence {fmt(out.get('confidence'))} (the most "
            f"these guesses can show: {fmt(o['cap'])}).")
    if o.get("steinke_beside") is not None:
        text += f" Steinke et al.'s bound at the audit's delta, for comparison (not judged): {fmt(o['steinke_beside'])}."
    blocks: list[Block] = [Para(text),
                         Para(f"It can show {o['can_show']}. It cannot show {o['cannot_show']}.", note=True)]
    if o.get("candidates"):
        blocks.append(Fold("the pilot's best guess rules (predicted bound on the counted canaries)",
                           (records_table(list(o["candidates"])),)))
    return Section("one-run", "One-run audit: what it can and cannot show", tuple(blocks))


#: extra keys another section renders (or that only the reproduction table shows)
_SHOWN_ELSEWHERE = {"claim_curves", "search", "search_summary", "leakage_vs_horizon", "renyi_violation", "workers",
                    "estimate", "checkpoint", "report", "n_arms", "action_space", "horizon_reason",
                    "confidence_per_attack", "one_run", "method"}
#: how a protocol's own details are titled (anything else: its key in words)
_DETAIL_TITLES = {
    "channel": "local channel", "lints": "Calibration lints of the channel",
    "central": "Central sub-audit (the same policy under Table DP)",
    "exact_joint": "Exact enumeration by view (history, data, central)", "at": "Where the enumeration was read",
    "sizes": "Size of the enumeration", "claim_point": "The claim's own point", "central_exact": "Central view, exact",
    "threshold_search": "Threshold search of the membership attack", "horizon_search": "How the horizon was found",
    "horizon_sweep": "Horizon sweep of the best pairs",
}


def _named_not_repeated(v: JSONValue, out: JSONObject) -> JSONValue:
    """A sub-audit whose ``attacks`` are the same results as bounds of this report (a local audit's central
    part) names them instead of repeating them."""
    if not (isinstance(v, Mapping) and isinstance(v.get("attacks"), list)):
        return v
    mine = {(a["epsilon_lower"], a["samples"]): a["attack"] for a in (out.get("attacks") or []) + (out.get("beside") or [])}
    names = [mine.get((a.get("epsilon_lower"), a.get("samples"))) if isinstance(a, Mapping) else None
             for a in v["attacks"]]
    if not names or not all(names):
        return v
    return {**v, "attacks": f"the same results as {quoted_list(names)} in the sections above"}


#: the order a witness's fields are shown in (anything else after them)
_WITNESS_ORDER = ("label", "round", "canary_position", "batch", "horizon", "row_d", "row_d_prime", "entry_d",
                  "entry_d_prime", "canary_contexts_d", "canary_contexts_d_prime", "canary_rewards_d",
                  "canary_rewards_d_prime", "contexts", "background", "adversary", "features", "statistic", "threshold",
                  "reject_when")


def _per_arm(v: JSONValue) -> JSONValue:
    """Per-arm numbers (a canary's row of rewards): ``every arm 1`` or ``(1, 0)``."""
    if not (isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v)):
        return v
    if len(v) > 1 and len(set(v)) == 1:
        return f"every arm {number(v[0])}"
    return "(" + ", ".join(number(x) for x in v[:8]) + (f", ... {len(v)} arms" if len(v) > 8 else "") + ")"


def witness_rows(w: JSONMapping, digits: int = 6) -> list[tuple[str, object]]:
    """A witness as readable rows: the pair's label and its round, the canary's rows, contexts as short
    vectors (``every arm e1``), the test's statistic and threshold; a nested pair record spread into it;
    an exact enumeration's witness as one line. Never a repr cut mid-way."""
    w = dict(w)
    w.pop("attack", None)
    nested = w.pop("pair", None)
    if isinstance(nested, Mapping):
        for k, v in nested.items():
            w.setdefault(k, v)
    elif nested is not None:
        w["pair"] = nested
    if "canary" in w and "neighbour" in w:
        return [("witness", cell(w))] + ([("value", w["value"])] if w.get("value") is not None else [])
    if "reject_when" in w:
        w.pop("direction", None)  # the same thing, said by reject_when
    keys = [k for k in _WITNESS_ORDER if k in w] + [k for k in w if k not in _WITNESS_ORDER]
    rows: list[tuple[str, object]] = []
    for k in keys:
        v = w[k]
        if v is None or (isinstance(v, (list, str)) and not v):
            continue
        if k == "label":
            rows.append(("pair", Verbatim(tidy_text(str(v), digits))))
        elif k == "round":
            rows.append(("canary round", v))
        elif k.startswith("canary_contexts") or k == "contexts" and isinstance(v, list):
            rows.append((label(k), contexts_text(v)))
        elif k in ("row_d", "row_d_prime", "canary_rewards_d", "canary_rewards_d_prime"):
            rows.append((label(k), _per_arm(v)))
        elif k == "threshold":
            rows.append(("threshold", number(as_float(v))))
        else:
            rows.append((label(k), v))
    return rows


def _sub_audit_blocks(v: JSONMapping, out: JSONObject) -> list[Block]:
    """A sub-audit (a local audit's central part) as readable tables: its finding worded by its bound (a part
    whose bounds are all 0 had no power, whatever it recorded), its witness and its ledger."""
    v = _named_not_repeated(v, out)
    lower, claimed = as_float(v.get("epsilon_lower")), as_float(v.get("epsilon_claimed"))
    verdict = v.get("verdict")
    if verdict != "violation" and not lower > 0:
        verdict = "no power (every lower bound 0): it shows nothing about the claim"
    rows: list[tuple[str, object]] = [("its finding", verdict)]
    if v.get("reason") and not str(verdict).startswith("no power"):
        rows.append(("why", v["reason"]))
    rows += [("claimed eps", v.get("epsilon_claimed")), ("its best lower bound", v.get("epsilon_lower"))]
    gap = as_float(v.get("gap"))
    if gap < 0:
        rows.append(("exceeds the claim by", -gap))
    elif lower > 0 and math.isfinite(claimed):
        rows.append(("gap (claimed minus lower bound)", gap))
    rows += [("horizon T", v.get("horizon")), ("its attacks", v.get("attacks") if isinstance(v.get("attacks"), str)
                                                else [a.get("attack") for a in v.get("attacks") or []]),
             ("time (s)", v.get("seconds"))]
    rows += [(label(k), x) for k, x in v.items() if k not in ("verdict", "reason", "epsilon_claimed", "epsilon_lower",
                                                              "gap", "horizon", "attacks", "seconds", "witness", "ledger")]
    blocks: list[Block] = [kv_table([(k, x) for k, x in rows if not _absent(x)], ("item", "value"))]
    if v.get("witness"):
        same = witness_rows(v["witness"]) == witness_rows(out.get("witness") or {})
        blocks.append(Sub("its witness", (Para("The same as the audit's witness (below).") if same else
                                          kv_table(witness_rows(v["witness"], label_digits(out)), ("field", "value")),)))
    led = v.get("ledger")
    if isinstance(led, Mapping) and led:
        known = dict(_LEDGER_LABELS["per-round"])
        lrows = [(known[k], led[k]) for k in known if led.get(k) is not None]
        lrows += [(label(k), x) for k, x in led.items() if k not in known and not str(k).startswith("usage_")
                  and not _absent(x)]
        blocks.append(Sub("its ledger, per round", (kv_table(lrows),)))
    return blocks


def _absent(v: object) -> bool:
    return v is None or (isinstance(v, (str, list, tuple, dict)) and len(v) == 0)


def _details_section(out: JSONObject) -> Section | None:
    extra = {k: v for k, v in out.items() if k not in _core_keys() and k not in _SHOWN_ELSEWHERE
             and not str(k).startswith("_") and not _absent(v)}
    if not extra:
        return None
    nested = {k: v for k, v in extra.items() if isinstance(v, Mapping) or (isinstance(v, list) and isinstance(v[0], Mapping))}
    facts = [(_DETAIL_TITLES.get(k) or label(k), v) for k, v in extra.items() if k not in nested]
    blocks: list[Block] = [Para(f"What the {out.get('protocol')} protocol's audit recorded beyond the sections above.")]
    if facts:
        blocks.append(kv_table(facts, ("item", "value")))
    for k, v in nested.items():
        inner = (_sub_audit_blocks(v, out) if k == "central" and isinstance(v, Mapping)
                 else data_blocks(v, digits=label_digits(out)))
        blocks.append(Sub(_DETAIL_TITLES.get(k) or label(k).capitalize(), tuple(inner)))
    return Section("details", "Protocol details", tuple(blocks))


def _search_section(out: JSONObject) -> Section | None:
    rows = out.get("search")
    if not rows:
        return None
    when = " before the interruption" if out["verdict"] == "interrupted" else ""
    pilot, ranked = _search_counts(out)
    lead = (f"{pilot} candidate pairs, each ranked on pilot runs; the best {ranked} ranked again on larger samples"
            if pilot else f"{ranked} candidate pairs ranked on small samples") + when
    lead += ("; the best went on to the attacks. The ranking's samples are apart from the fresh ones each bound is "
             "computed on, so choosing costs the bounds no validity.")
    blocks: list[Block] = [Para(lead)]
    fams = out.get("search_summary")
    if fams:
        blocks += [Para("By family of pairs (the best bound on the pilot and ranked again, on the selection split):"),
                   records_table([{"family": f.get("family"), "horizon": f.get("horizon"), "pairs": f.get("pairs"),
                                   "ranked": f.get("ranked"), "best_pilot": f.get("best_pilot"),
                                   "best_ranked": f.get("best_ranked"), "best pair": f.get("best")} for f in fams],
                                 digits=label_digits(out))]
    blocks.append(Fold(f"Every ranking ({len(rows)} rows: one per pair and stage)",
                       (records_table(rows, digits=label_digits(out)),), id="search"))
    return Section("search", "Neighbouring-pair search (ranking on small samples)", tuple(blocks))


def _horizon_section(out: JSONObject) -> Section | None:
    rows = out.get("leakage_vs_horizon")
    if not rows:
        return None
    fig = fig_horizon(out)
    return Section("horizon", "Leakage against the horizon", (
        Para(f"The witness pair rebuilt at each horizon, each its own audit at confidence {fmt(out.get('confidence'))}."),
        records_table(rows)) + ((fig,) if fig else ()))


def _witness_section(out: JSONObject) -> Section | None:
    w = dict(out.get("witness") or {})
    if not w:
        return None
    by = w.get("attack")
    rows = witness_rows(w, label_digits(out))
    return Section("witness", "Witness", ((Para(f"Found by: {by}.") if by else Para("The verdict's witness.")),)
                   + ((kv_table(rows, ("field", "value")),) if rows else ()))


def _notes_section(out: JSONObject) -> Section | None:
    shown = (out.get("power") or {}).get("note")  # already in the power section
    notes = [n for n in out.get("notes") or [] if n != shown]
    return Section("notes", "Notes", tuple(Para(n, note=True) for n in notes)) if notes else None


def _reproduce_section(out: JSONObject) -> Section:
    params = out.get("params") or {}
    rows = [("seed", out.get("seed")), ("protocol", out.get("protocol")), ("horizon T", out.get("horizon"))]
    if out.get("action_space"):
        rows.append(("action space", out["action_space"]))
    elif out.get("n_arms") is not None:
        rows.append(("arms K", out["n_arms"]))
    if out.get("horizon_reason"):
        rows.append(("how T was chosen", out["horizon_reason"]))
    rows.append(("parameters", ", ".join(f"{k}={v}" for k, v in params.items()) if params else "none (defaults)"))
    rows += [("delta", out.get("delta")), ("confidence", out.get("confidence")),
             ("ran on", out.get("workers", "this process")), ("run time", f"{as_float(out.get('seconds')):.1f} s")]
    if out.get("estimate"):
        how = out["estimate"].get("how")
        rows.append(("estimated beforehand", f"{as_float(out['estimate'].get('seconds')):.1f} s" + (f": {how}" if how else "")))
        at = out["estimate"].get("at_horizon") or {}
        if at.get("seconds_settled") is not None:
            rows.append((f"estimated at T = {at.get('horizon')}", f"{as_float(at['seconds_settled']):.1f} to "
                         f"{as_float(at.get('seconds')):.1f} s (the first if the fresh runs settle at their first look)"))
    if out.get("checkpoint"):
        rows.append(("checkpoint", out["checkpoint"]))
    versions = Table(("package", "version"), tuple((k, v) for k, v in (out.get("versions") or {}).items()))
    how = (Para("It names the options given and the seed; the audit chooses the rest (the horizon T below among "
                "them) again, the same way, so with the versions below it gives the same findings.", note=True),
           ) if out.get("command") else ()
    return Section("reproduce", "How to reproduce", (
        Code(out.get("command") or "(called from Python; the command was not recorded)"), *how, kv_table(rows),
        versions))


def _verdict_section(out: JSONObject) -> Section:
    s = summary(out)
    return Section("verdict-again", "Verdict", (Para(f"**{s['word']}**: {s['sentence']}"),))


#: the report, in order: each builder reads the findings and returns a section (or None when it has nothing)
SECTIONS: tuple[Callable[[JSONObject], Section | None], ...] = (
    _parts_section, _claim_section, _ledger_section, _exact_section, _bounds_section, _beside_section,
    _power_section, _one_run_section, _horizon_section, _details_section, _search_section, _witness_section, _notes_section,
    _reproduce_section, _verdict_section)


def sections(out: FindingsLike) -> list[Section]:
    """The report's sections (after the banner) as data, for any protocol's findings."""
    out = findings_dict(out)
    return [s for s in (build(out) for build in SECTIONS) if s is not None]


def figures(out: FindingsLike, draw: bool = True) -> list[dict[str, str | list[str]]]:
    """Every figure of the report: ``{"id", "title", "caption", "shows"}`` (``shows``: the attacks, exact
    figures or ledger it draws), and ``"png"`` (base64) when ``draw``."""
    return [{"id": f.id, "title": f.title, "caption": f.caption, "shows": list(f.shows),
             **({"png": png_base64(f)} if draw else {})}
            for s in sections(out) for f in walk_blocks(s.blocks) if isinstance(f, Figure)]
