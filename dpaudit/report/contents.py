"""The report's sections, in order (:data:`SECTIONS`): each builder reads the findings and returns a
:class:`~dpaudit.report.blocks.Section` (or None when it has nothing to say); :func:`sections` lists them and
:func:`figures` lists their figures. The sections, in order:

* the parts that ran (``parts``), the claim, and the ledger, rendered by its kind: per user (local),
  per round (table, view, interactive) or per round in a tree (joint, where every round feeds one node
  per tree level by design, so its usage figure says what the counts mean instead of raising an alarm);
* the exact figures (judged by the verdict or reported), each lower bound of the verdict with its test
  (threshold, FPR/FNR, counts, corrections), the bounds reported beside the verdict in their own section;
* the power, the protocol's own details rendered generically as data (key/value tables: a local audit's
  channel, lints and central sub-audit; the exact joint enumeration by view; anything a protocol adds),
  the neighbouring-pair search (folded), leakage against the horizon, the witness, the notes;
* how to reproduce (command, seed, parameters, versions as a table) and the verdict again.

The verdict banner above them is written by each writer (:mod:`dpaudit.report.markdown`,
:mod:`dpaudit.report.html`) from :func:`dpaudit.report.reading.banner_numbers`.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Callable, Mapping

from dpaudit.report.blocks import (Code, Figure, Fold, Para, Section, Sub, Table, data_blocks, kv_table, records_table,
                                   walk_blocks)
from dpaudit.report.plots import (fig_bounds, fig_horizon, fig_ledger, fig_profile, fig_renyi, fig_roc, fig_scores,
                                  fig_tradeoff, png_base64, roc_table)
from dpaudit.report.reading import (as_float, findings_dict, fmt, is_threshold_test, ledger_kind, point_estimate,
                                    quoted_list, renyi_zero_notes, summary)

#: what each part's kind means, in the table of the parts that ran
_ROLES = {"bound": "lower bound (enters the verdict)", "exact": "exact figure (no sampling)",
          "beside": "reported beside the verdict", "setup": "setup"}


def _core_keys() -> set[str]:
    from dpaudit.runner.findings import Findings

    return {f.name for f in fields(Findings)} | {"format"}


def _c(x: Any) -> str:
    """Inline code (plain text if it holds a backtick)."""
    s = str(x)
    return s if "`" in s else f"`{s}`"


def _parts_section(out: dict[str, Any]) -> Section:
    parts = out.get("parts") or []
    if not parts:
        return Section("parts", "What ran", (Para("No part of the audit finished." if out["verdict"] == "interrupted"
                                                   else "The findings record no part."),))
    lead = ("These parts finished before the interruption; the others did not run."
            if out["verdict"] == "interrupted" else "Every part of this audit, in the order it ran.")
    rows = tuple((p["name"], _ROLES.get(p["kind"], p["kind"]), p["summary"], fmt(as_float(p.get("seconds")), 3))
                 for p in parts)
    return Section("parts", "What ran", (Para(lead), Table(("part", "role", "what it did", "time (s)"), rows,
                                                           frozenset({3}))))


def _claim_section(out: dict[str, Any]) -> Section:
    if out.get("epsilon_claimed") is None:
        return Section("claim", "The claim", (Para("The policy states no claim, so there is nothing to judge; the "
                                                   "exact figures below stand alone."),))
    text = (f"The policy declares **{out['claim']}**. At delta = {fmt(out['delta'])} this is eps = "
            f"**{as_float(out['epsilon_claimed']):.6g}** ({out.get('claim_method') or 'conversion not recorded'}).")
    return Section("claim", "The claim", (Para(text),))


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


def _ledger_section(out: dict[str, Any]) -> Section:
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
    rows += [(k, v) for k, v in led.items() if k not in known]  # anything a ledger adds, as data
    fig = fig_ledger(out)
    return Section("ledger", title, (Para(text), kv_table(rows)) + ((fig,) if fig else ()))


def _exact_section(out: dict[str, Any]) -> Section | None:
    exact = out.get("exact") or []
    if not exact:
        return None
    claimed = out.get("epsilon_claimed")
    rows = tuple((e["part"], e["epsilon"], claimed if e.get("claimed") is None else e["claimed"],
                  "judged by the verdict" if e.get("judged", True) else "reported", e["method"]) for e in exact)
    blocks: list[Any] = [
        Para("Figures computed exactly, without sampling (a ledger composed per round or per user, a finite channel, "
             "an enumeration). A judged figure above the claim it is compared with is a violation."),
        Table(("part", "eps", "compared with", "role", "method"), rows, frozenset({1, 2}))]
    for e in exact:
        extra = [("witness: " + k, v) for k, v in (e.get("witness") or {}).items()]
        extra += [(k, v) for k, v in (e.get("details") or {}).items()]
        if extra:
            blocks.append(Sub(f"{e['part']} (exact)", (kv_table(extra, ("field", "value")),)))
    if not out.get("attacks"):  # no sampling: the figures against the claim show the exact figures
        blocks[2:2] = _claim_figures(out)
    return Section("exact", "Exact figures", tuple(blocks))


def _test_blocks(a: Mapping[str, Any]) -> list[Any]:
    """One bound with its test: the pair, the statistic and threshold, the counts, the corrections;
    a likelihood attack's Rényi table; any other number the attack recorded, as data."""
    d, w = dict(a.get("details") or {}), dict(a.get("witness") or {})
    blocks: list[Any] = []
    if w.get("label"):
        blocks.append(Para(f"{'Canaries' if a.get('attack') == 'one-run' else 'Pair'}: {w['label']}."))
    if is_threshold_test(a):
        sel = d.pop("selection_bound", None)
        blocks.append(Para(
            f"Test: reject d when {_c(w.get('statistic', 'the score'))} {w.get('reject_when', '')} (threshold "
            f"{fmt(w.get('threshold'))}), chosen on a separate selection split"
            + (f" (selection bound {fmt(sel)})" if sel is not None else "") + f". On {d.pop('n_fresh_per_side')} fresh "
            f"views per side: {d.pop('false_positives')} false positives (FPR {fmt(d.pop('fpr'))}), "
            f"{d.pop('false_negatives')} false negatives (FNR {fmt(d.pop('fnr'))}); Clopper-Pearson bounds at "
            f"{fmt(a['confidence'])} confidence, corrected for {d.pop('tests_corrected_for', 1)} test(s)."))
    if "renyi" in d:
        r = d.pop("renyi")
        blocks.append(Para(
            f"Exact privacy loss of {a['samples']} runs from the ledger: mean loss (KL) {fmt(d.pop('mean_loss_kl', None))}, "
            f"largest {fmt(d.pop('max_loss', None))}; point estimate of eps(delta) "
            f"{fmt(d.pop('epsilon_point_estimate', None))}; tests corrected for: {d.pop('tests_corrected_for', 'n/a')}."))
        if "lower" in r:
            blocks.append(Table(("order alpha", "D_alpha estimate", "D_alpha lower bound"),
                                tuple(zip(r["orders"], r["estimate"], r["lower"])), frozenset({0, 1, 2})))
        for rv in d.pop("renyi_violation", None) or []:
            blocks.append(Para(f"Rényi violation at order {fmt(rv['order'])}: D_alpha >= {fmt(rv['D_alpha_lower'])} > "
                               f"claimed {fmt(rv['claimed'])}.", note=True))
        blocks += [Para(n, note=True) for n in renyi_zero_notes({"attacks": [a]})]
    d.pop("profile", None)  # drawn in the privacy-profile figure
    lists = {k: v for k, v in d.items() if isinstance(v, list) and v and all(isinstance(r, Mapping) for r in v)}
    rest = {k: v for k, v in d.items() if k not in lists}
    if rest:
        blocks.append(kv_table(rest.items(), ("detail", "value")))
    for k, v in lists.items():
        blocks.append(Fold(f"{a['attack']}: {k} ({len(v)} candidates, each evaluated on the same fresh samples)",
                           (records_table(v),)))
    return blocks


def _bound_table(results: list[Mapping[str, Any]]) -> Table:
    return Table(("attack", "eps lower bound", "point estimate", "delta", "confidence", "samples", "time (s)"),
                 tuple((a["attack"], a["epsilon_lower"], point_estimate(a), a["delta"], a["confidence"], a["samples"],
                        fmt(as_float(a.get("seconds")), 3)) for a in results), frozenset(range(1, 7)))


def _claim_figures(out: dict[str, Any]) -> list[Figure]:
    return [f for f in (fig_bounds(out), fig_profile(out), fig_renyi(out), fig_tradeoff(out), fig_roc(out),
                        fig_scores(out)) if f]


def _bounds_section(out: dict[str, Any]) -> Section | None:
    attacks = out.get("attacks") or []
    if not attacks:
        return None
    s = summary(out)
    n = s["parts_judged"] or len(attacks)
    split = (f", split equally over the {n} parts whose bounds enter the verdict ({fmt(s['confidence_per_part'])} each)"
             if s["confidence_per_part"] is not None and n > 1 else "")
    roc = roc_table(out)
    blocks: list[Any] = [Para(f"Overall confidence {fmt(out['confidence'])}{split}; each attack corrects for every "
                              "test it evaluates on fresh samples."), *_claim_figures(out), _bound_table(attacks)]
    if roc is not None:
        blocks += [Para("The ROC of each threshold test on its fresh samples: its AUC and its true-positive rate at a "
                        "false-positive rate of 1e-3 and 1e-2 (n/a when a side has fewer fresh runs than 1 / FPR)."),
                   roc]
    blocks += [Sub(a["attack"], tuple(_test_blocks(a))) for a in attacks]
    return Section("bounds", "Lower bounds of the verdict", tuple(blocks))


def _beside_section(out: dict[str, Any]) -> Section | None:
    beside = out.get("beside") or []
    if not beside:
        return None
    why = [f"{p['name']}: {p['summary']}" for p in out.get("parts") or [] if p.get("kind") == "beside"]
    blocks: list[Any] = [Para("These bounds are measured on a view the claim does not promise to hide; they are "
                              "reported for information and do **not** enter the verdict, whatever their size."
                              + (" " + "; ".join(why) + "." if why else "")), _bound_table(beside)]
    blocks += [b for b in (fig_roc(out, True), fig_scores(out, True), roc_table(out, True)) if b is not None]
    for a in beside:
        blocks.append(Sub(f"{a['attack']} (beside the verdict)", tuple(_test_blocks(a))))
    return Section("beside", "Bounds beside the verdict (not judged)", tuple(blocks))


def _power_section(out: dict[str, Any]) -> Section | None:
    pw = out.get("power")
    if not pw:
        return None
    if (pw.get("details") or {}).get("method") == "one-run":  # its power is the cap of its guesses
        return Section("power", "Power", (Para(pw.get("note") or ""),))
    used = pw.get("fresh_runs_used")
    text = (f"{pw.get('pairs_tried')} neighbouring pairs tried; with {pw.get('fresh_runs_per_side')} fresh runs per "
            f"side the black-box attack can show eps from {fmt(pw.get('smallest_detectable'))} up to "
            f"{fmt(pw.get('largest_bound'))}" + (f"; it showed eps >= {fmt(pw['shown'])}" if pw.get("shown") is not None
                                                  else "")
            + (f" after {used} of them (it stopped once settled; see below)." if used is not None else "."))
    blocks: list[Any] = [Para(text)]
    if pw.get("note"):
        blocks.append(Para(pw["note"], note=True))
    if pw.get("details"):
        blocks += data_blocks(pw["details"])
    return Section("power", "Power", tuple(blocks))


def _one_run_section(out: dict[str, Any]) -> Section | None:
    """A one-run audit (``--method one-run``): its canaries, the pilot's choice, the count, and what it can and
    cannot show beside the multi-run audit."""
    o = out.get("one_run")
    if not isinstance(o, Mapping):
        return None
    text = (f"{o['runs']} runs: run 0 the pilot, {o['counted_runs']} counted; {o['canaries_per_run']} canaries per run "
            f"({o['layout']}), each canary's bit drawn uniformly from the audit's seed. The pilot chose the guesses: "
            f"{o['rule']}. On the counted runs {o['correct']} of {o['guesses']} guesses were right, so by "
            f"{o['analysis_text']} eps >= **{fmt(o['bound'])}** at confidence {fmt(out.get('confidence'))} (the most "
            f"these guesses can show: {fmt(o['cap'])}).")
    if o.get("steinke_beside") is not None:
        text += f" Steinke et al.'s bound at the audit's delta, for comparison (not judged): {fmt(o['steinke_beside'])}."
    blocks: list[Any] = [Para(text),
                         Para(f"It can show {o['can_show']}. It cannot show {o['cannot_show']}.", note=True)]
    if o.get("candidates"):
        blocks.append(Fold("the pilot's best guess rules (predicted bound on the counted canaries)",
                           (records_table(list(o["candidates"])),)))
    return Section("one-run", "One-run audit: what it can and cannot show", tuple(blocks))


#: extra keys another section renders (or that only the reproduction table shows)
_SHOWN_ELSEWHERE = {"claim_curves", "search", "leakage_vs_horizon", "renyi_violation", "workers", "estimate",
                    "checkpoint", "report", "n_arms", "action_space", "horizon_reason", "confidence_per_attack",
                    "one_run", "method"}
#: how a protocol's own details are titled (anything else keeps its JSON key)
_DETAIL_TITLES = {
    "channel": "Local channel", "lints": "Calibration lints of the channel",
    "central": "Central sub-audit (the same policy under Table DP)",
    "exact_joint": "Exact enumeration by view (history, data, central)", "at": "Where the enumeration was read",
    "sizes": "Size of the enumeration", "claim_point": "The claim's own point", "central_exact": "Central view, exact",
    "threshold_search": "Threshold search of the membership attack", "horizon_search": "How the horizon was found",
}


def _named_not_repeated(v: Any, out: dict[str, Any]) -> Any:
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


def _details_section(out: dict[str, Any]) -> Section | None:
    extra = {k: v for k, v in out.items() if k not in _core_keys() and k not in _SHOWN_ELSEWHERE}
    if not extra:
        return None
    facts = [(k, v) for k, v in extra.items() if not isinstance(v, (Mapping, list)) or not v]
    facts += [(k, v) for k, v in extra.items() if isinstance(v, list) and v and not isinstance(v[0], Mapping)]
    blocks: list[Any] = [Para(f"What the {out.get('protocol')} protocol's audit recorded beyond the sections above, "
                              "as data (the same keys as the JSON findings).")]
    if facts:
        blocks.append(kv_table(facts, ("key", "value")))
    for k, v in extra.items():
        if (isinstance(v, Mapping) and v) or (isinstance(v, list) and v and isinstance(v[0], Mapping)):
            blocks.append(Sub(_DETAIL_TITLES.get(k, k), tuple(data_blocks(_named_not_repeated(v, out)))))
    return Section("details", "Protocol details", tuple(blocks))


def _search_section(out: dict[str, Any]) -> Section | None:
    rows = out.get("search")
    if not rows:
        return None
    when = " before the interruption" if out["verdict"] == "interrupted" else ""
    return Section("search", "Neighbouring-pair search (ranking on small samples)", (
        Fold(f"{len(rows)} candidate pairs ranked on small samples{when}; the best went on to the attacks",
             (records_table(rows),), id="search"),))


def _horizon_section(out: dict[str, Any]) -> Section | None:
    rows = out.get("leakage_vs_horizon")
    if not rows:
        return None
    fig = fig_horizon(out)
    return Section("horizon", "Leakage against the horizon", (
        Para(f"The witness pair rebuilt at each horizon, each its own audit at confidence {fmt(out.get('confidence'))}."),
        records_table(rows)) + ((fig,) if fig else ()))


def _witness_section(out: dict[str, Any]) -> Section | None:
    w = dict(out.get("witness") or {})
    if not w:
        return None
    by = w.pop("attack", None)
    return Section("witness", "Witness", ((Para(f"Found by: {by}.") if by else Para("The verdict's witness.")),
                                           kv_table(w.items(), ("field", "value"))))


def _notes_section(out: dict[str, Any]) -> Section | None:
    shown = (out.get("power") or {}).get("note")  # already in the power section
    notes = [n for n in out.get("notes") or [] if n != shown]
    return Section("notes", "Notes", tuple(Para(n, note=True) for n in notes)) if notes else None


def _reproduce_section(out: dict[str, Any]) -> Section:
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
        rows.append(("estimated beforehand", f"{as_float(out['estimate'].get('seconds')):.1f} s: {out['estimate'].get('how')}"))
    if out.get("checkpoint"):
        rows.append(("checkpoint", out["checkpoint"]))
    versions = Table(("package", "version"), tuple((k, v) for k, v in (out.get("versions") or {}).items()))
    return Section("reproduce", "How to reproduce", (
        Code(out.get("command") or "(called from Python; the command was not recorded)"), kv_table(rows), versions))


def _verdict_section(out: dict[str, Any]) -> Section:
    s = summary(out)
    return Section("verdict-again", "Verdict", (Para(f"**{s['word']}**: {s['sentence']}"),))


#: the report, in order: each builder reads the findings and returns a section (or None when it has nothing)
SECTIONS: tuple[Callable[[dict[str, Any]], Section | None], ...] = (
    _parts_section, _claim_section, _ledger_section, _exact_section, _bounds_section, _beside_section,
    _power_section, _one_run_section, _horizon_section, _details_section, _search_section, _witness_section, _notes_section,
    _reproduce_section, _verdict_section)


def sections(out: Any) -> list[Section]:
    """The report's sections (after the banner) as data, for any protocol's findings."""
    out = findings_dict(out)
    return [s for s in (build(out) for build in SECTIONS) if s is not None]


def figures(out: Any, draw: bool = True) -> list[dict[str, Any]]:
    """Every figure of the report: ``{"id", "title", "caption", "shows"}`` (``shows``: the attacks, exact
    figures or ledger it draws), and ``"png"`` (base64) when ``draw``."""
    return [{"id": f.id, "title": f.title, "caption": f.caption, "shows": list(f.shows),
             **({"png": png_base64(f)} if draw else {})}
            for s in sections(out) for f in walk_blocks(s.blocks) if isinstance(f, Figure)]
