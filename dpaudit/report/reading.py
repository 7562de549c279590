"""Reading the findings: the dict every renderer reads (:func:`findings_dict`), the numbers of the verdict
banner (:func:`summary`, :func:`banner_numbers`), what exceeded the claim in words (:func:`exceeded`), the
upper side in words (:func:`upper_sentences`: the bracket [lower, upper] and a claim looser than what dpaudit
proves), the notes on Rényi bounds of 0 (:func:`renyi_zero_notes`), and the small formatting helpers (:func:`fmt`,
:func:`as_float`, :func:`quoted_list`) every other module of the report uses.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from dpaudit.errors import DPAuditError

_WORDS = {"violation": "VIOLATION", "consistent": "CONSISTENT", "inconclusive": "INCONCLUSIVE",
          "interrupted": "INTERRUPTED (no verdict)", "exact": "EXACT (no claim to judge)"}


def findings_dict(out: Any) -> dict[str, Any]:
    """An :class:`~dpaudit.api.Audit`, a :class:`~dpaudit.runner.findings.Findings` or a findings dict
    (``--json``, any format dpaudit reads) as the JSON dict of the current format."""
    from dpaudit.runner.findings import Findings

    if hasattr(out, "to_dict"):
        return out.to_dict()
    if not isinstance(out, Mapping):
        raise DPAuditError(f"a report renders an Audit, Findings or a findings dict, got {type(out).__name__}.")
    return Findings.from_dict(out).to_dict()


def as_float(v: Any) -> float:
    """A JSON number (or "inf"/"nan" string, or None) as a float."""
    if v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def fmt(x: Any, digits: int = 4) -> str:
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
        return fmt(x)

    s = plain(v, True) if isinstance(v, (Mapping, list, tuple)) else fmt(v)
    return s if len(s) <= limit else s[: limit - 4] + " ..."


def quoted_list(names: list[str]) -> str:
    """Names quoted and joined for a sentence: ``'a'``, ``'a' and 'b'``, ``'a', 'b' and 'c'``."""
    names = [f"'{n}'" for n in names]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def ledger_kind(led: Any) -> str | None:
    """``per-user`` (local), ``tree`` (per round, every round feeding one node per tree level by design),
    ``per-round`` (the central per-round dict), or None (no ledger)."""
    if not isinstance(led, Mapping):
        return None
    if led.get("kind") == "per-user":
        return "per-user"
    return "tree" if led.get("tree") else "per-round"


def is_threshold_test(a: Mapping[str, Any]) -> bool:
    d = a.get("details") or {}
    return all(k in d for k in ("fpr", "fnr", "false_positives", "false_negatives", "n_fresh_per_side"))


def point_estimate(a: Mapping[str, Any]) -> float | None:
    """An attack's eps point estimate: a likelihood attack's empirical profile, or a threshold test's eps
    from its raw rates (no confidence correction): where the whisker of the bound reaches."""
    d = a.get("details") or {}
    if "epsilon_point_estimate" in d:
        return as_float(d["epsilon_point_estimate"])
    if is_threshold_test(a):
        delta, fpr, fnr = as_float(a.get("delta")), as_float(d["fpr"]), as_float(d["fnr"])
        cands = []
        for x, y in ((fpr, fnr), (fnr, fpr)):
            if 1 - delta - x > 0:
                cands.append(math.log((1 - delta - x) / y) if y > 0 else math.inf)
        return max([0.0] + cands)
    return None


def summary(out: Any) -> dict[str, Any]:
    """The numbers of the verdict banner: claimed eps, the best lower bound and the part that gave it
    (``best_attack``; ``best_is_exact`` when it is an exact figure), the confidence, the gap."""
    out = findings_dict(out)
    lower = out.get("epsilon_lower")
    cands = [(a["attack"], as_float(a["epsilon_lower"]), False) for a in out.get("attacks") or []]
    cands += [(e["part"], as_float(e["epsilon"]), True) for e in out.get("exact") or [] if e.get("judged", True)]
    named = (out.get("witness") or {}).get("attack")
    best = next((c for c in cands if c[0] == named), None)
    if best is None and cands and lower is not None:
        best = min(cands, key=lambda c: abs(c[1] - as_float(lower)) if math.isfinite(c[1]) else math.inf)
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
        "upper": upper_reading(out),
    }


#: a claim above the upper bound by more than this (relative) is "looser than what dpaudit proves"
LOOSE = 1e-3


def upper_reading(out: Mapping[str, Any]) -> dict[str, Any] | None:
    """The upper side of the findings: ``epsilon`` (None: nothing provable), ``short`` (how, in a few words),
    ``method``, ``source`` (the ledger, the shuffle accounting, an exact enumeration), ``refuted`` (the sentence
    when a lower bound exceeds it), ``reason`` (why there is none), ``assumptions``. None in findings without it."""
    up = out.get("upper")
    if not isinstance(up, Mapping):
        return None
    det = up.get("details") or {}
    eps = up.get("epsilon")
    return {"epsilon": None if eps is None else as_float(eps), "method": up.get("method") or "",
            "short": det.get("short") or up.get("method") or "", "source": str(det.get("source") or "policy").split(",")[0],
            "refuted": up.get("refuted"), "reason": det.get("reason"), "assumptions": list(up.get("assumptions") or []),
            "delta": as_float(up.get("delta"))}


def upper_sentences(out: Any, *, banner: bool = False) -> list[str]:
    """The upper side in words: the bracket [lower, upper] the audit puts the truth in, and whether the claim is
    looser than what dpaudit proves (or above it); a refuted figure is said to be no proof, and evidence of a
    bug. ``banner``: only what a reviewer must see first (a claim looser than provable, above it, or refuted)."""
    out = out if isinstance(out, dict) and "format" in out else findings_dict(out)
    u = upper_reading(out)
    if u is None:
        return []
    delta = fmt(as_float(out.get("delta")))
    if u["refuted"]:
        return [f"No upper bound is proved: {u['refuted']}."]
    if u["epsilon"] is None:
        return [] if banner else [f"No upper bound: {u['reason'] or 'nothing dpaudit can prove beyond the claim'}."]
    up, claimed = u["epsilon"], as_float(out.get("epsilon_claimed"))
    lower = out.get("epsilon_lower")
    said = []
    if not banner:
        said.append(f"dpaudit proves eps <= {up:.4g} at delta = {delta} from the {u['source']} ({u['method']})"
                    + (f", so the audit brackets the true eps in [{as_float(lower):.4g}, {up:.4g}]: the lower bound holds "
                       "at the audit's confidence, the upper bound under the assumptions below." if lower is not None
                       else "."))
    if math.isfinite(claimed) and claimed > up * (1 + LOOSE):
        said.append(f"The claim eps = {claimed:.4g} is looser than what dpaudit proves from the {u['source']}, "
                    f"{up:.4g} ({u['short']})" + (f"; the audit brackets the true eps in [{as_float(lower):.4g}, {up:.4g}]."
                                                  if banner and lower is not None else "."))
    elif math.isfinite(claimed) and up > claimed * (1 + LOOSE):
        said.append(f"What dpaudit can prove from the {u['source']}, eps <= {up:.4g} ({u['short']}), is above the "
                    f"claim eps = {claimed:.4g}: the claim rests on an analysis this composition does not reproduce, "
                    "or is wrong (the verdict judges the claim by its own tests).")
    return said


def banner_numbers(s: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(label, value, small print) of the banner."""
    nums = []
    if s["epsilon_claimed"] is not None:
        nums.append(("claimed eps", f"{as_float(s['epsilon_claimed']):.4g}", f"{s['claim']} at delta = {fmt(s['delta'])}"))
    if s["epsilon_lower"] is not None:
        label = "exact eps" if s["verdict"] == "exact" else (
            "best lower bound so far" if s["verdict"] == "interrupted" else "best lower bound")
        src = f"{s['best_attack']} (exact)" if s["best_is_exact"] else (s["best_attack"] or "")
        nums.append((label, f"{as_float(s['epsilon_lower']):.4g}", src))
    if s["best_is_exact"] and not s["parts_judged"]:
        nums.append(("confidence", "exact", "no sampling"))
    elif s["confidence"] is not None:
        split = (f"overall, split over {s['parts_judged']} parts ({fmt(s['confidence_per_part'])} each)"
                 if s["parts_judged"] > 1 and s["confidence_per_part"] is not None else "overall")
        nums.append(("confidence", fmt(s["confidence"]), split))
    if s["gap"] is not None:
        nums.append(("gap", f"{as_float(s['gap']):.4g}", "claimed minus lower bound"))
    u = s.get("upper")
    if u is not None and u["refuted"]:
        nums.append(("proved upper bound", "none", f"the {u['source']}'s figure is refuted by a lower bound"))
    elif u is not None and u["epsilon"] is not None:
        low = as_float(s["epsilon_lower"]) if s["epsilon_lower"] is not None else 0.0
        nums.append(("bracket", f"[{low:.4g}, {u['epsilon']:.4g}]", f"lower bound to proved upper bound: {u['short']}"))
    return nums


def exceeded(out: Any) -> list[str]:
    """In words, each finding above the claim, what exceeded what: an attack's lower bound, an exact figure
    the verdict judges, a Rényi lower bound, and (reported beside the verdict) the guarantee the policy's
    own ledger implies. Empty when nothing exceeded the claim."""
    out = out if isinstance(out, dict) and "format" in out else findings_dict(out)
    claimed, claim = as_float(out.get("epsilon_claimed")), out.get("claim")
    if not math.isfinite(claimed) or claim is None:
        return []
    delta, conf = fmt(as_float(out.get("delta"))), fmt(out.get("confidence_per_attack") or out.get("confidence"))
    allows = f"the eps = {claimed:.4g} that the {claim} claim allows at delta = {delta}"
    said = []
    for a in out.get("attacks") or []:
        lo = as_float(a.get("epsilon_lower"))
        if lo > claimed:
            said.append(f"The {a['attack']} attack's lower bound, eps >= {lo:.4g} at delta = {delta} (holding with "
                        f"confidence {fmt(a.get('confidence', conf))}), exceeds {allows}.")
    for e in out.get("exact") or []:
        against = claimed if e.get("claimed") is None else as_float(e["claimed"])
        if e.get("judged", True) and as_float(e["epsilon"]) > against * (1 + 1e-9) + 1e-9:
            said.append(f"The {e['part']}, computed exactly ({e['method']}), gives eps = {as_float(e['epsilon']):.6g}, above "
                        + (allows if e.get("claimed") is None else f"the claim's own eps = {against:.6g}") + ".")
    rvs = out.get("renyi_violation") or []
    if rvs:  # one sentence: the order with the largest excess, and how many orders exceed
        rv = max(rvs, key=lambda r: as_float(r["D_alpha_lower"]) - as_float(r["claimed"]))
        others = f" (and at {len(rvs) - 1} more order{'s' if len(rvs) > 2 else ''})" if len(rvs) > 1 else ""
        said.append(f"The likelihood attack's lower bound on the Rényi divergence of order {fmt(rv['order'])}, "
                    f"D >= {fmt(rv['D_alpha_lower'])}, exceeds the {fmt(rv['claimed'])} the {claim} claim allows at that "
                    f"order{others}.")
    led = out.get("ledger")
    kind = ledger_kind(led)
    if kind in ("per-round", "tree") and as_float(led.get("implied_epsilon")) > claimed * (1 + 1e-9):
        judged = any("ledger" in e["part"] and e.get("judged", True) for e in out.get("exact") or [])
        said.append(f"The policy's own ledger, composed per round, implies {led.get('implied')} (eps = "
                    f"{as_float(led['implied_epsilon']):.4g} at delta = {delta}) against the {claim} claim (eps = "
                    f"{claimed:.4g})" + ("." if judged else ": the noise it records does not pay for the claim "
                                         "(reported beside the verdict, which the attacks decide)."))
    return said


def renyi_zero_notes(out: Any) -> list[str]:
    """One line per attack whose Rényi lower bound is 0 at orders where its estimate is large, saying why."""
    notes = []
    for a in (out.get("attacks") or []) if isinstance(out, Mapping) else findings_dict(out).get("attacks") or []:
        r = (a.get("details") or {}).get("renyi")
        if not r or "lower" not in r:
            continue
        zero = [(o, e) for o, e, lo in zip(r["orders"], r["estimate"], r["lower"]) if as_float(lo) == 0 and as_float(e) > 1e-3]
        if zero:
            orders = ", ".join(f"{as_float(o):g}" for o, _ in zero)
            notes.append(
                f"At order(s) {orders} the D_alpha lower bound is 0 although the estimate is up to "
                f"{max(as_float(e) for _, e in zero):.3g}: at high orders D_alpha is driven by rare, very large privacy "
                "losses (a heavy tail) that the half of the runs used for the bound too rarely contains, so no "
                "lower bound above 0 holds at this sample size; the estimate is not a bound.")
    return notes
