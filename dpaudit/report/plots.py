"""Every figure of the report: a builder per figure that reads the findings and returns a :class:`Figure`
(its id, title, caption and a function that draws it), the ROC summary (:func:`roc_summary`,
:func:`roc_table`), and the drawing (:func:`draw_figure`, :func:`png_bytes`), without pyplot.

Figures are drawn only for what ran, and each caption names only what it draws: the bounds of the verdict
against the claim; the claim's privacy profile (with a likelihood attack's estimated profile when one
ran); the Rényi divergences an attack or an exact figure measured against the claim's curve (no Rényi
figure when nothing measured one); the trade-off of every threshold test of the verdict against the
region the claim allows; beside it the ROC curve of every threshold test whose fresh scores the findings
keep (linear and log axes, with the AUC and the TPR at FPR 1e-3 and 1e-2, :func:`roc_summary`) and the two
sides' score histograms, as TensorFlow Privacy's and ML Privacy Meter's reports show them; the per-round
ledger's usage; eps against the horizon. Every figure's text is at least :data:`FONT_PT` points at the width
the page shows it (96 CSS px per inch of the figure, one figure per row).
"""

from __future__ import annotations

import base64
import io
import math
from typing import TYPE_CHECKING, Mapping

from dpaudit.jsontypes import JSONMapping, JSONObject
from dpaudit.report.blocks import Figure, Table
from dpaudit.report.reading import (FindingsLike, as_float, findings_dict, fmt, is_threshold_test, ledger_kind,
                                    no_power, point_estimate, quoted_list, summary)

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure as MplFigure

    from dpaudit.attacks.result import ScoreHistogram

#: figure widths in inches; the HTML page shows a figure at 96 CSS px per inch (never scaled down in a
#: window 1,100 px or wider), so FONT_PT is the size a reader sees: at least 10 pt
FIG_WIDTH, WIDE_WIDTH = 7.6, 10.2
#: the smallest font of any figure (ticks, legends), and the PNG's pixels per inch (2x for sharp text)
FONT_PT, DPI = 10.5, 144
#: the id of every figure a report can have (its PNG beside the Markdown is ``stem.ID.png``)
FIGURE_IDS = ("fig-ledger", "fig-bounds", "fig-profile", "fig-renyi", "fig-tradeoff", "fig-roc", "fig-scores",
              "fig-roc-beside", "fig-scores-beside", "fig-horizon")
_RC = {"font.size": FONT_PT, "axes.titlesize": FONT_PT + 0.5, "axes.labelsize": FONT_PT + 0.5,
       "xtick.labelsize": FONT_PT, "ytick.labelsize": FONT_PT, "legend.fontsize": FONT_PT,
       "figure.titlesize": FONT_PT + 1}


def _axes(figsize: tuple[float, float], ncols: int = 1, layout: str = "tight") -> tuple[MplFigure, Axes | np.ndarray]:
    """A matplotlib figure and its axes, without pyplot: no global state, no backend switched (a report
    drawn in a notebook leaves its plots alone); one Axes, or an array of ``ncols`` of them."""
    from matplotlib.figure import Figure as _MplFigure

    fig = _MplFigure(figsize=figsize, layout=layout)
    return fig, fig.subplots(1, ncols)


def _claim_allows(curves: JSONMapping, fpr: np.ndarray) -> np.ndarray:
    """The smallest FNR the claim allows at each FPR: the intersection over the claim's (eps_i, delta_i)
    of FNR >= 1 - delta_i - e^eps_i FPR and FNR >= e^-eps_i (1 - delta_i - FPR) (Kairouz et al. 2015)."""
    import numpy as np

    p = curves["profile"]
    eps = np.array([as_float(e) for e in p["eps"]])
    dl = np.array([as_float(d) for d in p["delta"]])
    ok = np.isfinite(eps)
    eps, dl = eps[ok], dl[ok]
    x = np.asarray(fpr)[:, None]
    with np.errstate(over="ignore"):
        a = 1 - dl - np.exp(eps) * x
        b = np.exp(-eps) * (1 - dl - x)
    return np.clip(np.maximum(a, b).max(axis=1, initial=0.0), 0.0, 1.0)


def fig_bounds(out: JSONObject) -> Figure | None:
    attacks = [a for a in out.get("attacks") or [] if not no_power(a)]  # a bound of 0 shows nothing: said, not drawn
    exact = [e for e in out.get("exact") or [] if e.get("judged", True) and math.isfinite(as_float(e["epsilon"]))]
    if not attacks and not exact:
        return None
    eps_claim, delta = as_float(out.get("epsilon_claimed")), as_float(out.get("delta"))

    def draw() -> MplFigure:
        import numpy as np

        rows = [(a["attack"], as_float(a["epsilon_lower"]), as_float(point_estimate(a)), False) for a in attacks]
        rows += [(e["part"] + " (exact)", as_float(e["epsilon"]), math.nan, True) for e in exact]
        fig, ax = _axes((FIG_WIDTH, 1.8 + 0.5 * len(rows)), layout="constrained")
        for yi, (_, lo, es, is_exact) in enumerate(rows):
            if is_exact:
                ax.plot([lo], [yi], marker="D", color="tab:purple", ms=7)
                continue
            top = es if math.isfinite(es) and es > lo else lo
            ax.plot([lo, top], [yi, yi], color="tab:blue", lw=2)
            ax.plot([lo], [yi], marker="|", color="tab:blue", ms=18, mew=3)
            if math.isfinite(es):
                ax.plot([es], [yi], marker="o", color="tab:blue", mfc="white")
        if attacks:
            ax.plot([], [], color="tab:blue", marker="|", ms=12, mew=3, label="lower bound to point estimate")
        if exact:
            ax.plot([], [], color="tab:purple", marker="D", ls="", label="exact figure")
        if math.isfinite(eps_claim):
            ax.axvline(eps_claim, color="tab:red", ls="--", label=f"claimed eps = {eps_claim:.4g}")
        ax.set_yticks(np.arange(len(rows)), [r[0] for r in rows])
        ax.set_ylim(len(rows) - 0.3, -0.7)  # the first on top
        tops = [v for r in rows for v in r[1:3] if math.isfinite(v)] + ([eps_claim] if math.isfinite(eps_claim) else [])
        ax.set_xlim(0, max(tops + [1e-3]) * 1.12)
        ax.set_xlabel(f"eps at delta = {delta:g}")
        fig.legend(loc="outside lower center", ncol=2)
        ax.grid(axis="x", alpha=0.3)
        return fig

    parts = []
    if attacks:
        parts.append(f"The lower bound of each attack of the verdict ({quoted_list([a['attack'] for a in attacks])}) at "
                     "its confidence (bar end), with a whisker up to its point estimate where it has one")
    if exact:
        parts.append(f"the exact figure{'s' if len(exact) > 1 else ''} the verdict judges "
                     f"({quoted_list([e['part'] for e in exact])}; {'diamonds' if len(exact) > 1 else 'a diamond'}, no "
                     "sampling)")
    cap = "; ".join(parts) + ". The dashed line is the claim: a bound right of it is a violation."
    title = "Lower bounds against the claim" if attacks else "Exact figures against the claim"
    return Figure("fig-bounds", title, cap[0].upper() + cap[1:], draw,
                  tuple(a["attack"] for a in attacks) + tuple(e["part"] for e in exact))


def fig_profile(out: JSONObject) -> Figure | None:
    curves = out.get("claim_curves")
    measured = [a for a in out.get("attacks") or [] if "profile" in (a.get("details") or {})]
    if not curves and not measured:
        return None
    delta, eps_claim, lo_eps = (as_float(out.get("delta")), as_float(out.get("epsilon_claimed")),
                                as_float(out.get("epsilon_lower")))
    best = summary(out)["best_attack"]

    def draw() -> MplFigure:
        import numpy as np

        fig, ax = _axes((FIG_WIDTH, 4.4))
        if claim_drawn:
            e = np.array([as_float(v) for v in curves["profile"]["eps"]])
            d = np.array([as_float(v) for v in curves["profile"]["delta"]])
            ok = np.isfinite(e)
            ax.plot(e[ok], d[ok], color="tab:red", lw=2, label=f"the claim ({out.get('claim')}): delta(eps)")
        for a, colour in zip(measured, ("tab:blue", "tab:cyan", "tab:purple")):
            p = a["details"]["profile"]
            e = np.array([as_float(v) for v in p["eps"]])
            est = np.array([as_float(v) for v in p["delta_estimate"]])
            lo = np.array([as_float(v) for v in p["delta_lower"]])
            up = np.array([as_float(v) for v in p["delta_upper"]])
            ax.plot(e[est > 0], est[est > 0], color=colour, label=f"{a['attack']}: estimate")
            band = up > 0
            ax.fill_between(e[band], np.where(lo[band] > 0, lo[band], np.nan), up[band], color=colour, alpha=0.2,
                            label=f"{a['attack']}: confidence band")
        ax.axhline(delta, color="gray", ls=":", lw=1)
        ax.annotate(f"delta = {delta:g}", (0, delta), xytext=(2, 2), textcoords="offset points",
                    color="gray")
        if lo_eps > 0:
            ax.plot([lo_eps], [delta], marker="o", color="black", ms=6, ls="",
                    label=f"best lower bound eps >= {lo_eps:.4g}")
        if math.isfinite(eps_claim):
            ax.plot([eps_claim], [delta], marker="D", color="tab:red", ms=6, ls="",
                    label=f"claimed eps = {eps_claim:.4g}")
        ax.set_yscale("log")
        ax.set_xlabel("eps")
        ax.set_ylabel("delta(eps)")
        ax.set_xlim(left=0)
        ax.legend()
        ax.grid(alpha=0.3)
        return fig

    claim_drawn = bool(curves) and any(math.isfinite(as_float(v)) for v in curves.get("profile", {}).get("eps", []))
    if not claim_drawn and not measured:
        return None
    cap = "The delta(eps) the claim allows (red)" if claim_drawn else "The measured profile"
    if measured:
        cap += (f", against the estimated profile of {quoted_list([a['attack'] for a in measured])} with its confidence band "
                "(blue; points where a bound is 0 are not drawn)")
    cap += f". Marked at delta = {delta:g}: the claimed eps"
    if lo_eps > 0 and best:
        cap += f" and the best lower bound ('{best}')"
    cap += ". A lower bound above the red curve contradicts the claim." if claim_drawn else "."
    title = "Privacy profile" if measured else "The claim's privacy profile"
    return Figure("fig-profile", title, cap, draw,
                  tuple(a["attack"] for a in measured) + ((best,) if best and lo_eps > 0 else ()))


def _claimed_renyi(curves: JSONMapping | None) -> tuple[list[float], list[float]]:
    """The claim's Rényi curve where it is finite (a pure or (eps, delta) claim may have none)."""
    if not curves or "renyi" not in curves:
        return [], []
    pts = [(as_float(o), as_float(c)) for o, c in zip(curves["renyi"]["orders"], curves["renyi"]["claimed"])]
    pts = [(o, c) for o, c in pts if math.isfinite(o) and math.isfinite(c)]
    return [o for o, _ in pts], [c for _, c in pts]


def fig_renyi(out: JSONObject) -> Figure | None:
    measured = [a for a in out.get("attacks") or [] if "lower" in ((a.get("details") or {}).get("renyi") or {})]
    exact = [e for e in out.get("exact") or [] if isinstance((e.get("details") or {}).get("renyi"), Mapping)
             and "value" in e["details"]["renyi"]]
    if not measured and not exact:
        return None  # nothing measured a Rényi divergence: the claim's curve alone would be an empty panel
    orders, claimed = _claimed_renyi(out.get("claim_curves"))  # the caption names the red curve only if drawn

    def draw() -> MplFigure:
        import numpy as np

        fig, ax = _axes((FIG_WIDTH, 4.2))
        if orders:
            ax.plot(orders, claimed, color="tab:red", lw=2, label="the claim's D_alpha")
        for a in measured:
            r = a["details"]["renyi"]
            o = np.array([as_float(v) for v in r["orders"]])
            est = np.array([as_float(v) for v in r["estimate"]])
            lo = np.array([as_float(v) for v in r["lower"]])
            ax.vlines(o, lo, np.maximum(est, lo), color="tab:blue", lw=2)
            ax.plot(o, lo, "_", color="tab:blue", ms=14, mew=3, label=f"{a['attack']}: lower bound")
            ax.plot(o, est, "o", color="tab:blue", mfc="white", label=f"{a['attack']}: estimate")
        for e in exact:
            r = e["details"]["renyi"]
            ax.plot([as_float(v) for v in r["orders"]], [as_float(v) for v in r["value"]], "D", color="tab:purple",
                    label=f"{e['part']}: exact")
        ax.set_xscale("log")
        ax.set_xlabel("order alpha")
        ax.set_ylabel("D_alpha")
        ax.legend()
        ax.grid(alpha=0.3)
        return fig

    what = []
    if measured:
        what.append(f"the D_alpha {quoted_list([a['attack'] for a in measured])} measured: lower bounds (bars) with "
                    "whiskers up to the estimates (circles)")
    if exact:
        what.append(f"the exact D_alpha of {quoted_list([e['part'] for e in exact])} (diamonds)")
    cap = ("The claim's Rényi curve (red) against " if orders else "") + "; ".join(what) + "."
    if not orders and out.get("claim") is not None:
        cap += f" The claim ({out['claim']}) states no finite Rényi divergence, so no claimed curve is drawn."
    return Figure("fig-renyi", "Rényi divergence", cap[0].upper() + cap[1:], draw,
                  tuple(a["attack"] for a in measured) + tuple(e["part"] for e in exact))


def fig_tradeoff(out: JSONObject) -> Figure | None:
    tests = [a for a in out.get("attacks") or [] if is_threshold_test(a) and not no_power(a)]
    if not tests:
        return None
    curves = out.get("claim_curves") if "profile" in (out.get("claim_curves") or {}) else None

    def draw() -> MplFigure:
        import matplotlib.patches
        import numpy as np

        from dpaudit.attacks.bounds import cp_upper

        fig, (ax, zx) = _axes((WIDE_WIDTH, 5.2), ncols=2)
        x = np.linspace(0.0, 1.0, 501)
        if curves:
            allow = _claim_allows(curves, x)
            ax.fill_between(x, allow, 1.0, color="tab:green", alpha=0.18, label="region the claim allows")
            ax.fill_between(x, 0.0, allow, color="tab:red", alpha=0.15, label="ruled out by the claim")
            ax.plot(x, allow, color="tab:red", lw=1.5)
        pts = []
        for a, colour in zip(tests, ("tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:olive", "tab:cyan")):
            d = a["details"]
            n = int(d["n_fresh_per_side"])
            alpha = (1.0 - as_float(a["confidence"])) / int(d.get("tests_corrected_for") or 1) / 2.0
            fx, fy = as_float(d["fpr"]), as_float(d["fnr"])
            fpr_up = float(cp_upper(int(d["false_positives"]), n, alpha))
            fnr_up = float(cp_upper(int(d["false_negatives"]), n, alpha))
            ax.add_patch(matplotlib.patches.Rectangle((fx, fy), fpr_up - fx, fnr_up - fy, fill=False, ec=colour,
                                                      lw=1.2))
            ax.plot([fx], [fy], "o", color=colour, label=f"{a['attack']}: FPR {fx:.3g}, FNR {fy:.3g}")
            ax.plot([fpr_up], [fnr_up], "s", color=colour, ms=5)
            small, large, small_up, large_up = (fx, fy, fpr_up, fnr_up) if fx <= fy else (fy, fx, fnr_up, fpr_up)
            pts.append((colour, small, large, small_up, large_up, n))
        ax.plot([0, 1], [1, 0], color="gray", ls=":", lw=1)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_aspect("equal")
        ax.set_xlabel("false-positive rate (FPR)")
        ax.set_ylabel("false-negative rate (FNR)")
        ax.legend(loc="upper right")
        lo = max(min(min(p[1], p[3], 1.0 / p[5]) for p in pts) / 3, 1e-9)
        xs = np.geomspace(lo, 1.0, 400)
        if curves:
            ceiling = np.maximum(1.0 - _claim_allows(curves, xs), lo)
            zx.fill_between(xs, lo, ceiling, color="tab:green", alpha=0.18)
            zx.fill_between(xs, ceiling, 1.0, color="tab:red", alpha=0.15)
            zx.plot(xs, ceiling, color="tab:red", lw=1.5, label="most power the claim allows")
        for colour, small, large, small_up, large_up, _ in pts:
            zx.plot([max(small, lo)], [max(1 - large, lo)], "o", color=colour)
            zx.plot([small_up], [max(1 - large_up, lo)], "s", color=colour, ms=5)
            zx.plot([max(small, lo), small_up], [max(1 - large, lo)] * 2, color=colour, lw=1)
            zx.plot([small_up] * 2, [max(1 - large, lo), max(1 - large_up, lo)], color=colour, lw=1)
        zx.plot([], [], "s", color="gray", ms=5, label="confidence corner (the bound's witness)")
        zx.set_xscale("log")
        zx.set_yscale("log")
        zx.set_xlim(lo, 1)
        zx.set_ylim(lo, 1.05)
        zx.set_xlabel("smaller error rate")
        zx.set_ylabel("1 - larger error rate")
        zx.legend(loc="lower right")
        zx.set_title("zoom, log axes: above the red curve is a violation")
        return fig

    names = [a["attack"] for a in tests]
    cap = (f"Left: FNR against FPR of the threshold test of {quoted_list(names)} on fresh samples (dotted: a coin flip), the "
           "observed rates (circle) and the box up to their upper confidence bounds (square, the bound's witness)"
           + ("; the whole box in the red region the claim rules out is a violation" if curves else "")
           + ". Right: the same on log axes, the smaller error rate against the power the larger one leaves, where "
           "small rates are visible.")
    return Figure("fig-tradeoff", "Threshold tests: trade-off", cap, draw, tuple(names), wide=True)


def _histogram(a: JSONMapping) -> ScoreHistogram | None:
    """An attack's binned fresh scores (:class:`~dpaudit.attacks.result.ScoreHistogram`), or None."""
    from dpaudit.attacks.result import ScoreHistogram

    h = a.get("scores")
    if not isinstance(h, Mapping):
        return None
    h = ScoreHistogram.from_dict(dict(h))
    return h if h.n0 > 0 and h.n1 > 0 else None


def _roc_tests(results: list[JSONMapping], drawn: bool = False) -> list[tuple[str, ScoreHistogram]]:
    """(attack, binned scores) of every threshold test that kept its fresh scores; ``drawn``: only those a
    figure draws (a test with no power, lower bound 0, is said in a sentence instead)."""
    return [(a["attack"], h) for a in results if (h := _histogram(a)) is not None and not (drawn and no_power(a))]


def roc_auc(a: JSONMapping) -> float | None:
    """The AUC of an attack's threshold test on its fresh scores, or None when it kept none."""
    h = _histogram(a)
    return None if h is None else h.auc()


#: the false-positive rates the ROC summary reads the TPR at (as TensorFlow Privacy's and ML Privacy Meter's reports)
ROC_FPRS = (1e-3, 1e-2)
_PALETTE = ("tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:olive", "tab:cyan")


def roc_summary(out: FindingsLike, beside: bool = False) -> list[JSONObject]:
    """One row per threshold test whose fresh scores the findings keep: its AUC and TPR at the FPRs of
    :data:`ROC_FPRS` (None, "n/a" in the report, when a side has fewer fresh runs than 1 / FPR), computed
    exactly from the binned scores (the empirical ROC of the thresholds at the bin edges)."""
    out = out if isinstance(out, dict) and "format" in out else findings_dict(out)
    rows = []
    for name, h in _roc_tests(out.get("beside" if beside else "attacks") or []):
        rows.append({"attack": name, "statistic": h.statistic, "auc": h.auc(),
                     **{f"tpr_at_fpr_{f:g}": h.tpr_at(f) for f in ROC_FPRS}, "runs_per_side": h.n0,
                     "exact": h.exact, "thresholds": len(h.edges)})
    return rows


def fig_roc(out: JSONObject, beside: bool = False) -> Figure | None:
    tests = _roc_tests(out.get("beside" if beside else "attacks") or [], drawn=True)
    if not tests:
        return None

    def draw() -> MplFigure:
        import numpy as np

        fig, (ax, zx) = _axes((WIDE_WIDTH, 5.0), ncols=2)
        floor = min(1.0 / max(1, min(h.n0, h.n1)) for _, h in tests)
        left = floor / 2  # an FPR of 0 is drawn here, at the left edge of the log axes
        for (name, h), colour in zip(tests, _PALETTE):
            fpr, tpr = (np.array(v) for v in h.roc())
            ax.plot(fpr, tpr, color=colour, lw=2, label=f"{name}: AUC {h.auc():.3f}")
            pos = tpr > 0
            zx.plot(np.maximum(fpr[pos], left), tpr[pos], color=colour, lw=2,
                    marker="o" if pos.sum() < 40 else None, ms=4, label=name)
        for f in ROC_FPRS:
            if f >= floor:
                zx.axvline(f, color="gray", ls=":", lw=1.2)
        ax.plot([0, 1], [0, 1], color="gray", ls="--", lw=1, label="chance (AUC 0.5)")
        zx.plot([left, 1], [left, 1], color="gray", ls="--", lw=1)
        for x in (ax, zx):
            x.set_xlabel("false-positive rate (FPR)")
            x.set_ylabel("true-positive rate (TPR)")
            x.grid(alpha=0.3)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.01)
        ax.set_aspect("equal")
        ax.legend(loc="lower right")
        zx.set_xscale("log")
        zx.set_yscale("log")
        zx.set_xlim(left / 1.5, 1.05)
        zx.set_ylim(left / 1.5, 1.1)
        zx.set_title("log axes (dotted: FPR 1e-3 and 1e-2)")
        return fig

    names = [n for n, _ in tests]
    exact = all(h.exact for _, h in tests)
    cap = (f"The ROC curve of the threshold test of {quoted_list(names)} on its fresh samples (every threshold of its "
           "statistic, not only the one the bound uses), on linear axes (left, with the AUC) and log axes (right, "
           "where the true-positive rate at a small false-positive rate is read; a false-positive rate of 0 is drawn "
           "at the left edge, below one false positive). " + ("Every fresh score sits on a bin edge, so this is the exact empirical ROC."
                                  if exact else "Scores are binned at edges fixed on the selection split, so this is "
                                  "the empirical ROC of the thresholds at those edges."))
    fid = "fig-roc-beside" if beside else "fig-roc"
    return Figure(fid, "Threshold tests: ROC curve" + (" (beside the verdict)" if beside else ""), cap, draw,
                  tuple(names), wide=True)


#: the most bars a score histogram shows: the test's fixed bins (a few hundred), adjacent ones merged
MAX_BARS = 40


def merged_bins(h: ScoreHistogram, max_bars: int = MAX_BARS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A :class:`~dpaudit.attacks.result.ScoreHistogram`'s cells merged into at most ``max_bars`` bins between
    its first and last edge (and the two outer cells): edges narrower than 1e-6 of the range dropped, then an
    evenly spaced subset of the remaining edges kept (the first and last always). Merging adjacent cells
    only sums their counts, so every bar is exact. Returns (edges, side-0 counts, side-1 counts), the counts
    one longer than the edges (the outer cells included)."""
    import numpy as np

    e = np.array(h.edges, dtype=float)
    span = float(e[-1] - e[0]) or 1.0
    keep = [0]
    for i in range(1, e.size):
        if e[i] - e[keep[-1]] > 1e-6 * span:
            keep.append(i)
    keep = np.array(keep)
    if keep.size > max_bars + 1:
        keep = keep[np.unique(np.round(np.linspace(0, keep.size - 1, max_bars + 1)).astype(int))]
    # old cell i, (e_{i-1}, e_i], goes to the new cell whose upper edge is the first kept edge at or after i
    cell = np.searchsorted(keep, np.arange(e.size + 1), side="left")
    m0, m1 = np.zeros(keep.size + 1), np.zeros(keep.size + 1)
    np.add.at(m0, cell, np.array(h.counts0, dtype=float))
    np.add.at(m1, cell, np.array(h.counts1, dtype=float))
    return e[keep], m0, m1


def _stems(h: ScoreHistogram) -> bool:
    """Whether a histogram is drawn as one bar per value: every score on an edge, and few values."""
    used = [i for i, (a, b) in enumerate(zip(h.counts0[:-1], h.counts1[:-1])) if a or b]
    return h.exact and len(used) <= MAX_BARS


def fig_scores(out: JSONObject, beside: bool = False) -> Figure | None:
    tests = _roc_tests(out.get("beside" if beside else "attacks") or [], drawn=True)[:4]
    if not tests:
        return None

    def draw() -> MplFigure:
        import numpy as np

        n = len(tests)
        fig, axs = _axes((WIDE_WIDTH if n > 1 else FIG_WIDTH, 4.2), ncols=n, layout="constrained")
        for ax, (name, h) in zip(np.atleast_1d(axs), tests):
            if _stems(h):  # every score is an edge: one stem per value, the sides side by side
                e = np.array(h.edges)
                c0 = np.array(h.counts0, dtype=float)[:-1] / h.n0
                c1 = np.array(h.counts1, dtype=float)[:-1] / h.n1
                used = (c0 > 0) | (c1 > 0)
                x = e[used]
                gap = float(np.min(np.diff(x))) if x.size > 1 else 1.0
                for c, colour, shift, label in ((c0[used], "tab:blue", -0.12, "d (side 0)"),
                                                (c1[used], "tab:red", 0.12, "d' (side 1)")):
                    ax.vlines(x + shift * gap, 0, c, color=colour, lw=4, label=label)
                ax.set_ylim(0, max(c0.max(), c1.max()) * 1.12)
                ax.set_ylabel("share of fresh runs")
            else:  # at most MAX_BARS bins as stairs, the outer cells one median bin wide
                ke, m0, m1 = merged_bins(h)
                step = float(np.median(np.diff(ke))) if ke.size > 1 else 1.0
                x = np.concatenate([[ke[0] - step], ke, [ke[-1] + step]])
                width = np.diff(x)
                ax.stairs(m0 / h.n0 / width, x, color="tab:blue", lw=1.8, label="d (side 0)")
                ax.stairs(m1 / h.n1 / width, x, color="tab:red", lw=1.8, label="d' (side 1)")
                ax.set_ylabel("density of fresh runs")
            ax.set_xlabel(h.statistic)
            ax.set_title(name)
            ax.grid(alpha=0.3)
            ax.legend()
        return fig

    names = [n for n, _ in tests]
    stems = [_stems(h) for _, h in tests]
    how = ("one bar per value of the score" if all(stems) else
           f"the density in each bin: the test's fixed bins, adjacent ones merged into at most {MAX_BARS}"
           if not any(stems) else
           f"one bar per value where the score takes few values, else the density in each of at most {MAX_BARS} "
           "bins, the test's fixed bins merged")
    cap = (f"The two sides' fresh scores of the threshold test of {quoted_list(names)}: how the runs on d (blue) and on d' "
           f"(red) spread over the values of its statistic ({how}). Where the two part, the test tells the sides apart.")
    fid = "fig-scores-beside" if beside else "fig-scores"
    return Figure(fid, "Threshold tests: score histograms" + (" (beside the verdict)" if beside else ""), cap, draw,
                  tuple(names), wide=len(tests) > 1)


def _na(x: float | None) -> float | str:
    return "n/a" if x is None else x


def roc_table(out: JSONObject, beside: bool = False) -> Table | None:
    rows = roc_summary(out, beside)
    if not rows:
        return None
    return Table(("attack", "statistic", "AUC", "TPR at FPR 1e-3", "TPR at FPR 1e-2", "fresh runs per side", "ROC"),
                 tuple((r["attack"], r["statistic"], r["auc"], _na(r["tpr_at_fpr_0.001"]), _na(r["tpr_at_fpr_0.01"]),
                        r["runs_per_side"], "exact" if r["exact"] else f"at {r['thresholds']} bin edges")
                       for r in rows), frozenset({2, 3, 4, 5}))


def fig_ledger(out: JSONObject) -> Figure | None:
    led = out.get("ledger")
    kind = ledger_kind(led)
    if kind not in ("per-round", "tree") or not led.get("usage_max_per_round"):
        return None

    def draw() -> MplFigure:
        import numpy as np

        mx = np.array(led["usage_max_per_round"], dtype=float)
        mean = np.array(led.get("usage_mean_per_round") or mx, dtype=float)
        fig, ax = _axes((FIG_WIDTH, 3.8), layout="constrained")
        t = np.arange(mx.size)
        ax.bar(t, mx, width=1.0, color="tab:gray", alpha=0.5, label="most releases fed, over the runs")
        ax.step(t, mean, where="mid", color="tab:blue", label="mean over the runs")
        if kind == "per-round":
            ax.axhline(1, color="tab:red", ls="--", lw=1, label="one release per round")
        ax.set_ylim(0, max(1.0, float(mx.max())) * 1.15)
        ax.set_xlabel("round t")
        ax.set_ylabel("releases fed by round t")
        fig.legend(loc="outside lower center", ncol=2)
        return fig

    runs, most = led.get("runs", "the"), led.get("max_releases_per_round")
    implied = f"{fmt(led.get('implied'))} (eps = {fmt(led.get('implied_epsilon'))})"
    if kind == "tree":
        title = "Tree ledger: releases each round fed"
        cap = (f"How many tree nodes (noisy releases) each round's data fed, over {runs} runs (bars: the most; line: "
               f"the mean). In a tree ledger every round feeds one node per tree level by design, so each round "
               f"feeds several releases (here at most {most}); that is the mechanism, not reuse, and the cost of all "
               f"of them is composed per round into the ledger's guarantee {implied}.")
    else:
        title = "Ledger: releases each round fed"
        shared = int(led.get("shared_rounds") or 0)
        cap = (f"How many noisy releases each round's data fed, over {runs} runs (bars: the most; line: the mean), "
               "with one release per round dashed. ")
        cap += (f"Above the dashed line a round's data fed several releases ({shared} (run, round) pairs here), so "
                f"their guarantees compose for that round; composed per round the ledger implies {implied}."
                if shared else f"No round fed more than one release; composed per round the ledger implies {implied}.")
    return Figure("fig-ledger", title, cap, draw, ("ledger",))


def fig_horizon(out: JSONObject) -> Figure | None:
    rows = out.get("leakage_vs_horizon")
    if not rows:
        return None
    keys = [k for k in rows[0] if k != "horizon" and any(math.isfinite(as_float(r.get(k))) for r in rows)]
    eps_claim = as_float(out.get("epsilon_claimed"))

    def draw() -> MplFigure:
        fig, ax = _axes((FIG_WIDTH, 3.8))
        T = [r["horizon"] for r in rows]
        for key, colour in zip(keys, ("tab:orange", "tab:blue", "tab:purple", "tab:green")):
            ax.plot(T, [as_float(r.get(key)) for r in rows], "o-", color=colour, label=f"{key} lower bound")
        if math.isfinite(eps_claim):
            ax.axhline(eps_claim, color="tab:red", ls="--", label="claimed eps")
        ax.set_xscale("log")
        ax.set_xlabel("horizon T")
        ax.set_ylabel("eps lower bound")
        ax.legend()
        return fig

    cap = (f"The witness pair rebuilt at each horizon and attacked afresh by {quoted_list(keys)}; each point is its own "
           "audit at the audit's confidence; the dashed line is the claim.")
    return Figure("fig-horizon", "Leakage against the horizon", cap, draw, tuple(keys))


def draw_figure(f: Figure) -> MplFigure:
    """A report figure drawn as the report draws it: a matplotlib figure whose every text is at least
    :data:`FONT_PT` points."""
    import matplotlib

    with matplotlib.rc_context(_RC):  # text sizes are read when each artist is made
        return f.draw()


def png_bytes(f: Figure) -> bytes:
    """The figure drawn (:func:`draw_figure`) as PNG bytes at :data:`DPI`."""
    import matplotlib

    with matplotlib.rc_context(_RC):
        fig = f.draw()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def png_base64(f: Figure) -> str:
    return base64.b64encode(png_bytes(f)).decode("ascii")
