"""Reviewer reports of ``dpaudit check policy``: a Markdown file and a self-contained HTML page.

One renderer for every protocol (table, view, interactive, local, joint, shuffle, the exact joint
enumeration, and an interrupted audit's partial findings). It reads only the typed findings
(:class:`dpaudit.runner.findings.Findings`, an :class:`dpaudit.api.Audit`, or their ``--json`` dict) and
builds the report as data: a verdict banner and a list of :class:`Section` objects made of a few kinds of
block (paragraph, table, figure, folded details, code). Two small writers turn that one list into
Markdown and into HTML, so both formats always say the same thing. The sections, in order:

* the verdict banner: claimed eps, the best lower bound and the part that gave it, the confidence, the gap,
  and in words what exceeded what (:func:`exceeded`: a bound above the eps the claim allows, a ledger that
  implies 0.2-zCDP against a 0.1-zCDP claim);
* the parts that ran (``parts``), the claim, and the ledger, rendered by its kind: per user (local),
  per round (table, view, interactive) or per round in a tree (joint, where every round feeds one node
  per tree level by design, so its usage figure says what the counts mean instead of raising an alarm);
* the exact figures (judged by the verdict or reported), each lower bound of the verdict with its test
  (threshold, FPR/FNR, counts, corrections), the bounds reported beside the verdict in their own section;
* the power, the protocol's own details rendered generically as data (key/value tables: a local audit's
  channel, lints and central sub-audit; the exact joint enumeration by view; anything a protocol adds),
  the neighbouring-pair search (folded), leakage against the horizon, the witness, the notes;
* how to reproduce (command, seed, parameters, versions as a table) and the verdict again.

Figures are drawn only for what ran, and each caption names only what it draws: the bounds of the verdict
against the claim; the claim's privacy profile (with a likelihood attack's estimated profile when one
ran); the Rényi divergences an attack or an exact figure measured against the claim's curve (no Rényi
figure when nothing measured one); the trade-off of every threshold test of the verdict against the
region the claim allows; beside it the ROC curve of every threshold test whose fresh scores the findings
keep (linear and log axes, with the AUC and the TPR at FPR 1e-3 and 1e-2, :func:`roc_summary`) and the two
sides' score histograms, as TensorFlow Privacy's and ML Privacy Meter's reports show them; the per-round
ledger's usage; eps against the horizon. Every figure's text is at least :data:`FONT_PT` points at the width
the page shows it (96 CSS px per inch of the figure, one figure per row). The HTML page has no JavaScript
and no external file (figures are base64 PNG), shows values as plain text (never JSON or Markdown
markup), wraps long tokens so that it fits a normal window, and has a print style sheet.

:func:`write_report` writes the Markdown, the HTML page and the Markdown's figures (PNG files beside it,
linked) atomically (all rendered, written to temporary files in the target folder, then renamed), and :func:`check_report_path` lets a caller refuse an unwritable path before an
audit starts.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field, fields
from glob import escape as glob_escape
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from dpaudit.errors import DPAuditError, check_output_file, shorten

__all__ = ["markdown_report", "html_report", "write_report", "check_report_path", "figures", "summary",
           "sections", "renyi_zero_notes", "exceeded", "roc_summary", "draw_figure", "Figure"]

_WORDS = {"violation": "VIOLATION", "consistent": "CONSISTENT", "inconclusive": "INCONCLUSIVE",
          "interrupted": "INTERRUPTED (no verdict)", "exact": "EXACT (no claim to judge)"}
_COLOURS = {"violation": "#b3261e", "consistent": "#1e7b34", "inconclusive": "#8a6100", "interrupted": "#555",
            "exact": "#1f4e99"}
#: what each part's kind means, in the table of the parts that ran
_ROLES = {"bound": "lower bound (enters the verdict)", "exact": "exact figure (no sampling)",
          "beside": "reported beside the verdict", "setup": "setup"}


# ---- reading the findings -----------------------------------------------------------------------

def _findings(out: Any) -> dict[str, Any]:
    """An :class:`~dpaudit.api.Audit`, a :class:`~dpaudit.runner.findings.Findings` or a findings dict
    (``--json``, any format dpaudit reads) as the JSON dict of the current format."""
    from dpaudit.runner.findings import Findings

    if hasattr(out, "to_dict"):
        return out.to_dict()
    if not isinstance(out, Mapping):
        raise DPAuditError(f"a report renders an Audit, Findings or a findings dict, got {type(out).__name__}.")
    return Findings.from_dict(out).to_dict()


def _core_keys() -> set[str]:
    from dpaudit.runner.findings import Findings

    return {f.name for f in fields(Findings)} | {"format"}


def _x(v: Any) -> float:
    """A JSON number (or "inf"/"nan" string, or None) as a float."""
    if v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def _f(x: Any, digits: int = 4) -> str:
    """A value as a table cell or inline text: floats to ``digits`` significant digits."""
    if x is None:
        return "n/a"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    if isinstance(x, (dict, list, tuple)):
        return _compact(x)
    return str(x)


def _compact(v: Any, limit: int = 320) -> str:
    """Any JSON value as one short line of plain text, never JSON: a dict as ``key value, key value``
    (a nested one in parentheses), a list as ``a, b, c`` (a nested one in parentheses; long lists elided),
    strings without quotes, floats to 4 digits; cut at ``limit``."""
    def plain(x: Any, top: bool) -> str:
        if isinstance(x, Mapping):
            body = ", ".join(f"{k} {plain(y, False)}" for k, y in x.items())
            return body if top else f"({body})"
        if isinstance(x, (list, tuple)):
            xs = [plain(y, False) for y in x[:8]] + ([f"... {len(x)} items"] if len(x) > 8 else [])
            body = ", ".join(xs)
            return body if top else f"({body})"
        return _f(x)

    s = plain(v, True) if isinstance(v, (Mapping, list, tuple)) else _f(v)
    return s if len(s) <= limit else s[: limit - 4] + " ..."


def _ledger_kind(led: Any) -> str | None:
    """``per-user`` (local), ``tree`` (per round, every round feeding one node per tree level by design),
    ``per-round`` (the central per-round dict), or None (no ledger)."""
    if not isinstance(led, Mapping):
        return None
    if led.get("kind") == "per-user":
        return "per-user"
    return "tree" if led.get("tree") else "per-round"


def _threshold_test(a: Mapping[str, Any]) -> bool:
    d = a.get("details") or {}
    return all(k in d for k in ("fpr", "fnr", "false_positives", "false_negatives", "n_fresh_per_side"))


def _point_estimate(a: Mapping[str, Any]) -> float | None:
    """An attack's eps point estimate: a likelihood attack's empirical profile, or a threshold test's eps
    from its raw rates (no confidence correction): where the whisker of the bound reaches."""
    d = a.get("details") or {}
    if "epsilon_point_estimate" in d:
        return _x(d["epsilon_point_estimate"])
    if _threshold_test(a):
        delta, fpr, fnr = _x(a.get("delta")), _x(d["fpr"]), _x(d["fnr"])
        cands = []
        for x, y in ((fpr, fnr), (fnr, fpr)):
            if 1 - delta - x > 0:
                cands.append(math.log((1 - delta - x) / y) if y > 0 else math.inf)
        return max([0.0] + cands)
    return None


def summary(out: Any) -> dict[str, Any]:
    """The numbers of the verdict banner: claimed eps, the best lower bound and the part that gave it
    (``best_attack``; ``best_is_exact`` when it is an exact figure), the confidence, the gap."""
    out = _findings(out)
    lower = out.get("epsilon_lower")
    cands = [(a["attack"], _x(a["epsilon_lower"]), False) for a in out.get("attacks") or []]
    cands += [(e["part"], _x(e["epsilon"]), True) for e in out.get("exact") or [] if e.get("judged", True)]
    named = (out.get("witness") or {}).get("attack")
    best = next((c for c in cands if c[0] == named), None)
    if best is None and cands and lower is not None:
        best = min(cands, key=lambda c: abs(c[1] - _x(lower)) if math.isfinite(c[1]) else math.inf)
    return {
        "verdict": out["verdict"],
        "word": _WORDS.get(out["verdict"], str(out["verdict"]).upper()),
        "sentence": f"{out['reason']}.",
        "claim": out.get("claim"),
        "epsilon_claimed": out.get("epsilon_claimed"),
        "epsilon_lower": lower,
        "best_attack": best[0] if best else None,
        "best_is_exact": bool(best and best[2]),
        "confidence": out.get("confidence"),
        "confidence_per_part": out.get("confidence_per_attack"),
        "parts_judged": sum(1 for p in out.get("parts") or [] if p.get("kind") == "bound"),
        "delta": out.get("delta"),
        "gap": out.get("gap"),
    }


def exceeded(out: Any) -> list[str]:
    """In words, each finding above the claim, what exceeded what: an attack's lower bound, an exact figure
    the verdict judges, a Rényi lower bound, and (reported beside the verdict) the guarantee the policy's
    own ledger implies. Empty when nothing exceeded the claim."""
    out = out if isinstance(out, dict) and "format" in out else _findings(out)
    claimed, claim = _x(out.get("epsilon_claimed")), out.get("claim")
    if not math.isfinite(claimed) or claim is None:
        return []
    delta, conf = _f(_x(out.get("delta"))), _f(out.get("confidence_per_attack") or out.get("confidence"))
    allows = f"the eps = {claimed:.4g} that the {claim} claim allows at delta = {delta}"
    said = []
    for a in out.get("attacks") or []:
        lo = _x(a.get("epsilon_lower"))
        if lo > claimed:
            said.append(f"The {a['attack']} attack's lower bound, eps >= {lo:.4g} at delta = {delta} (holding with "
                        f"confidence {_f(a.get('confidence', conf))}), exceeds {allows}.")
    for e in out.get("exact") or []:
        against = claimed if e.get("claimed") is None else _x(e["claimed"])
        if e.get("judged", True) and _x(e["epsilon"]) > against * (1 + 1e-9) + 1e-9:
            said.append(f"The {e['part']}, computed exactly ({e['method']}), gives eps = {_x(e['epsilon']):.6g}, above "
                        + (allows if e.get("claimed") is None else f"the claim's own eps = {against:.6g}") + ".")
    rvs = out.get("renyi_violation") or []
    if rvs:  # one sentence: the order with the largest excess, and how many orders exceed
        rv = max(rvs, key=lambda r: _x(r["D_alpha_lower"]) - _x(r["claimed"]))
        others = f" (and at {len(rvs) - 1} more order{'s' if len(rvs) > 2 else ''})" if len(rvs) > 1 else ""
        said.append(f"The likelihood attack's lower bound on the Rényi divergence of order {_f(rv['order'])}, "
                    f"D >= {_f(rv['D_alpha_lower'])}, exceeds the {_f(rv['claimed'])} the {claim} claim allows at that "
                    f"order{others}.")
    led = out.get("ledger")
    kind = _ledger_kind(led)
    if kind in ("per-round", "tree") and _x(led.get("implied_epsilon")) > claimed * (1 + 1e-9):
        judged = any("ledger" in e["part"] and e.get("judged", True) for e in out.get("exact") or [])
        said.append(f"The policy's own ledger, composed per round, implies {led.get('implied')} (eps = "
                    f"{_x(led['implied_epsilon']):.4g} at delta = {delta}) against the {claim} claim (eps = "
                    f"{claimed:.4g})" + ("." if judged else ": the noise it records does not pay for the claim "
                                         "(reported beside the verdict, which the attacks decide)."))
    return said


def renyi_zero_notes(out: Any) -> list[str]:
    """One line per attack whose Rényi lower bound is 0 at orders where its estimate is large, saying why."""
    notes = []
    for a in (out.get("attacks") or []) if isinstance(out, Mapping) else _findings(out).get("attacks") or []:
        r = (a.get("details") or {}).get("renyi")
        if not r or "lower" not in r:
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


# ---- the report as data -------------------------------------------------------------------------

@dataclass(frozen=True)
class Para:
    """A paragraph; ``**bold**`` and ```code``` are the only markup. ``note`` renders it as a note box."""

    text: str
    note: bool = False


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    num: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Figure:
    """A figure: ``draw`` returns a matplotlib figure (drawn only by the HTML writer); ``shows`` names
    the attacks, exact figures and ledger it draws (its caption names nothing else); ``wide`` spans the page."""

    id: str
    title: str
    caption: str
    draw: Callable[[], Any]
    shows: tuple[str, ...] = ()
    wide: bool = False


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Fold:
    """Collapsed in HTML (``<details>``), a heading in Markdown."""

    summary: str
    blocks: tuple[Any, ...]
    id: str = ""


@dataclass(frozen=True)
class Sub:
    """A titled subsection."""

    title: str
    blocks: tuple[Any, ...]


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    blocks: tuple[Any, ...] = field(default_factory=tuple)


def _kv(rows: Iterable[tuple[Any, Any]], header: tuple[str, str] = ("item", "value")) -> Table:
    return Table(header, tuple((k, v) for k, v in rows))


def _data(value: Any, depth: int = 0) -> list[Any]:
    """Any JSON value as blocks, generically: a list of records as one table (a row per record); a dict of
    records as one table (a column per record when there are a few, as history / data / central, else a
    row per record); any other dict's scalars and short values as one key/value table, its nested records
    and dicts as titled tables of their own (two levels deep, then one compact line). This is how protocol
    details and a part's other numbers are shown."""
    if _is_records(value):
        return [_records(value)]
    if isinstance(value, Mapping) and value and all(isinstance(v, Mapping) for v in value.values()):
        if len(value) <= 4:
            keys: list[str] = []
            for r in value.values():
                keys += [k for k in r if k not in keys]
            return [Table(("field", *map(str, value)), tuple((k, *(r.get(k, "") for r in value.values()))
                                                              for k in keys))]
        return [_records([{"": k, **r} for k, r in value.items()])]
    if isinstance(value, Mapping):
        flat, blocks = [], []
        for k, v in value.items():
            if depth < 2 and v and (_is_records(v) or isinstance(v, Mapping)):
                blocks.append(Sub(str(k), tuple(_data(v, depth + 1))))
            else:
                flat.append((k, v))
        return ([_kv(flat, ("key", "value"))] if flat else []) + blocks
    return [Para(_f(value))]


def _is_records(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(r, Mapping) for r in v)


def _records(rows: list[Mapping[str, Any]], limit: int = 200) -> Table:
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    num = frozenset(i for i, c in enumerate(cols)
                    if all(isinstance(r.get(c), (int, float)) and not isinstance(r.get(c), bool) for r in rows))
    body = tuple(tuple(r.get(c, "") for c in cols) for r in rows[:limit])
    if len(rows) > limit:
        body += ((f"... {len(rows) - limit} more rows in the JSON findings",) + ("",) * (len(cols) - 1),)
    return Table(tuple(cols), body, num)


def _c(x: Any) -> str:
    """Inline code (plain text if it holds a backtick)."""
    s = str(x)
    return s if "`" in s else f"`{s}`"


# ---- figures ------------------------------------------------------------------------------------

#: figure widths in inches; the HTML page shows a figure at 96 CSS px per inch (never scaled down in a
#: window 1,100 px or wider), so FONT_PT is the size a reader sees: at least 10 pt
FIG_WIDTH, WIDE_WIDTH = 7.6, 10.2
#: the smallest font of any figure (ticks, legends), and the PNG's pixels per inch (2x for sharp text)
FONT_PT, DPI = 10.5, 144
_RC = {"font.size": FONT_PT, "axes.titlesize": FONT_PT + 0.5, "axes.labelsize": FONT_PT + 0.5,
       "xtick.labelsize": FONT_PT, "ytick.labelsize": FONT_PT, "legend.fontsize": FONT_PT,
       "figure.titlesize": FONT_PT + 1}


def _axes(figsize: tuple[float, float], ncols: int = 1, layout: str = "tight") -> tuple[Any, Any]:
    """A matplotlib figure and its axes, without pyplot: no global state, no backend switched (a report
    drawn in a notebook leaves its plots alone)."""
    from matplotlib.figure import Figure as _MplFigure

    fig = _MplFigure(figsize=figsize, layout=layout)
    return fig, fig.subplots(1, ncols)


def _claim_allows(curves: Mapping[str, Any], fpr: Any) -> Any:
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


def _and(names: list[str]) -> str:
    names = [f"'{n}'" for n in names]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _fig_bounds(out: dict[str, Any]) -> Figure | None:
    attacks = out.get("attacks") or []
    exact = [e for e in out.get("exact") or [] if e.get("judged", True) and math.isfinite(_x(e["epsilon"]))]
    if not attacks and not exact:
        return None
    eps_claim, delta = _x(out.get("epsilon_claimed")), _x(out.get("delta"))

    def draw() -> Any:
        import numpy as np

        rows = [(a["attack"], _x(a["epsilon_lower"]), _x(_point_estimate(a)), False) for a in attacks]
        rows += [(e["part"] + " (exact)", _x(e["epsilon"]), math.nan, True) for e in exact]
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
        parts.append(f"The lower bound of each attack of the verdict ({_and([a['attack'] for a in attacks])}) at "
                     "its confidence (bar end), with a whisker up to its point estimate where it has one")
    if exact:
        parts.append(f"the exact figures the verdict judges ({_and([e['part'] for e in exact])}; diamonds, no "
                     "sampling)")
    cap = "; ".join(parts) + ". The dashed line is the claim: a bound right of it is a violation."
    title = "Lower bounds against the claim" if attacks else "Exact figures against the claim"
    return Figure("fig-bounds", title, cap[0].upper() + cap[1:], draw,
                  tuple(a["attack"] for a in attacks) + tuple(e["part"] for e in exact))


def _fig_profile(out: dict[str, Any]) -> Figure | None:
    curves = out.get("claim_curves")
    measured = [a for a in out.get("attacks") or [] if "profile" in (a.get("details") or {})]
    if not curves and not measured:
        return None
    delta, eps_claim, lo_eps = _x(out.get("delta")), _x(out.get("epsilon_claimed")), _x(out.get("epsilon_lower"))
    best = summary(out)["best_attack"]

    def draw() -> Any:
        import numpy as np

        fig, ax = _axes((FIG_WIDTH, 4.4))
        if curves:
            e = np.array([_x(v) for v in curves["profile"]["eps"]])
            d = np.array([_x(v) for v in curves["profile"]["delta"]])
            ok = np.isfinite(e)
            ax.plot(e[ok], d[ok], color="tab:red", lw=2, label=f"the claim ({out.get('claim')}): delta(eps)")
        for a, colour in zip(measured, ("tab:blue", "tab:cyan", "tab:purple")):
            p = a["details"]["profile"]
            e = np.array([_x(v) for v in p["eps"]])
            est = np.array([_x(v) for v in p["delta_estimate"]])
            lo = np.array([_x(v) for v in p["delta_lower"]])
            up = np.array([_x(v) for v in p["delta_upper"]])
            ax.plot(e[est > 0], est[est > 0], color=colour, label=f"{a['attack']}: estimate")
            band = up > 0
            ax.fill_between(e[band], np.where(lo[band] > 0, lo[band], np.nan), up[band], color=colour, alpha=0.2,
                            label=f"{a['attack']}: confidence band")
        ax.axhline(delta, color="gray", ls=":", lw=1)
        ax.annotate(f"delta = {delta:g}", (0, delta), xytext=(2, 2), textcoords="offset points",
                    color="gray")
        if math.isfinite(lo_eps):
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

    cap = "The delta(eps) the claim allows (red)"
    if measured:
        cap += (f", against the estimated profile of {_and([a['attack'] for a in measured])} with its confidence band "
                "(blue; points where a bound is 0 are not drawn)")
    cap += f". Marked at delta = {delta:g}: the claimed eps"
    if math.isfinite(lo_eps) and best:
        cap += f" and the best lower bound ('{best}')"
    cap += ". A lower bound above the red curve contradicts the claim."
    title = "Privacy profile" if measured else "The claim's privacy profile"
    return Figure("fig-profile", title, cap, draw, tuple(a["attack"] for a in measured) + ((best,) if best else ()))


def _fig_renyi(out: dict[str, Any]) -> Figure | None:
    measured = [a for a in out.get("attacks") or [] if "lower" in ((a.get("details") or {}).get("renyi") or {})]
    exact = [e for e in out.get("exact") or [] if "value" in ((e.get("details") or {}).get("renyi") or {})]
    if not measured and not exact:
        return None  # nothing measured a Rényi divergence: the claim's curve alone would be an empty panel
    curves = out.get("claim_curves")

    def draw() -> Any:
        import numpy as np

        fig, ax = _axes((FIG_WIDTH, 4.2))
        if curves:
            o = np.array([_x(v) for v in curves["renyi"]["orders"]])
            c = np.array([_x(v) for v in curves["renyi"]["claimed"]])
            ok = np.isfinite(c)
            if ok.any():
                ax.plot(o[ok], c[ok], color="tab:red", lw=2, label="the claim's D_alpha")
        for a in measured:
            r = a["details"]["renyi"]
            o = np.array([_x(v) for v in r["orders"]])
            est = np.array([_x(v) for v in r["estimate"]])
            lo = np.array([_x(v) for v in r["lower"]])
            ax.vlines(o, lo, np.maximum(est, lo), color="tab:blue", lw=2)
            ax.plot(o, lo, "_", color="tab:blue", ms=14, mew=3, label=f"{a['attack']}: lower bound")
            ax.plot(o, est, "o", color="tab:blue", mfc="white", label=f"{a['attack']}: estimate")
        for e in exact:
            r = e["details"]["renyi"]
            ax.plot([_x(v) for v in r["orders"]], [_x(v) for v in r["value"]], "D", color="tab:purple",
                    label=f"{e['part']}: exact")
        ax.set_xscale("log")
        ax.set_xlabel("order alpha")
        ax.set_ylabel("D_alpha")
        ax.legend()
        ax.grid(alpha=0.3)
        return fig

    what = []
    if measured:
        what.append(f"the D_alpha {_and([a['attack'] for a in measured])} measured: lower bounds (bars) with "
                    "whiskers up to the estimates (circles)")
    if exact:
        what.append(f"the exact D_alpha of {_and([e['part'] for e in exact])} (diamonds)")
    cap = ("The claim's Rényi curve (red) against " if curves else "") + "; ".join(what) + "."
    return Figure("fig-renyi", "Rényi divergence", cap[0].upper() + cap[1:], draw,
                  tuple(a["attack"] for a in measured) + tuple(e["part"] for e in exact))


def _fig_tradeoff(out: dict[str, Any]) -> Figure | None:
    tests = [a for a in out.get("attacks") or [] if _threshold_test(a)]
    if not tests:
        return None
    curves = out.get("claim_curves")

    def draw() -> Any:
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
            alpha = (1.0 - _x(a["confidence"])) / int(d.get("tests_corrected_for") or 1) / 2.0
            fx, fy = _x(d["fpr"]), _x(d["fnr"])
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
    cap = (f"Left: FNR against FPR of the threshold test of {_and(names)} on fresh samples (dotted: a coin flip), the "
           "observed rates (circle) and the box up to their upper confidence bounds (square, the bound's witness)"
           + ("; the whole box in the red region the claim rules out is a violation" if curves else "")
           + ". Right: the same on log axes, the smaller error rate against the power the larger one leaves, where "
           "small rates are visible.")
    return Figure("fig-tradeoff", "Threshold tests: trade-off", cap, draw, tuple(names), wide=True)


def _histogram(a: Mapping[str, Any]) -> Any:
    """An attack's binned fresh scores (:class:`~dpaudit.attacks.result.ScoreHistogram`), or None."""
    from dpaudit.attacks.result import ScoreHistogram

    h = a.get("scores")
    if not isinstance(h, Mapping):
        return None
    h = ScoreHistogram.from_dict(dict(h))
    return h if h.n0 > 0 and h.n1 > 0 else None


def _roc_tests(results: list[Mapping[str, Any]]) -> list[tuple[str, Any]]:
    return [(a["attack"], h) for a in results if (h := _histogram(a)) is not None]


#: the false-positive rates the ROC summary reads the TPR at (as TensorFlow Privacy's and ML Privacy Meter's reports)
ROC_FPRS = (1e-3, 1e-2)
_PALETTE = ("tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:olive", "tab:cyan")


def roc_summary(out: Any, beside: bool = False) -> list[dict[str, Any]]:
    """One row per threshold test whose fresh scores the findings keep: its AUC and TPR at the FPRs of
    :data:`ROC_FPRS` (None, "n/a" in the report, when a side has fewer fresh runs than 1 / FPR), computed
    exactly from the binned scores (the empirical ROC of the thresholds at the bin edges)."""
    out = out if isinstance(out, dict) and "format" in out else _findings(out)
    rows = []
    for name, h in _roc_tests(out.get("beside" if beside else "attacks") or []):
        rows.append({"attack": name, "statistic": h.statistic, "auc": h.auc(),
                     **{f"tpr_at_fpr_{f:g}": h.tpr_at(f) for f in ROC_FPRS}, "runs_per_side": h.n0,
                     "exact": h.exact, "thresholds": len(h.edges)})
    return rows


def _fig_roc(out: dict[str, Any], beside: bool = False) -> Figure | None:
    tests = _roc_tests(out.get("beside" if beside else "attacks") or [])
    if not tests:
        return None

    def draw() -> Any:
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
    cap = (f"The ROC curve of the threshold test of {_and(names)} on its fresh samples (every threshold of its "
           "statistic, not only the one the bound uses), on linear axes (left, with the AUC) and log axes (right, "
           "where the true-positive rate at a small false-positive rate is read; a false-positive rate of 0 is drawn "
           "at the left edge, below one false positive). " + ("Every fresh score sits on a bin edge, so this is the exact empirical ROC."
                                  if exact else "Scores are binned at edges fixed on the selection split, so this is "
                                  "the empirical ROC of the thresholds at those edges."))
    fid = "fig-roc-beside" if beside else "fig-roc"
    return Figure(fid, "Threshold tests: ROC curve" + (" (beside the verdict)" if beside else ""), cap, draw,
                  tuple(names), wide=True)


def _fig_scores(out: dict[str, Any], beside: bool = False) -> Figure | None:
    tests = _roc_tests(out.get("beside" if beside else "attacks") or [])[:4]
    if not tests:
        return None

    def draw() -> Any:
        import numpy as np

        n = len(tests)
        fig, axs = _axes((WIDE_WIDTH if n > 1 else FIG_WIDTH, 4.2), ncols=n, layout="constrained")
        for ax, (name, h) in zip(np.atleast_1d(axs), tests):
            e = np.array(h.edges)
            c0 = np.array(h.counts0, dtype=float) / h.n0
            c1 = np.array(h.counts1, dtype=float) / h.n1
            if h.exact:  # every score is an edge: one stem per value, the sides side by side
                c0, c1 = c0[:-1], c1[:-1]
                used = (c0 > 0) | (c1 > 0)
                x = e[used]
                gap = float(np.min(np.diff(x))) if x.size > 1 else 1.0
                for c, colour, shift, label in ((c0[used], "tab:blue", -0.12, "d (side 0)"),
                                                (c1[used], "tab:red", 0.12, "d' (side 1)")):
                    ax.vlines(x + shift * gap, 0, c, color=colour, lw=4, label=label)
                ax.set_ylim(0, max(c0.max(), c1.max()) * 1.12)
                ax.set_ylabel("share of fresh runs")
            else:  # the bins as stairs (bins narrower than 1e-6 of the range merged into the next one)
                span = float(e[-1] - e[0]) or 1.0
                keep = [0]
                for i in range(1, e.size):
                    if e[i] - e[keep[-1]] > 1e-6 * span:
                        keep.append(i)
                ke = e[keep]
                cell = np.searchsorted(ke, np.concatenate([e, [np.inf]]), side="left")
                m0, m1 = np.zeros(ke.size + 1), np.zeros(ke.size + 1)
                np.add.at(m0, cell, c0)
                np.add.at(m1, cell, c1)
                step = float(np.median(np.diff(ke))) if ke.size > 1 else 1.0
                x = np.concatenate([[ke[0] - step], ke, [ke[-1] + step]])
                width = np.diff(x)
                ax.stairs(m0 / width, x, color="tab:blue", lw=1.8, label="d (side 0)")
                ax.stairs(m1 / width, x, color="tab:red", lw=1.8, label="d' (side 1)")
                ax.set_ylabel("density of fresh runs")
            ax.set_xlabel(h.statistic)
            ax.set_title(name)
            ax.grid(alpha=0.3)
            ax.legend()
        return fig

    names = [n for n, _ in tests]
    cap = (f"The two sides' fresh scores of the threshold test of {_and(names)}: how the runs on d (blue) and on d' "
           "(red) spread over the values of its statistic (one bar per value where the score takes few values, else "
           "the density in each bin). Where the two part, the test tells the sides apart.")
    fid = "fig-scores-beside" if beside else "fig-scores"
    return Figure(fid, "Threshold tests: score histograms" + (" (beside the verdict)" if beside else ""), cap, draw,
                  tuple(names), wide=len(tests) > 1)


def _roc_table(out: dict[str, Any], beside: bool = False) -> Table | None:
    rows = roc_summary(out, beside)
    if not rows:
        return None
    return Table(("attack", "statistic", "AUC", "TPR at FPR 1e-3", "TPR at FPR 1e-2", "fresh runs per side", "ROC"),
                 tuple((r["attack"], r["statistic"], r["auc"], r["tpr_at_fpr_0.001"], r["tpr_at_fpr_0.01"],
                        r["runs_per_side"], "exact" if r["exact"] else f"at {r['thresholds']} bin edges")
                       for r in rows), frozenset({2, 3, 4, 5}))


def _fig_ledger(out: dict[str, Any]) -> Figure | None:
    led = out.get("ledger")
    kind = _ledger_kind(led)
    if kind not in ("per-round", "tree") or not led.get("usage_max_per_round"):
        return None

    def draw() -> Any:
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
    implied = f"{_f(led.get('implied'))} (eps = {_f(led.get('implied_epsilon'))})"
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


def _fig_horizon(out: dict[str, Any]) -> Figure | None:
    rows = out.get("leakage_vs_horizon")
    if not rows:
        return None
    keys = [k for k in rows[0] if k != "horizon" and any(math.isfinite(_x(r.get(k))) for r in rows)]
    eps_claim = _x(out.get("epsilon_claimed"))

    def draw() -> Any:
        fig, ax = _axes((FIG_WIDTH, 3.8))
        T = [r["horizon"] for r in rows]
        for key, colour in zip(keys, ("tab:orange", "tab:blue", "tab:purple", "tab:green")):
            ax.plot(T, [_x(r.get(key)) for r in rows], "o-", color=colour, label=f"{key} lower bound")
        if math.isfinite(eps_claim):
            ax.axhline(eps_claim, color="tab:red", ls="--", label="claimed eps")
        ax.set_xscale("log")
        ax.set_xlabel("horizon T")
        ax.set_ylabel("eps lower bound")
        ax.legend()
        return fig

    cap = (f"The witness pair rebuilt at each horizon and attacked afresh by {_and(keys)}; each point is its own "
           "audit at the audit's confidence; the dashed line is the claim.")
    return Figure("fig-horizon", "Leakage against the horizon", cap, draw, tuple(keys))


def draw_figure(f: Figure) -> Any:
    """A report figure drawn as the report draws it: a matplotlib figure whose every text is at least
    :data:`FONT_PT` points."""
    import matplotlib

    with matplotlib.rc_context(_RC):  # text sizes are read when each artist is made
        return f.draw()


def _png_bytes(f: Figure) -> bytes:
    """The figure drawn (:func:`draw_figure`) as PNG bytes at :data:`DPI`."""
    import matplotlib

    with matplotlib.rc_context(_RC):
        fig = f.draw()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _png(f: Figure) -> str:
    return base64.b64encode(_png_bytes(f)).decode("ascii")


def _css_width(f: Figure) -> int:
    """The width the HTML page shows a figure at: 96 CSS px per inch of the figure (so its points are points)."""
    return round((WIDE_WIDTH if f.wide else FIG_WIDTH) * 96)


# ---- the sections -------------------------------------------------------------------------------

def _parts_section(out: dict[str, Any]) -> Section:
    parts = out.get("parts") or []
    if not parts:
        return Section("parts", "What ran", (Para("No part of the audit finished." if out["verdict"] == "interrupted"
                                                   else "The findings record no part."),))
    lead = ("These parts finished before the interruption; the others did not run."
            if out["verdict"] == "interrupted" else "Every part of this audit, in the order it ran.")
    rows = tuple((p["name"], _ROLES.get(p["kind"], p["kind"]), p["summary"], _f(_x(p.get("seconds")), 3))
                 for p in parts)
    return Section("parts", "What ran", (Para(lead), Table(("part", "role", "what it did", "time (s)"), rows,
                                                           frozenset({3}))))


def _claim_section(out: dict[str, Any]) -> Section:
    if out.get("epsilon_claimed") is None:
        return Section("claim", "The claim", (Para("The policy states no claim, so there is nothing to judge; the "
                                                   "exact figures below stand alone."),))
    text = (f"The policy declares **{out['claim']}**. At delta = {_f(out['delta'])} this is eps = "
            f"**{_x(out['epsilon_claimed']):.6g}** ({out.get('claim_method') or 'conversion not recorded'}).")
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
    kind = _ledger_kind(led)
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
                    f"exact per-user eps = **{_f(led['epsilon'])}** ({led.get('method')}). {role}")
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
                f"per round (every release each round fed) they imply **{_f(led.get('implied'))}** (eps = "
                f"{_f(led.get('implied_epsilon'))} at the same delta). {usage} {role}")
        if _x(led.get("releases_without_fed")) > 0:
            text += f" {led['releases_without_fed']} releases carry no record of the rounds that fed them."
        labels = _LEDGER_LABELS["per-round"]
    known = {k for k, _ in labels} | {"kind", "tree", "usage_max_per_round", "usage_mean_per_round"}
    rows = [(label, led[k]) for k, label in labels if k in led]
    rows += [(k, v) for k, v in led.items() if k not in known]  # anything a ledger adds, as data
    fig = _fig_ledger(out)
    return Section("ledger", title, (Para(text), _kv(rows)) + ((fig,) if fig else ()))


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
            blocks.append(Sub(f"{e['part']} (exact)", (_kv(extra, ("field", "value")),)))
    if not out.get("attacks"):  # no sampling: the figures against the claim show the exact figures
        blocks[2:2] = _claim_figures(out)
    return Section("exact", "Exact figures", tuple(blocks))


def _test_blocks(a: Mapping[str, Any]) -> list[Any]:
    """One bound with its test: the pair, the statistic and threshold, the counts, the corrections;
    a likelihood attack's Rényi table; any other number the attack recorded, as data."""
    d, w = dict(a.get("details") or {}), dict(a.get("witness") or {})
    blocks: list[Any] = []
    if w.get("label"):
        blocks.append(Para(f"Pair: {w['label']}."))
    if _threshold_test(a):
        sel = d.pop("selection_bound", None)
        blocks.append(Para(
            f"Test: reject d when {_c(w.get('statistic', 'the score'))} {w.get('reject_when', '')} (threshold "
            f"{_f(w.get('threshold'))}), chosen on a separate selection split"
            + (f" (selection bound {_f(sel)})" if sel is not None else "") + f". On {d.pop('n_fresh_per_side')} fresh "
            f"views per side: {d.pop('false_positives')} false positives (FPR {_f(d.pop('fpr'))}), "
            f"{d.pop('false_negatives')} false negatives (FNR {_f(d.pop('fnr'))}); Clopper-Pearson bounds at "
            f"{_f(a['confidence'])} confidence, corrected for {d.pop('tests_corrected_for', 1)} test(s)."))
    if "renyi" in d:
        r = d.pop("renyi")
        blocks.append(Para(
            f"Exact privacy loss of {a['samples']} runs from the ledger: mean loss (KL) {_f(d.pop('mean_loss_kl', None))}, "
            f"largest {_f(d.pop('max_loss', None))}; point estimate of eps(delta) "
            f"{_f(d.pop('epsilon_point_estimate', None))}; tests corrected for: {d.pop('tests_corrected_for', 'n/a')}."))
        if "lower" in r:
            blocks.append(Table(("order alpha", "D_alpha estimate", "D_alpha lower bound"),
                                tuple(zip(r["orders"], r["estimate"], r["lower"])), frozenset({0, 1, 2})))
        for rv in d.pop("renyi_violation", None) or []:
            blocks.append(Para(f"Rényi violation at order {_f(rv['order'])}: D_alpha >= {_f(rv['D_alpha_lower'])} > "
                               f"claimed {_f(rv['claimed'])}.", note=True))
        blocks += [Para(n, note=True) for n in renyi_zero_notes({"attacks": [a]})]
    d.pop("profile", None)  # drawn in the privacy-profile figure
    lists = {k: v for k, v in d.items() if isinstance(v, list) and v and all(isinstance(r, Mapping) for r in v)}
    rest = {k: v for k, v in d.items() if k not in lists}
    if rest:
        blocks.append(_kv(rest.items(), ("detail", "value")))
    for k, v in lists.items():
        blocks.append(Fold(f"{a['attack']}: {k} ({len(v)} candidates, each evaluated on the same fresh samples)",
                           (_records(v),)))
    return blocks


def _bound_table(results: list[Mapping[str, Any]]) -> Table:
    return Table(("attack", "eps lower bound", "point estimate", "delta", "confidence", "samples", "time (s)"),
                 tuple((a["attack"], a["epsilon_lower"], _point_estimate(a), a["delta"], a["confidence"], a["samples"],
                        _f(_x(a.get("seconds")), 3)) for a in results), frozenset(range(1, 7)))


def _claim_figures(out: dict[str, Any]) -> list[Figure]:
    return [f for f in (_fig_bounds(out), _fig_profile(out), _fig_renyi(out), _fig_tradeoff(out), _fig_roc(out),
                        _fig_scores(out)) if f]


def _bounds_section(out: dict[str, Any]) -> Section | None:
    attacks = out.get("attacks") or []
    if not attacks:
        return None
    s = summary(out)
    n = s["parts_judged"] or len(attacks)
    split = (f", split equally over the {n} parts whose bounds enter the verdict ({_f(s['confidence_per_part'])} each)"
             if s["confidence_per_part"] is not None and n > 1 else "")
    roc = _roc_table(out)
    blocks: list[Any] = [Para(f"Overall confidence {_f(out['confidence'])}{split}; each attack corrects for every "
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
    blocks += [b for b in (_fig_roc(out, True), _fig_scores(out, True), _roc_table(out, True)) if b is not None]
    for a in beside:
        blocks.append(Sub(f"{a['attack']} (beside the verdict)", tuple(_test_blocks(a))))
    return Section("beside", "Bounds beside the verdict (not judged)", tuple(blocks))


def _power_section(out: dict[str, Any]) -> Section | None:
    pw = out.get("power")
    if not pw:
        return None
    used = pw.get("fresh_runs_used")
    text = (f"{pw.get('pairs_tried')} neighbouring pairs tried; with {pw.get('fresh_runs_per_side')} fresh runs per "
            f"side the black-box attack can show eps from {_f(pw.get('smallest_detectable'))} up to "
            f"{_f(pw.get('largest_bound'))}" + (f"; it showed eps >= {_f(pw['shown'])}" if pw.get("shown") is not None
                                                 else "")
            + (f" after {used} of them (it stopped once settled; see below)." if used is not None else "."))
    blocks: list[Any] = [Para(text)]
    if pw.get("note"):
        blocks.append(Para(pw["note"], note=True))
    if pw.get("details"):
        blocks += _data(pw["details"])
    return Section("power", "Power", tuple(blocks))


#: extra keys another section renders (or that only the reproduction table shows)
_SHOWN_ELSEWHERE = {"claim_curves", "search", "leakage_vs_horizon", "renyi_violation", "workers", "estimate",
                    "checkpoint", "report", "n_arms", "action_space", "horizon_reason", "confidence_per_attack"}
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
    return {**v, "attacks": f"the same results as {_and(names)} in the sections above"}


def _details_section(out: dict[str, Any]) -> Section | None:
    extra = {k: v for k, v in out.items() if k not in _core_keys() and k not in _SHOWN_ELSEWHERE}
    if not extra:
        return None
    facts = [(k, v) for k, v in extra.items() if not isinstance(v, (Mapping, list)) or not v]
    facts += [(k, v) for k, v in extra.items() if isinstance(v, list) and v and not isinstance(v[0], Mapping)]
    blocks: list[Any] = [Para(f"What the {out.get('protocol')} protocol's audit recorded beyond the sections above, "
                              "as data (the same keys as the JSON findings).")]
    if facts:
        blocks.append(_kv(facts, ("key", "value")))
    for k, v in extra.items():
        if (isinstance(v, Mapping) and v) or (isinstance(v, list) and v and isinstance(v[0], Mapping)):
            blocks.append(Sub(_DETAIL_TITLES.get(k, k), tuple(_data(_named_not_repeated(v, out)))))
    return Section("details", "Protocol details", tuple(blocks))


def _search_section(out: dict[str, Any]) -> Section | None:
    rows = out.get("search")
    if not rows:
        return None
    when = " before the interruption" if out["verdict"] == "interrupted" else ""
    return Section("search", "Neighbouring-pair search (ranking on small samples)", (
        Fold(f"{len(rows)} candidate pairs ranked on small samples{when}; the best went on to the attacks",
             (_records(rows),), id="search"),))


def _horizon_section(out: dict[str, Any]) -> Section | None:
    rows = out.get("leakage_vs_horizon")
    if not rows:
        return None
    fig = _fig_horizon(out)
    return Section("horizon", "Leakage against the horizon", (
        Para(f"The witness pair rebuilt at each horizon, each its own audit at confidence {_f(out.get('confidence'))}."),
        _records(rows)) + ((fig,) if fig else ()))


def _witness_section(out: dict[str, Any]) -> Section | None:
    w = dict(out.get("witness") or {})
    if not w:
        return None
    by = w.pop("attack", None)
    return Section("witness", "Witness", ((Para(f"Found by: {by}.") if by else Para("The verdict's witness.")),
                                           _kv(w.items(), ("field", "value"))))


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
             ("ran on", out.get("workers", "this process")), ("run time", f"{_x(out.get('seconds')):.1f} s")]
    if out.get("estimate"):
        rows.append(("estimated beforehand", f"{_x(out['estimate'].get('seconds')):.1f} s: {out['estimate'].get('how')}"))
    if out.get("checkpoint"):
        rows.append(("checkpoint", out["checkpoint"]))
    versions = Table(("package", "version"), tuple((k, v) for k, v in (out.get("versions") or {}).items()))
    return Section("reproduce", "How to reproduce", (
        Code(out.get("command") or "(called from Python; the command was not recorded)"), _kv(rows), versions))


def _verdict_section(out: dict[str, Any]) -> Section:
    s = summary(out)
    return Section("verdict-again", "Verdict", (Para(f"**{s['word']}**: {s['sentence']}"),))


#: the report, in order: each builder reads the findings and returns a section (or None when it has nothing)
SECTIONS: tuple[Callable[[dict[str, Any]], Section | None], ...] = (
    _parts_section, _claim_section, _ledger_section, _exact_section, _bounds_section, _beside_section,
    _power_section, _horizon_section, _details_section, _search_section, _witness_section, _notes_section,
    _reproduce_section, _verdict_section)


def sections(out: Any) -> list[Section]:
    """The report's sections (after the banner) as data, for any protocol's findings."""
    out = _findings(out)
    return [s for s in (build(out) for build in SECTIONS) if s is not None]


def _walk(blocks: Iterable[Any]) -> Iterable[Any]:
    for b in blocks:
        yield b
        if isinstance(b, (Fold, Sub)):
            yield from _walk(b.blocks)


def figures(out: Any, draw: bool = True) -> list[dict[str, Any]]:
    """Every figure of the report: ``{"id", "title", "caption", "shows"}`` (``shows``: the attacks, exact
    figures or ledger it draws), and ``"png"`` (base64) when ``draw``."""
    return [{"id": f.id, "title": f.title, "caption": f.caption, "shows": list(f.shows),
             **({"png": _png(f)} if draw else {})}
            for s in sections(out) for f in _walk(s.blocks) if isinstance(f, Figure)]


# ---- Markdown -----------------------------------------------------------------------------------

def _md_cell(x: Any) -> str:
    return _f(x).replace("|", "\\|").replace("\n", " ")


def _md_blocks(blocks: Iterable[Any], level: int, files: Mapping[str, str] | None = None) -> list[str]:
    lines: list[str] = []
    for b in blocks:
        if isinstance(b, Para):
            lines += [f"> {b.text}" if b.note else b.text, ""]
        elif isinstance(b, Table):
            lines += ["| " + " | ".join(_md_cell(h) for h in b.header) + " |",
                      "| " + " | ".join("---:" if i in b.num else "---" for i in range(len(b.header))) + " |"]
            lines += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in b.rows] + [""]
        elif isinstance(b, Figure):
            if files and b.id in files:
                lines += [f"![{b.title}]({files[b.id]})", "", f"*Figure: **{b.title}.** {b.caption}*", ""]
            else:
                lines += [f"> Figure (in the HTML page beside this file): **{b.title}.** {b.caption}", ""]
        elif isinstance(b, Code):
            lines += ["```", b.text, "```", ""]
        elif isinstance(b, (Fold, Sub)):
            lines += ["#" * level + f" {b.summary if isinstance(b, Fold) else b.title}", ""]
            lines += _md_blocks(b.blocks, min(level + 1, 6), files)
    return lines


def markdown_report(out: Any, figure_files: Mapping[str, str] | None = None) -> str:
    """The report as Markdown, verdict first (the same sections as the HTML page). With ``figure_files``
    (figure id -> PNG file name beside the Markdown, as :func:`write_report` writes them) each figure is an
    image link with its caption; without, the figure is named and the HTML page shows it."""
    out = _findings(out)
    s = summary(out)
    lines = [f"# dpaudit check: `{out['policy']}`", "", f"**{s['word']}**: {s['sentence']}", ""]
    lines += ["| " + " | ".join(k for k, _, _ in _banner_numbers(s)) + " |",
              "| " + " | ".join("---" for _ in _banner_numbers(s)) + " |",
              "| " + " | ".join(_md_cell(f"{v} ({sub})" if sub else v) for _, v, sub in _banner_numbers(s)) + " |", ""]
    lines += [f"- {x}" for x in exceeded(out)] + ([""] if exceeded(out) else [])
    for sec in sections(out):
        lines += [f"## {sec.title}", ""] + _md_blocks(sec.blocks, 3, figure_files)
    return "\n".join(lines).rstrip() + "\n"


# ---- HTML ---------------------------------------------------------------------------------------

_CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:64em;margin:1.5em auto;padding:0 1em;
color:#1b1b1b;line-height:1.45;overflow-wrap:anywhere}
.banner{border-left:.6em solid var(--c);background:color-mix(in srgb,var(--c) 9%,white);padding:.8em 1.2em;
border-radius:.3em;margin-bottom:1.2em}
.banner h1{margin:0 0 .2em 0;font-size:1.5em;color:var(--c)}
.banner p.sentence{margin:.3em 0 .7em 0;font-size:1.05em}
.numbers{display:flex;flex-wrap:wrap;gap:.6em 2em;margin:0}
.numbers div{min-width:9em;max-width:100%}.numbers dt{font-size:.8em;color:#555;text-transform:uppercase;letter-spacing:.03em}
.numbers dd{margin:0}.numbers dd.value{font-size:1.35em;font-weight:600}.numbers dd.sub{font-size:.8em;color:#555}
section{margin-top:1.6em}
h2{border-bottom:1px solid #ddd;padding-bottom:.15em}
figure{margin:1em 0;break-inside:avoid;page-break-inside:avoid;min-width:0}
figure img{max-width:100%;height:auto;border:1px solid #ddd}
figure a.zoom{cursor:zoom-in}
figcaption{font-size:.9em;color:#444}
.figs{display:block}
ul.exceeded{margin:.2em 0 .7em 0;padding-left:1.2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em;max-width:100%}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top;overflow-wrap:break-word}
th{background:#f2f2f2} td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9em;overflow-wrap:anywhere}
pre{background:#f6f6f6;padding:.6em;white-space:pre-wrap}
.note{background:#fff8e1;border-left:.3em solid #e0b000;padding:.4em .8em;margin:.4em 0}
details{margin:.8em 0} summary{cursor:pointer;font-weight:600}
@media print{body{max-width:none;margin:0;font-size:10pt}.banner,.note,th{-webkit-print-color-adjust:exact;
print-color-adjust:exact}details>summary{list-style:none}details::details-content{content-visibility:visible;
display:block}h2,h3{break-after:avoid}table,figure{break-inside:avoid}}
"""


def _inline(text: str) -> str:
    """Escape, then the paragraph markup: ``**bold**`` and ```code```."""
    t = html.escape(text, quote=False)
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", t)


def _e(x: Any) -> str:
    return html.escape(str(x))


def _breakable(text: str, run: int = 24) -> str:
    """Escaped text with a line-break opportunity (``<wbr>``) inside every token longer than ``run``
    characters (after punctuation, else every ``run`` characters), so that a table cell holding a path,
    a hash or compact JSON wraps instead of widening the page."""
    def cut(token: str) -> str:
        if len(token) <= run:
            return html.escape(token)
        pieces = re.findall(r"[^/_,.:;=)\]}-]*[/_,.:;=)\]}-]?", token)
        out = []
        for p in pieces:
            out += [p[i:i + run] for i in range(0, len(p), run)] or [p]
        return "<wbr>".join(html.escape(p) for p in out if p)

    return "".join(cut(t) for t in re.split(r"(\s+)", text))


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in t.header)
    body = "".join("<tr>" + "".join(f"<td class='num'>{_breakable(_f(c))}</td>" if i in t.num else
                                    f"<td>{_breakable(_f(c))}</td>" for i, c in enumerate(r)) + "</tr>"
                   for r in t.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _html_figure(f: Figure, pngs: Mapping[str, bytes] | None = None) -> str:
    data = base64.b64encode(pngs[f.id]).decode("ascii") if pngs and f.id in pngs else _png(f)
    return (f"<figure id='{_e(f.id)}'{' class=wide' if f.wide else ''}><img alt='{_e(f.title)}' "
            f"width='{_css_width(f)}' src='data:image/png;base64,{data}'><figcaption><b>{_e(f.title)}.</b> "
            f"{_e(f.caption)}</figcaption></figure>")


def _html_blocks(blocks: Iterable[Any], level: int, pngs: Mapping[str, bytes] | None = None) -> list[str]:
    out: list[str] = []
    figs: list[str] = []
    for b in list(blocks) + [None]:
        if isinstance(b, Figure):
            figs.append(_html_figure(b, pngs))
            continue
        if figs:  # consecutive figures share one grid
            out.append("<div class='figs'>" + "".join(figs) + "</div>")
            figs = []
        if isinstance(b, Para):
            out.append(f"<p class='note'>{_inline(b.text)}</p>" if b.note else f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Table):
            out.append(_html_table(b))
        elif isinstance(b, Code):
            out.append(f"<pre>{_e(b.text)}</pre>")
        elif isinstance(b, Fold):
            ident = f" id='{_e(b.id)}'" if b.id else ""
            out.append(f"<details{ident}><summary>{_e(b.summary)}</summary>"
                       + "".join(_html_blocks(b.blocks, level + 1, pngs)) + "</details>")
        elif isinstance(b, Sub):
            out.append(f"<h{level}>{_e(b.title)}</h{level}>" + "".join(_html_blocks(b.blocks, min(level + 1, 6), pngs)))
    return out


def _banner_numbers(s: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(label, value, small print) of the banner."""
    nums = []
    if s["epsilon_claimed"] is not None:
        nums.append(("claimed eps", f"{_x(s['epsilon_claimed']):.4g}", f"{s['claim']} at delta = {_f(s['delta'])}"))
    if s["epsilon_lower"] is not None:
        label = "exact eps" if s["verdict"] == "exact" else (
            "best lower bound so far" if s["verdict"] == "interrupted" else "best lower bound")
        src = f"{s['best_attack']} (exact)" if s["best_is_exact"] else (s["best_attack"] or "")
        nums.append((label, f"{_x(s['epsilon_lower']):.4g}", src))
    if s["best_is_exact"] and not s["parts_judged"]:
        nums.append(("confidence", "exact", "no sampling"))
    elif s["confidence"] is not None:
        split = (f"overall, split over {s['parts_judged']} parts ({_f(s['confidence_per_part'])} each)"
                 if s["parts_judged"] > 1 and s["confidence_per_part"] is not None else "overall")
        nums.append(("confidence", _f(s["confidence"]), split))
    if s["gap"] is not None:
        nums.append(("gap", f"{_x(s['gap']):.4g}", "claimed minus lower bound"))
    return nums


def html_report(out: Any, pngs: Mapping[str, bytes] | None = None) -> str:
    """A self-contained HTML page: verdict banner, sections with tables and figures; no JavaScript, no
    external file; long tokens wrap, so it fits a normal window; a print style sheet. ``pngs`` (figure id
    -> PNG bytes) reuses figures already drawn; the others are drawn here."""
    out = _findings(out)
    s = summary(out)
    colour = _COLOURS.get(out["verdict"], "#555")
    dl = "".join(f"<div><dt>{_e(k)}</dt><dd class='value' id='num-{_e(k.replace(' ', '-'))}'>{_e(v)}</dd>"
                 f"<dd class='sub'>{_e(sub)}</dd></div>" for k, v, sub in _banner_numbers(s))
    page = [
        "<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>dpaudit: {_e(s['word'])} - {_e(out['policy'])}</title><style>{_CSS}</style></head><body>",
        f"<header class='banner' id='verdict' style='--c:{colour}'>",
        f"<h1>{_e(s['word'])}: <code>{_e(out['policy'])}</code></h1>",
        f"<p class='sentence' id='verdict-sentence'>{_e(s['sentence'])}</p>",
    ]
    said = exceeded(out)
    if said:
        page.append("<ul class='exceeded' id='exceeded'>" + "".join(f"<li>{_e(x)}</li>" for x in said) + "</ul>")
    page.append(f"<dl class='numbers'>{dl}</dl></header>")
    for sec in sections(out):
        page.append(f"<section id='{_e(sec.id)}'><h2>{_e(sec.title)}</h2>"
                    + "".join(_html_blocks(sec.blocks, 3, pngs)) + "</section>")
    page.append("</body></html>")
    return "\n".join(page)


# ---- writing ------------------------------------------------------------------------------------

def check_report_path(path: str | Path, flag: str = "--report") -> list[Path]:
    """Refuse a report path that is not ``*.md``, or that cannot be written (a folder, a folder that
    cannot be written, a name too long for the file system: :func:`dpaudit.errors.check_output_file`),
    before any work; return the two paths (Markdown, HTML) the report will have. ``flag`` names the
    argument in the sentence (``Audit.write`` says ``path``)."""
    if not isinstance(path, (str, os.PathLike)) or Path(path).suffix != ".md":
        shown = shorten(str(path) if isinstance(path, os.PathLike) else path, 160)
        raise DPAuditError(f"{flag} must name a Markdown file ending in .md, got {shown}.")
    path = Path(path)
    # the longest name a figure's PNG beside the Markdown gets (write_report), probed with the pair
    check_output_file(path.with_name(f"{path.stem}.fig-tradeoff.png"), "the report", flag)
    return [check_output_file(p, "the report", flag) for p in (path, path.with_suffix(".html"))]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_report(out: Any, path: str | Path, flag: str = "--report") -> list[Path]:
    """Write ``path`` (Markdown), the HTML page beside it and the Markdown's figures as PNG files beside
    both (``stem.fig-roc.png`` ..., linked from the Markdown), for any protocol's findings, as one set:
    everything is rendered first (each figure drawn once, for both formats), written to temporary files in
    the same folder, then renamed into place (no half-written report, no Markdown without its page or its
    figures). PNG files a previous report of the same name left and this one does not draw are removed.
    Returns the Markdown, the HTML and the PNG paths."""
    paths = check_report_path(path, flag)
    out = _findings(out)
    md_path = paths[0]
    drawn = {f.id: f for s in sections(out) for f in _walk(s.blocks) if isinstance(f, Figure)}
    pngs = {fid: _png_bytes(f) for fid, f in drawn.items()}
    names = {fid: f"{md_path.stem}.{fid}.png" for fid in drawn}
    targets: list[tuple[Path, bytes]] = [(md_path, markdown_report(out, names).encode("utf-8")),
                                         (paths[1], html_report(out, pngs).encode("utf-8"))]
    targets += [(md_path.parent / names[fid], data) for fid, data in pngs.items()]
    temps: list[str] = []
    try:
        for p, data in targets:
            fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
            temps.append(tmp)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; a report is an ordinary file
        for tmp, (p, _) in zip(temps, targets):
            os.replace(tmp, p)
    except OSError as exc:
        raise DPAuditError(f"cannot write the report to {str(paths[0])!r}: {exc.strerror or exc}.") from None
    finally:
        for tmp in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
    keep = {p.name for p, _ in targets}
    for old in md_path.parent.glob(f"{glob_escape(md_path.stem)}.fig-*.png"):
        if old.name not in keep and re.fullmatch(re.escape(md_path.stem) + r"\.fig-[a-z-]+\.png", old.name):
            try:
                old.unlink()
            except OSError:
                pass
    return [p for p, _ in targets]
