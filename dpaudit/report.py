"""Reviewer reports of ``dpaudit check policy``: a Markdown file and a self-contained HTML page.

Both open with the verdict (claimed eps, the best lower bound with its confidence, the gap, one
sentence) and carry the command line, versions and seed, the claim and how it was computed, the
ledger audit, each attack's numbers, the witness and the neighbouring-pair search: everything
needed to reproduce the audit. The HTML page is real HTML (a coloured verdict banner, figures,
tables, the search collapsed in ``<details>``), with every figure embedded as a base64 PNG, no
JavaScript and no external file, and a print style sheet. Figures (matplotlib, drawn only from the
findings dict, so a report can be re-rendered from ``--json`` output):

* the claim's privacy profile delta(eps) beside the likelihood attack's estimate and confidence band;
* the claim's Rényi curve beside the measured D_alpha (estimates, and lower bounds as whiskers);
* the membership attack's trade-off: FNR against FPR, the region the claim allows shaded, the
  observed rates and their upper confidence corner (the witness);
* every attack's eps lower bound with a whisker up to its point estimate, against the claim;
* the ledger's per-round usage (how many releases each round fed);
* eps lower bound against the horizon, where the findings carry ``leakage_vs_horizon`` rows.

:func:`write_report` writes the pair atomically (both rendered and written to temporary files in the
target folder, then renamed), and :func:`check_report_path` lets a caller refuse an unwritable path
before an audit starts.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from dpaudit.errors import DPAuditError

__all__ = ["markdown_report", "html_report", "write_report", "check_report_path", "figures", "summary"]

_WORDS = {"violation": "VIOLATION", "consistent": "CONSISTENT", "inconclusive": "INCONCLUSIVE",
          "interrupted": "INTERRUPTED (no verdict)"}
_COLOURS = {"violation": "#b3261e", "consistent": "#1e7b34", "inconclusive": "#8a6100", "interrupted": "#555"}


def _findings(out: Any) -> dict[str, Any]:
    """Accept an :class:`dpaudit.api.Audit` or a findings dict."""
    return out.to_dict() if hasattr(out, "to_dict") else out


def _x(v: Any) -> float:
    """A JSON number (or "inf"/"nan" string, or None) as a float."""
    if v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _f(x: Any, digits: int = 4) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, str):
        return x
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _verdict_sentence(out: dict[str, Any]) -> str:
    word = _WORDS.get(out["verdict"], str(out["verdict"]).upper())
    return f"**{word}**: {out['reason']}."


def summary(out: Any) -> dict[str, Any]:
    """The numbers of the verdict banner: claimed eps, best lower bound, its attack and confidence, gap."""
    out = _findings(out)
    attacks = out.get("attacks") or []
    best = max(attacks, key=lambda a: _x(a.get("epsilon_lower")), default=None)
    return {
        "verdict": out["verdict"],
        "word": _WORDS.get(out["verdict"], str(out["verdict"]).upper()),
        "sentence": f"{out['reason']}.",
        "claim": out.get("claim"),
        "epsilon_claimed": out.get("epsilon_claimed"),
        "epsilon_lower": out.get("epsilon_lower"),
        "best_attack": best["attack"] if best else None,
        "confidence": out.get("confidence"),
        "delta": out.get("delta"),
        "gap": out.get("gap"),
    }


def renyi_zero_notes(out: dict[str, Any]) -> list[str]:
    """One line per order whose Rényi lower bound is 0 while its estimate is large, saying why."""
    notes = []
    for a in out.get("attacks") or []:
        r = (a.get("details") or {}).get("renyi")
        if not r:
            continue
        zero = [(o, e) for o, e, lo in zip(r["orders"], r["estimate"], r["lower"]) if _x(lo) == 0 and _x(e) > 1e-3]
        if zero:
            orders = ", ".join(f"{_x(o):g}" for o, _ in zero)
            notes.append(
                f"At order(s) {orders} the D_alpha lower bound is 0 although the estimate is up to "
                f"{max(_x(e) for _, e in zero):.3g}: at high orders D_alpha is driven by rare, very large privacy "
                "losses (a heavy tail) that the half of the runs used for the bound too rarely contains, so no "
                "lower bound above 0 holds at this sample size; the estimate is not a bound.")
    return notes


def markdown_report(out: Any) -> str:
    """The findings of :func:`dpaudit.api.audit` (or ``--json``) as Markdown, verdict first."""
    out = _findings(out)
    s = summary(out)
    lines = [f"# dpaudit check: `{out['policy']}`", "", _verdict_sentence(out), ""]
    if out.get("epsilon_claimed") is not None:
        lines += [
            "| claimed eps | best lower bound | confidence | gap | delta |",
            "| --- | --- | --- | --- | --- |",
            f"| {_f(s['epsilon_claimed'])} ({s['claim']}) | {_f(s['epsilon_lower'])} ({s['best_attack'] or 'n/a'}) | "
            f"{_f(s['confidence'])} | {_f(s['gap'])} | {_f(s['delta'])} |",
            "",
        ]
    lines += [f"> Note: {note}" for note in out.get("notes", [])] + ([""] if out.get("notes") else [])
    lines += ["Figures: see the HTML page beside this file.", ""]
    lines += ["## How to reproduce", "", "```", out.get("command") or "(called from Python)", "```", ""]
    v = out.get("versions", {})
    lines += ["| item | value |", "| --- | --- |"]
    lines += [f"| {k} | {val} |" for k, val in v.items()]
    lines += [
        f"| seed | {out['seed']} |",
        f"| protocol | {out['protocol']} |",
        f"| horizon T, arms K | {out.get('horizon')}, {out.get('n_arms', 'n/a')} |",
        *([f"| how T was chosen | {out['horizon_reason']} |"] if out.get("horizon_reason") else []),
        f"| parameters | {json.dumps(out.get('params') or {}, default=str)} |",
        f"| ran on | {out.get('workers', 'this process')} |",
        f"| run time | {_x(out.get('seconds')):.1f} s |",
        "",
    ]
    if "epsilon_claimed" in out:
        lines += [
            "## The claim",
            "",
            f"The policy declares **{out['claim']}**. At delta = {out['delta']:g} this is "
            f"eps = **{_x(out['epsilon_claimed']):.6g}** ({out['claim_method']}).",
            "",
        ]
    led = out.get("ledger")
    lines += ["## Ledger audit", ""] if "ledger" in out else []
    if "ledger" not in out:
        pass  # interrupted before the ledger audit
    elif led is None:
        lines += ["The policy keeps no ledger (it does not use dpaudit's mechanisms), so only the black-box "
                  "attack judges it.", ""]
    else:
        lines += [_ledger_sentence(led), ""]
    if out.get("exact"):
        lines += ["## Exact figures", "", "| part | eps | judged | method |", "| --- | --- | --- | --- |"]
        lines += [f"| {e['part']} (exact) | {_f(e['epsilon'])} | {'yes' if e['judged'] else 'reported'} | {e['method']} |"
                  for e in out["exact"]] + [""]
    lines += [
        "## Attacks",
        "",
        f"Overall confidence {out['confidence']:g}, split equally between the attacks that ran "
        f"({_f(out.get('confidence_per_attack'))} each); each attack corrects for every test it evaluates on "
        "fresh samples.",
        "",
    ]
    lines += [_power_sentence(out), ""] if _power_sentence(out) else []
    lines += [
        "| attack | eps lower bound | point estimate | delta | confidence | samples | time (s) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for a in out["attacks"]:
        lines.append(f"| {a['attack']} | {_f(a['epsilon_lower'])} | {_f(_point_estimate(a, out))} | {a['delta']:g} | "
                     f"{_f(a['confidence'])} | {a['samples']} | {_f(a['seconds'], 3)} |")
    lines.append("")
    for a in out["attacks"]:
        d = a["details"]
        if a["attack"] == "membership" or "renyi" not in d:  # every threshold-test attack (also issue 13's)
            title = "### Membership (black-box)" if a["attack"] == "membership" else f"### {a['attack']}"
            lines += [title, "", _membership_sentence(a), ""]
        else:
            r = d["renyi"]
            lines += ["### Likelihood (gray-box)", "", _likelihood_sentence(a), "",
                      "| order alpha | D_alpha estimate | D_alpha lower bound |", "| --- | --- | --- |"]
            for o, e, lo in zip(r["orders"], r["estimate"], r["lower"]):
                lines.append(f"| {_f(o)} | {_f(e)} | {_f(lo)} |")
            lines.append("")
            lines += [f"- Rényi violation at order {_f(rv['order'])}: D_alpha >= {_f(rv['D_alpha_lower'])} "
                      f"> claimed {_f(rv['claimed'])}" for rv in d.get("renyi_violation") or []]
            lines += [f"> {n}" for n in renyi_zero_notes({"attacks": [a]})]
            lines.append("")
    if out.get("leakage_vs_horizon"):
        lines += ["## Leakage against the horizon", "", "The witness pair rebuilt at each horizon, each its own audit "
                  f"at confidence {_f(out.get('confidence'))}.", "", "| horizon T | membership eps >= | likelihood eps >= |",
                  "| --- | --- | --- |"]
        lines += [f"| {r['horizon']} | {_f(r.get('membership'))} | {_f(r.get('likelihood'))} |"
                  for r in out["leakage_vs_horizon"]] + [""]
    if out.get("witness"):
        w = dict(out["witness"])
        lines += ["## Witness", "", f"Found by the {w.pop('attack')} attack.", "", "| field | value |", "| --- | --- |"]
        for k, val in w.items():
            lines.append(f"| {k} | `{json.dumps(val, default=str)}` |")
        lines.append("")
    if out.get("search"):
        lines += ["## Neighbouring-pair search (ranking on small samples)", "",
                  "| pair | membership selection bound | statistic | likelihood mean loss |",
                  "| --- | --- | --- | --- |"]
        for row in out["search"]:
            lines.append(f"| {row.get('pair')} | {_f(row.get('membership_selection_bound'))} | {row.get('statistic')} | "
                         f"{_f(row.get('likelihood_mean_loss'))} |")
        lines.append("")
    lines += ["## Verdict", "", _verdict_sentence(out), ""]
    return "\n".join(lines)


def _ledger_sentence(led: dict[str, Any]) -> str:
    if led.get("kind") == "per-user":
        if led.get("epsilon") is None:
            return "No message was recorded in the ledger (the channel does not use dpaudit.mechanisms)."
        return (f"{led['messages']} recorded messages, at most {led['max_messages_per_user']} per user, composed per "
                f"user: exact per-user eps = {_f(led['epsilon'])} ({led['method']}).")
    return (f"Over {led.get('runs', 'n/a')} runs on the audit table: {led['releases']} batched releases; "
            f"ledger-implied guarantee {_f(led.get('implied'))} (eps = {_f(led.get('implied_epsilon'))} at the "
            f"same delta); {led['shared_rounds']} (run, round) pairs fed more than one release "
            f"(at most {led.get('max_releases_per_round', 'n/a')} releases per round); "
            f"{led['releases_without_fed']} releases without a record of the rounds that fed them.")


def _power_sentence(out: dict[str, Any]) -> str | None:
    pw = out.get("power")
    if not pw:
        return None
    return (f"Power: {pw.get('pairs_tried')} neighbouring pairs tried; with {pw.get('fresh_runs_per_side')} fresh runs "
            f"per side the black-box attack can show eps from {_f(pw.get('smallest_detectable'))} up to "
            f"{_f(pw.get('largest_bound'))}.")


def _membership_sentence(a: dict[str, Any]) -> str:
    d, w = a["details"], a["witness"]
    return (f"Test: reject d when `{w.get('statistic')}` {w.get('reject_when')} (threshold {_f(w.get('threshold'))}), "
            f"chosen on a selection split. On {d['n_fresh_per_side']} fresh views per side: {d['false_positives']} "
            f"false positives (FPR {_f(d['fpr'])}), {d['false_negatives']} false negatives (FNR {_f(d['fnr'])}); "
            f"Clopper-Pearson bounds corrected for {d['tests_corrected_for']} test(s).")


def _likelihood_sentence(a: dict[str, Any]) -> str:
    d = a["details"]
    return (f"Exact privacy loss of {a['samples']} runs from the ledger; mean loss (KL) {_f(d.get('mean_loss_kl'))}, "
            f"largest {_f(d.get('max_loss'))}; point estimate of eps(delta) {_f(d.get('epsilon_point_estimate'))}; "
            f"at most {d.get('max_releases_fed_by_round')} releases fed by the canary round; "
            f"tests corrected for: {d.get('tests_corrected_for')}.")


def _point_estimate(a: dict[str, Any], out: dict[str, Any]) -> float | None:
    """An attack's eps point estimate: the likelihood's empirical profile, or the membership test's
    eps from its raw rates (no confidence correction): where the whisker of the bound reaches."""
    d = a.get("details") or {}
    if a["attack"] == "likelihood":
        return d.get("epsilon_point_estimate")
    if a["attack"] == "membership" and "fpr" in d:
        delta = _x(a.get("delta"))
        fpr, fnr = _x(d["fpr"]), _x(d["fnr"])
        cands = []
        for x, y in ((fpr, fnr), (fnr, fpr)):
            if y > 0 and 1 - delta - x > 0:
                cands.append(math.log((1 - delta - x) / y))
            elif y == 0 and 1 - delta - x > 0:
                cands.append(math.inf)
        return max([0.0] + cands)
    return None


# ---- figures ------------------------------------------------------------------------------------

def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _claim_allows(curves: dict[str, Any], fpr: Any) -> Any:
    """The smallest FNR the claim allows at each FPR: the intersection over the claim's (eps_i, delta_i)
    of FNR >= 1 - delta_i - e^eps_i FPR and FNR >= e^-eps_i (1 - delta_i - FPR) (Kairouz et al. 2015)."""
    import numpy as np

    p = curves["profile"]
    eps = np.array([_x(e) for e in p["eps"]])
    dl = np.array([_x(d) for d in p["delta"]])
    ok = np.isfinite(eps)
    eps, dl = eps[ok], dl[ok]
    x = np.asarray(fpr)[:, None]
    with np.errstate(over="ignore"):
        a = 1 - dl - np.exp(eps) * x
        b = np.exp(-eps) * (1 - dl - x)
    return np.clip(np.maximum(a, b).max(axis=1, initial=0.0), 0.0, 1.0)


def figures(out: Any) -> list[dict[str, str]]:
    """Every figure the findings support, as ``{"id", "title", "caption", "png"}`` (base64 PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.patches
    import matplotlib.pyplot as plt
    import numpy as np

    out = _findings(out)
    figs: list[dict[str, str]] = []
    delta = _x(out.get("delta"))
    eps_claim = _x(out.get("epsilon_claimed"))
    curves = out.get("claim_curves")
    attacks = {a["attack"]: a for a in out.get("attacks") or []}
    lik, mem = attacks.get("likelihood"), attacks.get("membership")

    # 1. bounds with whiskers against the claim
    if out.get("attacks"):
        fig, ax = plt.subplots(figsize=(6.2, 3.2))
        names = [a["attack"] for a in out["attacks"]]
        lows = [_x(a["epsilon_lower"]) for a in out["attacks"]]
        ests = [_x(_point_estimate(a, out)) for a in out["attacks"]]
        y = np.arange(len(names))
        for yi, lo, es in zip(y, lows, ests):
            top = es if math.isfinite(es) and es > lo else lo
            ax.plot([lo, top], [yi, yi], color="tab:blue", lw=2)
            ax.plot([lo], [yi], marker="|", color="tab:blue", ms=18, mew=3)
            if math.isfinite(es):
                ax.plot([es], [yi], marker="o", color="tab:blue", mfc="white")
        ax.plot([], [], color="tab:blue", marker="|", ms=12, mew=3,
                label=f"lower bound ({_f(out.get('confidence'))} confidence) to point estimate")
        if math.isfinite(eps_claim):
            ax.axvline(eps_claim, color="tab:red", ls="--", label=f"claimed eps = {eps_claim:.4g}")
        ax.set_yticks(y, names)
        ax.set_ylim(-0.7, len(names) - 0.3)
        ax.set_xlim(left=0)
        ax.set_xlabel(f"eps at delta = {delta:g}")
        ax.legend(fontsize=8, loc="lower right")
        ax.grid(axis="x", alpha=0.3)
        fig.tight_layout()
        figs.append({"id": "fig-bounds", "title": "Lower bounds against the claim",
                     "caption": "Each attack's eps lower bound at the stated confidence (bar end) with a whisker up "
                                "to its point estimate; the dashed line is the claim. A bound right of the line is a "
                                "violation.", "png": _png(fig)})

    # 2. privacy profile
    if lik is not None or curves:
        fig, ax = plt.subplots(figsize=(6.2, 3.6))
        if curves:
            e = np.array([_x(v) for v in curves["profile"]["eps"]])
            d = np.array([_x(v) for v in curves["profile"]["delta"]])
            ok = np.isfinite(e)
            ax.plot(e[ok], d[ok], color="tab:red", lw=2, label=f"claim {out.get('claim')}: delta(eps) allowed")
        if lik is not None:
            p = lik["details"]["profile"]
            e = np.array([_x(v) for v in p["eps"]])
            est = np.array([_x(v) for v in p["delta_estimate"]])
            lo = np.array([_x(v) for v in p["delta_lower"]])
            up = np.array([_x(v) for v in p["delta_upper"]])
            pos = est > 0
            ax.plot(e[pos], est[pos], color="tab:blue", label="likelihood attack: estimate")
            band = up > 0
            ax.fill_between(e[band], np.where(lo[band] > 0, lo[band], np.nan), up[band], color="tab:blue", alpha=0.2,
                            label="confidence band (lower to upper bound)")
            ax.plot(e[lo > 0], lo[lo > 0], color="tab:blue", ls=":", label="lower bound")
        ax.axhline(delta, color="gray", ls=":", lw=1)
        ax.annotate(f"delta = {delta:g}", (0, delta), xytext=(2, 2), textcoords="offset points", fontsize=7,
                    color="gray")
        lo_eps = _x(out.get("epsilon_lower"))
        if math.isfinite(lo_eps):
            ax.plot([lo_eps], [delta], marker="o", color="tab:blue", ms=7, label=f"best lower bound eps >= {lo_eps:.4g}")
        if math.isfinite(eps_claim):
            ax.plot([eps_claim], [delta], marker="D", color="tab:red", ms=6, label=f"claimed eps = {eps_claim:.4g}")
        ax.set_yscale("log")
        ax.set_xlabel("eps")
        ax.set_ylabel("delta(eps)")
        ax.set_xlim(left=0)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        figs.append({"id": "fig-profile", "title": "Privacy profile",
                     "caption": "The claim's whole delta(eps) curve (red) and the likelihood attack's estimate with "
                                "its confidence band (blue; points where a bound is 0 are not drawn, there is no "
                                "floor). A lower bound above the red curve contradicts the claim.", "png": _png(fig)})

    # 3. Rényi curve
    if (lik is not None and "renyi" in lik["details"]) or curves:
        fig, ax = plt.subplots(figsize=(6.2, 3.4))
        if curves:
            o = np.array([_x(v) for v in curves["renyi"]["orders"]])
            c = np.array([_x(v) for v in curves["renyi"]["claimed"]])
            ok = np.isfinite(c)
            if ok.any():
                ax.plot(o[ok], c[ok], color="tab:red", lw=2, label="claimed D_alpha")
        if lik is not None and "renyi" in lik["details"]:
            r = lik["details"]["renyi"]
            o = np.array([_x(v) for v in r["orders"]])
            est = np.array([_x(v) for v in r["estimate"]])
            lo = np.array([_x(v) for v in r["lower"]])
            ax.vlines(o, lo, np.maximum(est, lo), color="tab:blue", lw=2)
            ax.plot(o, lo, "_", color="tab:blue", ms=14, mew=3, label="lower bound (whisker to the estimate)")
            ax.plot(o, est, "o", color="tab:blue", mfc="white", label="estimate")
        ax.set_xscale("log")
        ax.set_xlabel("order alpha")
        ax.set_ylabel("D_alpha")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        figs.append({"id": "fig-renyi", "title": "Rényi divergence",
                     "caption": "The claim's Rényi curve against the likelihood attack's D_alpha: lower bounds "
                                "(bars) with whiskers up to the estimates (circles).", "png": _png(fig)})

    # 4. membership trade-off
    if mem is not None and "fpr" in mem["details"]:
        from dpaudit.attacks.bounds import cp_upper

        d = mem["details"]
        n = int(d["n_fresh_per_side"])
        alpha = (1.0 - _x(mem["confidence"])) / int(d.get("tests_corrected_for") or 1) / 2.0
        fpr_up = float(cp_upper(int(d["false_positives"]), n, alpha))
        fnr_up = float(cp_upper(int(d["false_negatives"]), n, alpha))
        fig, (ax, zx) = plt.subplots(1, 2, figsize=(10.0, 4.4))
        x = np.linspace(0.0, 1.0, 501)
        fx, fy = _x(d["fpr"]), _x(d["fnr"])
        if curves:
            allow = _claim_allows(curves, x)
            ax.fill_between(x, allow, 1.0, color="tab:green", alpha=0.18, label="region the claim allows")
            ax.fill_between(x, 0.0, allow, color="tab:red", alpha=0.15, label="ruled out by the claim")
            ax.plot(x, allow, color="tab:red", lw=1.5)
        ax.add_patch(matplotlib.patches.Rectangle((fx, fy), fpr_up - fx, fnr_up - fy, fill=False, ec="tab:blue",
                                                  lw=1.2))
        ax.plot([fx], [fy], "o", color="black", label=f"observed (FPR {fx:.3g}, FNR {fy:.3g})")
        ax.plot([fpr_up], [fnr_up], "s", color="tab:blue", ms=6,
                label=f"upper confidence corner ({_f(mem['confidence'])})")
        ax.plot([0, 1], [1, 0], color="gray", ls=":", lw=1)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_aspect("equal")
        ax.set_xlabel("false-positive rate (FPR)")
        ax.set_ylabel("false-negative rate (FNR)")
        ax.legend(fontsize=7, loc="upper right")
        # zoom: the smaller error rate against the power left by the larger one, log-log (the claim's
        # region is symmetric in FPR and FNR, so one panel serves either kind of test)
        small, large = (fx, fy) if fx <= fy else (fy, fx)
        small_up, large_up = (fpr_up, fnr_up) if fx <= fy else (fnr_up, fpr_up)
        lo = max(min(small, small_up, 1.0 / n) / 3, 1e-9)
        xs = np.geomspace(lo, 1.0, 400)
        if curves:
            ceiling = 1.0 - _claim_allows(curves, xs)
            zx.fill_between(xs, lo, np.maximum(ceiling, lo), color="tab:green", alpha=0.18)
            zx.fill_between(xs, np.maximum(ceiling, lo), 1.0, color="tab:red", alpha=0.15)
            zx.plot(xs, np.maximum(ceiling, lo), color="tab:red", lw=1.5, label="most power the claim allows")
        zx.plot([max(small, lo)], [max(1 - large, lo)], "o", color="black", label="observed")
        zx.plot([small_up], [max(1 - large_up, lo)], "s", color="tab:blue", ms=6,
                label="confidence corner (the bound's witness)")
        zx.plot([max(small, lo), small_up], [max(1 - large, lo)] * 2, color="tab:blue", lw=1)
        zx.plot([small_up] * 2, [max(1 - large, lo), max(1 - large_up, lo)], color="tab:blue", lw=1)
        zx.set_xscale("log")
        zx.set_yscale("log")
        zx.set_xlim(lo, 1)
        zx.set_ylim(lo, 1.05)
        zx.set_xlabel("smaller error rate (" + ("FPR" if fx <= fy else "FNR") + ")")
        zx.set_ylabel("1 - larger error rate (" + ("TPR" if fx <= fy else "TNR") + ")")
        zx.legend(fontsize=7, loc="lower right")
        zx.set_title("zoom, log axes: above the red curve is a violation", fontsize=8)
        fig.tight_layout()
        figs.append({"id": "fig-tradeoff", "title": "Membership trade-off",
                     "caption": "Left: FNR against FPR of the black-box test (dotted: a coin flip), the observed "
                                "rates and the box up to their upper confidence bounds; the whole box in the red "
                                "region is a violation of the claim. Right: the same on log axes, the smaller error "
                                "rate against the power the larger one leaves, where small rates are visible.",
                     "png": _png(fig)})

    # 5. ledger usage
    led = out.get("ledger") or {}
    if led.get("usage_max_per_round"):
        mx = np.array(led["usage_max_per_round"], dtype=float)
        mean = np.array(led.get("usage_mean_per_round") or mx, dtype=float)
        fig, ax = plt.subplots(figsize=(6.2, 2.8))
        t = np.arange(mx.size)
        ax.bar(t, mx, width=1.0, color="tab:gray", alpha=0.5, label="most releases fed, over the runs")
        ax.step(t, mean, where="mid", color="tab:blue", label="mean over the runs")
        ax.axhline(1, color="tab:red", ls="--", lw=1, label="one release per round (per-round budget)")
        ax.set_xlabel("round t")
        ax.set_ylabel("releases fed by round t")
        ax.legend(fontsize=7)
        fig.tight_layout()
        figs.append({"id": "fig-ledger", "title": "Ledger: releases each round fed",
                     "caption": "How many noisy releases each round's data fed (per-round accounting). Above the "
                                "dashed line a round was used twice, and its guarantees compose.", "png": _png(fig)})

    # 6. eps against the horizon
    rows = out.get("leakage_vs_horizon")
    if rows:
        fig, ax = plt.subplots(figsize=(6.2, 3.0))
        T = [r["horizon"] for r in rows]
        for key, colour in (("membership", "tab:orange"), ("likelihood", "tab:blue")):
            vals = [_x(r.get(key)) for r in rows]
            if any(math.isfinite(v) for v in vals):
                ax.plot(T, vals, "o-", color=colour, label=f"{key} lower bound")
        if math.isfinite(eps_claim):
            ax.axhline(eps_claim, color="tab:red", ls="--", label="claimed eps")
        ax.set_xscale("log")
        ax.set_xlabel("horizon T")
        ax.set_ylabel("eps lower bound")
        ax.legend(fontsize=8)
        fig.tight_layout()
        figs.append({"id": "fig-horizon", "title": "Leakage against the horizon",
                     "caption": "The best pair rebuilt at each horizon; each point is its own audit.", "png": _png(fig)})
    return figs


# ---- HTML ---------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:62em;margin:1.5em auto;padding:0 1em;
color:#1b1b1b;line-height:1.45}
.banner{border-left:.6em solid var(--c);background:color-mix(in srgb,var(--c) 9%,white);padding:.8em 1.2em;
border-radius:.3em;margin-bottom:1.2em}
.banner h1{margin:0 0 .2em 0;font-size:1.5em;color:var(--c)}
.banner p.sentence{margin:.3em 0 .7em 0;font-size:1.05em}
.numbers{display:flex;flex-wrap:wrap;gap:.6em 2em;margin:0}
.numbers div{min-width:9em}.numbers dt{font-size:.8em;color:#555;text-transform:uppercase;letter-spacing:.03em}
.numbers dd{margin:0;font-size:1.35em;font-weight:600}
figure{margin:1em 0;break-inside:avoid;page-break-inside:avoid}
figure img{max-width:100%;height:auto;border:1px solid #ddd}
figcaption{font-size:.9em;color:#444}
.figs{display:grid;grid-template-columns:repeat(auto-fit,minmax(26em,1fr));gap:0 1.5em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f2f2f2} td.num{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em}
pre{background:#f6f6f6;padding:.6em;white-space:pre-wrap;word-break:break-all}
.note{background:#fff8e1;border-left:.3em solid #e0b000;padding:.4em .8em;margin:.4em 0}
details{margin:1em 0} summary{cursor:pointer;font-weight:600}
@media print{body{max-width:none;margin:0}.banner{-webkit-print-color-adjust:exact;print-color-adjust:exact}
details>*{display:block}h2{break-after:avoid}}
"""


def _e(x: Any) -> str:
    return html.escape(str(x))


def _table(header: list[str], rows: list[list[Any]], num: set[int] = frozenset()) -> str:  # type: ignore[assignment]
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td class='num'>{_e(_f(c))}</td>" if i in num else f"<td>{_e(_f(c))}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_report(out: Any) -> str:
    """A self-contained HTML page: verdict banner, figures, tables; no JavaScript, no external files."""
    out = _findings(out)
    s = summary(out)
    colour = _COLOURS.get(out["verdict"], "#555")
    conf = _f(s["confidence"])
    nums = []
    if s["epsilon_claimed"] is not None:
        nums.append(("claimed eps", f"{_x(s['epsilon_claimed']):.4g}", f"{s['claim']} at delta = {_f(s['delta'])}"))
    if s["epsilon_lower"] is not None:
        nums.append(("best lower bound", f"{_x(s['epsilon_lower']):.4g}",
                     f"{s['best_attack'] or ''} attack, {conf} confidence"))
    if s["gap"] is not None:
        nums.append(("gap", f"{_x(s['gap']):.4g}", "claimed minus lower bound"))
    dl = "".join(f"<div><dt>{_e(k)}</dt><dd class='value' id='num-{_e(k.replace(' ', '-'))}'>{_e(v)}</dd>"
                 f"<dd style='font-size:.8em;font-weight:400;color:#555'>{_e(sub)}</dd></div>" for k, v, sub in nums)
    parts = [
        "<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>dpaudit: {_e(s['word'])} - {_e(out['policy'])}</title><style>{_CSS}</style></head><body>",
        f"<header class='banner' id='verdict' style='--c:{colour}'>",
        f"<h1>{_e(s['word'])}: <code>{_e(out['policy'])}</code></h1>",
        f"<p class='sentence' id='verdict-sentence'>{_e(s['sentence'])}</p>",
        f"<dl class='numbers'>{dl}</dl></header>",
    ]
    for note in list(out.get("notes") or []) + renyi_zero_notes(out):
        parts.append(f"<p class='note'>{_e(note)}</p>")
    figs = figures(out)
    if figs:
        parts.append("<h2>Figures</h2><div class='figs'>")
        for f in figs:
            parts.append(f"<figure id='{f['id']}'><img alt='{_e(f['title'])}' src='data:image/png;base64,{f['png']}'>"
                         f"<figcaption><b>{_e(f['title'])}.</b> {_e(f['caption'])}</figcaption></figure>")
        parts.append("</div>")
    if "epsilon_claimed" in out:
        parts.append(f"<h2>The claim</h2><p>The policy declares <b>{_e(out['claim'])}</b>. At delta = "
                     f"{_e(_f(out['delta']))} this is eps = <b>{_x(out['epsilon_claimed']):.6g}</b> "
                     f"({_e(out.get('claim_method', ''))}).</p>")
    if "ledger" in out:
        led = out.get("ledger")
        parts.append("<h2>Ledger audit</h2><p>" + (_e(_ledger_sentence(led)) if led else
                     "The policy keeps no ledger (it does not use dpaudit's mechanisms), so only the black-box "
                     "attack judges it.") + "</p>")
    parts.append(f"<h2>Attacks</h2><p>Overall confidence {_e(_f(out['confidence']))}, split equally between the attacks "
                 f"that ran ({_e(_f(out.get('confidence_per_attack')))} each); each attack corrects for every test it "
                 "evaluates on fresh samples.</p>")
    if _power_sentence(out):
        parts.append(f"<p>{_e(_power_sentence(out))}</p>")
    parts.append(_table(["attack", "eps lower bound", "point estimate", "delta", "confidence", "samples", "time (s)"],
                        [[a["attack"], a["epsilon_lower"], _point_estimate(a, out), a["delta"], a["confidence"],
                          a["samples"], _f(a["seconds"], 3)] for a in out.get("attacks") or []], {1, 2, 3, 4, 5, 6}))
    for a in out.get("attacks") or []:
        d = a["details"]
        if a["attack"] == "membership":
            parts.append(f"<h3>Membership (black-box)</h3><p>{_e(_membership_sentence(a))}</p>")
        elif "renyi" in d:
            r = d["renyi"]
            parts.append(f"<h3>Likelihood (gray-box)</h3><p>{_e(_likelihood_sentence(a))}</p>")
            parts.append(_table(["order alpha", "D_alpha estimate", "D_alpha lower bound"],
                                [list(x) for x in zip(r["orders"], r["estimate"], r["lower"])], {0, 1, 2}))
            for rv in d.get("renyi_violation") or []:
                parts.append(f"<p>Rényi violation at order {_e(_f(rv['order']))}: D_alpha &ge; "
                             f"{_e(_f(rv['D_alpha_lower']))} &gt; claimed {_e(_f(rv['claimed']))}</p>")
    if out.get("leakage_vs_horizon"):
        parts.append(f"<h2>Leakage against the horizon</h2><p>The witness pair rebuilt at each horizon, each its own "
                     f"audit at confidence {_e(_f(out.get('confidence')))}.</p>")
        parts.append(_table(["horizon T", "membership eps >=", "likelihood eps >="],
                            [[r["horizon"], r.get("membership"), r.get("likelihood")]
                             for r in out["leakage_vs_horizon"]], {0, 1, 2}))
    if out.get("witness"):
        w = dict(out["witness"])
        attack = w.pop("attack")
        parts.append(f"<h2>Witness</h2><p>Found by the {_e(attack)} attack.</p>")
        parts.append(_table(["field", "value"], [[k, json.dumps(v, default=str)] for k, v in w.items()]))
    if out.get("search"):
        parts.append(f"<details id='search'><summary>Neighbouring-pair search: {len(out['search'])} candidate pairs "
                     "ranked on small samples</summary>")
        parts.append(_table(["pair", "membership selection bound", "statistic", "likelihood mean loss"],
                            [[r.get("pair"), r.get("membership_selection_bound"), r.get("statistic"),
                              r.get("likelihood_mean_loss")] for r in out["search"]], {1, 3}))
        parts.append("</details>")
    parts.append("<h2>How to reproduce</h2>")
    parts.append(f"<pre>{_e(out.get('command') or '(called from Python)')}</pre>")
    rows = [[k, v] for k, v in (out.get("versions") or {}).items()]
    rows += [["seed", out.get("seed")], ["protocol", out.get("protocol")],
             ["horizon T, arms K", f"{out.get('horizon')}, {out.get('n_arms', 'n/a')}"],
             *([["how T was chosen", out["horizon_reason"]]] if out.get("horizon_reason") else []),
             ["parameters", json.dumps(out.get("params") or {}, default=str)],
             ["ran on", out.get("workers", "this process")], ["run time", f"{_x(out.get('seconds')):.1f} s"]]
    parts.append(_table(["item", "value"], rows))
    parts.append("</body></html>")
    return "\n".join(parts)


# ---- writing ------------------------------------------------------------------------------------

def check_report_path(path: str | Path) -> list[Path]:
    """Refuse a report path that is not ``*.md`` or whose folder cannot be written, before any work;
    return the two paths (Markdown, HTML) the report will have."""
    path = Path(path)
    if path.suffix != ".md":
        raise DPAuditError(f"--report must name a Markdown file ending in .md, got {str(path)!r}.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".dpaudit-probe-", dir=path.parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise DPAuditError(f"cannot write the report to {str(path)!r}: {exc.strerror or exc}.") from None
    for p in (path, path.with_suffix(".html")):
        if p.is_dir():
            raise DPAuditError(f"cannot write the report to {str(p)!r}: it is a folder.")
    return [path, path.with_suffix(".html")]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_report(out: Any, path: str | Path) -> list[Path]:
    """Write ``path`` (Markdown) and the HTML page beside it as a pair: both are rendered first, written
    to temporary files in the same folder, then renamed into place (no half-written report)."""
    paths = check_report_path(path)
    texts = [markdown_report(out), html_report(out)]
    temps: list[str] = []
    try:
        for p, text in zip(paths, texts):
            fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
            temps.append(tmp)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; a report is an ordinary file
        for tmp, p in zip(temps, paths):
            os.replace(tmp, p)
    except OSError as exc:
        raise DPAuditError(f"cannot write the report to {str(paths[0])!r}: {exc.strerror or exc}.") from None
    finally:
        for tmp in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return paths
