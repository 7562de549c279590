"""Reading the findings: the dict every renderer reads (:func:`findings_dict`), the numbers of the verdict
banner (:func:`summary`, :func:`banner_numbers`), what exceeded the claim in words (:func:`exceeded`), what
a consistent verdict rests on when a part showed nothing (:func:`rests_on`), which parts had no power
(:func:`no_power`, :func:`no_power_sentence`), the parts of the verdict and their members
(:func:`verdict_parts`), the upper side in words (:func:`upper_sentences`: the bracket [lower, upper] and a claim
looser than what dpaudit proves), the notes on Rényi bounds of 0 (:func:`renyi_zero_notes`) and on point estimates
above the claim (:func:`points_above_claim`), and the small formatting helpers (:func:`fmt`, :func:`cell`,
:func:`label`, :func:`tidy_text`, :func:`vector`, :func:`as_float`, :func:`quoted_list`) every other module
of the report uses.
"""

from __future__ import annotations

import math
import re
from typing import Iterable, Mapping, Protocol, TypeAlias, TypedDict, Union

from dpaudit.errors import DPAuditError
from dpaudit.jsontypes import JSONMapping, JSONObject, JSONValue

_WORDS = {"violation": "VIOLATION", "consistent": "CONSISTENT", "inconclusive": "INCONCLUSIVE",
          "interrupted": "INTERRUPTED (no verdict)", "exact": "EXACT (no claim to judge)"}


class HasFindingsDict(Protocol):
    """Anything that gives its findings as a dict: an :class:`~dpaudit.api.Audit`, a
    :class:`~dpaudit.runner.findings.Findings`."""

    def to_dict(self) -> JSONObject: ...


#: what a report renders: an Audit, a Findings, or a findings dict (``--json``, any format dpaudit reads)
FindingsLike: TypeAlias = Union[HasFindingsDict, JSONMapping]


def findings_dict(out: FindingsLike) -> JSONObject:
    """An :class:`~dpaudit.api.Audit`, a :class:`~dpaudit.runner.findings.Findings` or a findings dict
    (``--json``, any format dpaudit reads) as the JSON dict of the current format."""
    from dpaudit.runner.findings import Findings

    if hasattr(out, "to_dict"):
        return out.to_dict()
    if not isinstance(out, Mapping):
        raise DPAuditError(f"a report renders an Audit, Findings or a findings dict, got {type(out).__name__}.")
    return Findings.from_dict(out).to_dict()


def as_float(v: object) -> float:
    """A JSON number (or "inf"/"nan" string, or None) as a float."""
    if v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def fmt(x: object, digits: int = 4) -> str:
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


#: a decimal literal inside text (a pair's label, a background written by a protocol)
_DECIMAL = re.compile(r"(?<![\w.])-?\d+\.\d+(?:e[-+]?\d+)?(?![\w.])")


def _significant(literal: str) -> int:
    return len(re.sub(r"\D", "", literal.split("e")[0]).lstrip("0"))


def tidy_text(text: str, digits: int = 4) -> str:
    """``text`` with every decimal literal longer than 6 significant digits (a float's repr, as protocols
    write a pair's background) shortened to ``digits``; shorter ones (a claim's ``0.373144-zCDP``) are kept."""
    def short(m: re.Match[str]) -> str:
        s = m.group(0)
        return s if _significant(s) <= max(6, digits) else f"{float(s):.{digits}g}"

    return _DECIMAL.sub(short, text)


class Verbatim(str):
    """Text a table shows as it is (already tidied: :func:`tidy_distinct` chose its digits)."""


def tidy_distinct(texts: Iterable[str], digits: int = 4) -> dict[str, str]:
    """Each text tidied (:func:`tidy_text`) to the fewest significant digits, at least ``digits``, that keep
    different texts different (two threshold pairs whose arm means differ in the sixth digit stay apart)."""
    texts = list(dict.fromkeys(texts))
    for p in range(digits, 18):
        out = {t: tidy_text(t, p) for t in texts}
        if len(set(out.values())) == len(out):
            return out
    return {t: t for t in texts}


def label_digits(out: JSONMapping) -> int:
    """The fewest significant digits, at least 4, that keep every pair label of the findings apart (the
    search's rows, the threshold search's best pairs, the witnesses), so that a pair reads the same in every
    table of the report."""
    labels = [r.get("pair") for r in out.get("search") or []]
    labels += [r.get("pair") for r in (out.get("threshold_search") or {}).get("best") or []]
    labels += [r.get("best") for r in out.get("search_summary") or []]
    labels += [(a.get("witness") or {}).get("label") for a in (out.get("attacks") or []) + (out.get("beside") or [])]
    labels += [(out.get("witness") or {}).get("label")]
    texts = list(dict.fromkeys(x for x in labels if isinstance(x, str)))
    for p in range(4, 18):
        if len({tidy_text(t, p) for t in texts}) == len(texts):
            return p
    return 17


def number(x: float, digits: int = 4) -> str:
    """A number to ``digits`` significant digits (integers as integers)."""
    x = float(x)
    if math.isfinite(x) and x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.{digits}g}"


def vector(xs: Iterable[object], digits: int = 4, limit: int = 8) -> str:
    """Numbers as a short vector: ``(1, 0, 0.5)``; a unit vector as ``e1`` (``-e2``), the zero vector as
    ``0``; past ``limit`` entries elided. Two entries that would print alike (an interval) get more digits."""
    xs = [as_float(x) for x in xs]
    if not xs:
        return "()"
    nz = [i for i, x in enumerate(xs) if x != 0]
    if len(xs) > 1 and not nz:
        return "0"
    if len(xs) > 1 and len(nz) == 1 and abs(xs[nz[0]]) == 1:
        return f"{'-' if xs[nz[0]] < 0 else ''}e{nz[0] + 1}"
    p = digits
    while len(xs) == 2 and xs[0] != xs[1] and number(xs[0], p) == number(xs[1], p) and p < 17:
        p += 1
    shown = [number(x, p) for x in xs[:limit]]
    return "(" + ", ".join(shown) + (f", ... {len(xs)} entries" if len(xs) > limit else "") + ")"


def numbers_text(xs: Iterable[object], digits: int = 4) -> str:
    """A few numbers as ``a, b, c`` to ``digits`` significant digits (more for two that would print alike:
    an interval's ends)."""
    xs = [as_float(x) for x in xs]
    p = digits
    while len(xs) == 2 and xs[0] != xs[1] and number(xs[0], p) == number(xs[1], p) and p < 17:
        p += 1
    return ", ".join(number(x, p) for x in xs)


def contexts_text(xs: Iterable[Iterable[object]]) -> str:
    """Per-arm context vectors, short: ``every arm e1``, ``arm 0: e1; arms 1-19: 0``."""
    vs = [vector(v) for v in xs]
    if not vs:
        return "none"
    if len(set(vs)) == 1:
        return f"every arm {vs[0]}" if len(vs) > 1 else vs[0]
    groups: list[list[int | str]] = []  # [first arm, last arm, vector]
    for i, v in enumerate(vs):
        if groups and groups[-1][2] == v:
            groups[-1][1] = i
        else:
            groups.append([i, i, v])
    shown = [f"arm {a}: {t}" if a == b else f"arms {a}-{b}: {t}" for a, b, t in groups[:6]]
    return "; ".join(shown) + (f"; ... {len(vs)} arms" if len(groups) > 6 else "")


def _triple(x: object) -> str:
    """One round of a finite contextual history: (context, arm, reward), or (context, per-arm rewards)."""
    if isinstance(x, (list, tuple)) and len(x) == 3 and not isinstance(x[1], (list, tuple)):
        return f"({x[0]}, arm {x[1]}, reward {number(as_float(x[2]))})"
    if isinstance(x, (list, tuple)) and len(x) == 2 and _is_numbers(x[1]):
        return f"({x[0]}, rewards ({numbers_text(x[1])}))"
    return str(x)


def enumeration_witness(w: JSONMapping) -> str:
    """An exact enumeration's witness as one readable line: the canary round and the two triples, the
    history before it, the future the adversary fixed, and the event with its two probabilities."""
    hist = w.get("history") or []
    fut_c, fut_r = w.get("future_contexts") or [], w.get("future_rewards") or []
    event = w.get("event") or []
    ev = ", ".join("(" + ", ".join(str(a) for a in e) + ")" for e in event[:6]) + (
        f", ... {len(event)} in all" if len(event) > 6 else "")
    text = (f"round {w.get('round')}: {_triple(w['canary'])} vs {_triple(w['neighbour'])}, after "
            + ("no history" if not hist else "history " + ", ".join(_triple(h) for h in hist)))
    if fut_c:
        text += "; future contexts " + ", ".join(str(c) for c in fut_c)
    if fut_r:
        text += "; future rewards " + ", ".join(f"({numbers_text(r)})" if _is_numbers(r) else str(r) for r in fut_r)
    if event:
        text += f"; event: the actions after it in {{{ev}}}"
    if w.get("p_event") is not None and w.get("q_event") is not None:
        text += f", probability {number(as_float(w['p_event']))} on d vs {number(as_float(w['q_event']))} on d'"
    return text


def _is_numbers(v: object) -> bool:
    return (isinstance(v, (list, tuple)) and bool(v)
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v))


def cell(x: object) -> str:
    """A value as a table cell, readable: absent (None) as a dash, numbers to 4 significant digits, yes/no,
    a short list of numbers as a vector, a long one as its length and range, text with its long decimals
    shortened; never JSON or a Python repr."""
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return number(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, Verbatim):
        return str(x)
    if isinstance(x, str):
        return tidy_text(x)
    if isinstance(x, Mapping) and "canary" in x and "neighbour" in x:
        return enumeration_witness(x)
    if _is_numbers(x):
        if len(x) <= 8:
            return numbers_text(x)
        lo, hi = min(as_float(v) for v in x), max(as_float(v) for v in x)
        return f"{len(x)} values, " + (f"all {number(lo)}" if lo == hi else f"from {number(lo)} to {number(hi)}")
    if isinstance(x, (list, tuple)) and x and all(_is_numbers(v) for v in x):
        shown = "; ".join(vector(v) for v in x[:6])
        return shown + (f"; ... {len(x)} in all" if len(x) > 6 else "")
    if isinstance(x, (list, tuple)) and all(isinstance(v, str) for v in x):
        return ", ".join(tidy_text(v) for v in x) if x else "none"
    return tidy_text(_compact(x))


#: how a key of the findings reads in a report (anything else: its words, underscores as spaces)
LABELS = {
    "epsilon_lower": "eps lower bound", "epsilon_claimed": "claimed eps", "epsilon": "eps",
    "epsilon_upper": "eps upper bound", "gap": "gap (claimed minus lower bound)", "fp": "false positives",
    "fn": "false negatives", "fpr": "FPR", "fnr": "FNR", "n": "fresh runs per side",
    "fresh_runs_used": "fresh runs used per side", "fresh_runs_planned": "fresh runs planned per side",
    "looks": "looks at the fresh runs", "budget_share_of_last_look": "error budget of the last look",
    "stopped_early": "stopped early", "selection_bound": "bound on the selection split",
    "membership_selection_bound": "membership bound (selection split)", "likelihood_mean_loss": "mean privacy loss",
    "pilot_bound": "bound on the pilot runs", "z_prime": "z'", "row_d": "canary row in d",
    "row_d_prime": "canary row in d'", "entry_d": "canary entry in d", "entry_d_prime": "canary entry in d'",
    "first_difference": "first round the sides act differently", "runs_per_gap": "runs per gap",
    "gap_interval": "gap interval", "best_separation": "best separation", "best_pilot": "best bound on the pilot",
    "best_ranked": "best bound ranked again", "ranked": "ranked again", "max_releases_fed_by_round":
    "most releases a round fed", "max_releases_per_round": "most releases a round fed",
    "releases_without_fed": "releases without a record of the rounds that fed them",
    "shared_rounds": "(run, round) pairs that fed more than one release", "implied": "guarantee implied per round",
    "implied_epsilon": "its eps at the audit's delta", "fit_runs_per_side": "training runs per side",
    "batch": "batch (users)", "horizon": "horizon T", "seconds": "time (s)", "verdict": "verdict",
    "delta_at_epsilon": "delta at eps", "renyi": "Rényi divergence", "witness_epsilon": "witness of eps",
    "witness_delta": "witness of delta", "witness_renyi": "witness of the Rényi divergence",
    "delta_claimed": "the claim's own delta", "epsilon_exact": "exact eps there", "tried_up_to": "tried up to T",
    "first_dependent_round": "first round an action depends on the input", "scored_at_horizon": "scored at T",
    "canary_position": "canary's position in the batch", "tests_corrected_for": "tests corrected for",
    "candidates": "candidates", "separated": "a horizon separated the sides", "separation": "separation",
    "p_event": "P(event) on d", "q_event": "P(event) on d'", "canary_contexts_d": "canary's contexts in d",
    "canary_contexts_d_prime": "canary's contexts in d'", "canary_rewards_d": "canary's rewards in d",
    "canary_rewards_d_prime": "canary's rewards in d'", "future_contexts": "future contexts",
    "future_rewards": "future rewards", "reject_when": "reject d when", "statistic": "statistic",
    "threshold": "threshold", "direction": "direction", "score": "score", "alpha": "Rényi order alpha",
}


def label(key: object) -> str:
    """A findings key as a reader's words (:data:`LABELS`, else its words with underscores as spaces)."""
    k = str(key)
    if k in LABELS:
        return LABELS[k]
    return k.replace("_d_prime", " d'").replace("_", " ")


def _compact(v: object, limit: int = 320) -> str:
    """Any JSON value as one short line of plain text, never JSON: a dict as ``key value, key value``
    (a nested one in parentheses), a list as ``a, b, c`` (a nested one in parentheses; long lists elided),
    strings without quotes, floats to 4 digits; cut at ``limit``."""
    def plain(x: object, top: bool) -> str:
        if isinstance(x, Mapping):
            body = ", ".join(f"{label(k)} {plain(y, False)}" for k, y in x.items())
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


def ledger_kind(led: object) -> str | None:
    """``per-user`` (local), ``tree`` (per round, every round feeding one node per tree level by design),
    ``per-round`` (the central per-round dict), or None (no ledger)."""
    if not isinstance(led, Mapping):
        return None
    if led.get("kind") == "per-user":
        return "per-user"
    return "tree" if led.get("tree") else "per-round"


def is_threshold_test(a: JSONMapping) -> bool:
    d = a.get("details") or {}
    return all(k in d for k in ("fpr", "fnr", "false_positives", "false_negatives", "n_fresh_per_side"))


def point_estimate(a: JSONMapping) -> float | None:
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


def no_power(a: JSONMapping) -> bool:
    """Whether an attack showed nothing: its lower bound is 0 (the two sides' views were not told apart at
    its confidence and sample size), so it says nothing about the claim either way."""
    return not as_float(a.get("epsilon_lower")) > 0


def no_power_sentence(a: JSONMapping, auc: float | None = None) -> str:
    """One sentence on an attack with no power, saying what its test did, in place of a figure of it."""
    d = a.get("details") or {}
    name = f"'{a['attack']}'"
    if is_threshold_test(a):
        fpr, fnr = as_float(d["fpr"]), as_float(d["fnr"])
        if fpr >= 1 - 1e-12 or fnr >= 1 - 1e-12:
            what = f"it rejects {'every' if fpr >= 1 - 1e-12 else 'no'} fresh view of d"
        else:
            what = f"FPR + FNR = {number(fpr + fnr)}, no better than a coin once the confidence margins are added"
        roc = f", AUC {auc:.3g}" if auc is not None else ""
        return (f"No power: {name} has lower bound 0. At its threshold its test has FPR {number(fpr)} and FNR "
                f"{number(fnr)} on {d.get('n_fresh_per_side')} fresh runs per side ({what}{roc}), so it shows "
                "nothing about the claim, and no figure draws it.")
    return (f"No power: {name} has lower bound 0, so it shows nothing about the claim, and no figure draws it.")


def _member(part: str, name: str) -> bool:
    return name == part or name.startswith(part + " ")


def verdict_parts(out: JSONMapping) -> list[JSONObject]:
    """Every part that ran, with its members: the attacks whose bounds it gave (a local audit's 'central'
    part gives 'central membership' and 'central likelihood') and the exact figures it computed. Attacks
    and exact figures no recorded part names (findings without parts) are parts of their own."""
    attacks, beside, exact = out.get("attacks") or [], out.get("beside") or [], out.get("exact") or []
    parts, used_a, used_e = [], set(), set()
    names = {p["name"] for p in out.get("parts") or []}
    for p in out.get("parts") or []:
        name, kind = p["name"], p.get("kind")
        pool = attacks if kind == "bound" else beside if kind == "beside" else []
        mine = [a for a in pool if _member(name, a["attack"])]
        # the figures of a part's own name; failing those, a one-word part's by that word ('ledger': 'per-round
        # ledger'), leaving out figures another part is named after
        ex = [e for e in exact if kind == "exact" and e["part"] == name] or [
            e for e in exact if kind == "exact" and " " not in name and e["part"] not in names
            and name in e["part"].split()]
        used_a |= {id(a) for a in mine}
        used_e |= {id(e) for e in ex}
        parts.append({**p, "attacks": mine, "exact": ex})
    for a in attacks:
        if id(a) not in used_a:
            parts.append({"name": a["attack"], "kind": "bound", "summary": "", "attacks": [a], "exact": []})
    for a in beside:
        if id(a) not in used_a:
            parts.append({"name": a["attack"], "kind": "beside", "summary": "", "attacks": [a], "exact": []})
    for e in exact:
        if id(e) not in used_e:
            parts.append({"name": e["part"], "kind": "exact", "summary": "", "attacks": [], "exact": [e]})
    return parts


def part_result(p: JSONMapping, out: JSONMapping) -> str:
    """What a part found, in a few words: "eps >= 0.41", "no power (bound 0)", "eps = 2.891 (exact)"."""
    claimed = as_float(out.get("epsilon_claimed"))
    if p["attacks"]:
        if all(no_power(a) for a in p["attacks"]):
            return "no power (lower bound 0)"
        best = max(p["attacks"], key=lambda a: as_float(a["epsilon_lower"]))
        lo = as_float(best["epsilon_lower"])
        who = f" ({best['attack']})" if len(p["attacks"]) > 1 else ""
        over = "; above the claim" if p.get("kind") == "bound" and lo > claimed else ""
        return f"eps >= {number(lo)}{who}" + (" (not judged)" if p.get("kind") == "beside" else "") + over
    if p["exact"]:
        e = p["exact"][0]
        return f"eps = {number(as_float(e['epsilon']))} (exact" + ("" if e.get("judged", True) else ", not judged") + ")"
    led = out.get("ledger")
    if p["name"] == "ledger" and isinstance(led, Mapping) and led.get("implied"):
        eps = as_float(led.get("implied_epsilon"))
        return f"implies {led['implied']}" + (f" (eps = {number(eps)}), not judged" if math.isfinite(eps) else "")
    return ""


def rests_on(out: JSONMapping) -> str | None:
    """When a consistent verdict has a part of the verdict that showed nothing (no power), one sentence
    naming it and what the verdict rests on instead (the parts with power, the exact figures judged)."""
    if out.get("verdict") != "consistent":
        return None
    parts = verdict_parts(out)
    judged = [p for p in parts if p.get("kind") == "bound" and p["attacks"]]
    blind = [p for p in judged if all(no_power(a) for a in p["attacks"])]
    if not blind:
        return None
    basis = [f"'{p['name']}' ({part_result(p, out)})" for p in judged if p not in blind]
    basis += [f"the exact {e['part']} (eps = {number(as_float(e['epsilon']))})" for p in parts if p.get("kind") == "exact"
              for e in p["exact"] if e.get("judged", True)]
    if not basis:
        return None
    names = quoted_list([p["name"] for p in blind])
    verb = "shows" if len(blind) == 1 else "show"
    return (f"{names} {verb} nothing (lower bound 0: no power at this sample size), so this verdict rests on "
            + (basis[0] if len(basis) == 1 else ", ".join(basis[:-1]) + " and " + basis[-1]) + ".")


def points_above_claim(out: JSONMapping) -> str | None:
    """One sentence where an attack's point estimate lies above the claim while its lower bound does not:
    a point estimate is not a bound, and what is judged is the lower bound at the stated confidence."""
    claimed = as_float(out.get("epsilon_claimed"))
    if not math.isfinite(claimed):
        return None
    above = [(a["attack"], pe) for a in out.get("attacks") or []
             if (pe := point_estimate(a)) is not None and pe > claimed and as_float(a["epsilon_lower"]) <= claimed]
    if not above:
        return None
    shown = [f"'{n}' ({number(pe)})" for n, pe in above]
    names = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    one = len(above) == 1
    return (f"The point estimate{'' if one else 's'} of {names} {'lies' if one else 'lie'} above the claimed eps = "
            f"{number(claimed)}, yet {'its lower bound does' if one else 'their lower bounds do'} not: a point estimate is "
            "not a bound (it reads the observed error rates without their confidence margins, so on finite samples it "
            "falls above the true eps about as often as below); what the verdict judges is the lower bound at the "
            "stated confidence.")


class UpperReading(TypedDict):
    """The upper side of the findings as the report reads it (:func:`upper_reading`)."""

    epsilon: float | None  # None: nothing provable
    method: str
    short: str  # how, in a few words
    source: str  # the ledger, the shuffle accounting, an exact enumeration
    refuted: JSONValue  # the sentence when a lower bound exceeds it
    reason: JSONValue  # why there is none
    assumptions: list[JSONValue]
    delta: float


class Summary(TypedDict):
    """The numbers of the verdict banner (:func:`summary`)."""

    verdict: str
    word: str
    sentence: str
    claim: JSONValue
    epsilon_claimed: JSONValue
    epsilon_lower: JSONValue
    best_attack: str | None
    best_is_exact: bool
    confidence: JSONValue
    confidence_per_part: JSONValue
    parts_judged: int
    delta: JSONValue
    gap: JSONValue
    upper: UpperReading | None


def summary(out: FindingsLike) -> Summary:
    """The numbers of the verdict banner: claimed eps, the best lower bound and the part that gave it
    (``best_attack``; ``best_is_exact`` when it is an exact figure), the confidence, the gap."""
    out = findings_dict(out)
    lower = out.get("epsilon_lower")
    cands = [(a["attack"], as_float(a["epsilon_lower"]), False) for a in out.get("attacks") or []]
    cands += [(e["part"], as_float(e["epsilon"]), True) for e in out.get("exact") or [] if e.get("judged", True)]
    named = (out.get("witness") or {}).get("attack")
    # the witness names what the verdict rests on; it is the lower bound's source only when it gave that figure
    # (a violation by an exact figure keeps the best attack's bound as the lower bound)
    best = next((c for c in cands if c[0] == named and (lower is None or math.isclose(c[1], as_float(lower)))), None)
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


def upper_reading(out: JSONMapping) -> UpperReading | None:
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


def upper_sentences(out: FindingsLike, *, banner: bool = False) -> list[str]:
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
                    f"claim eps = {claimed:.4g}: the claim relies on an analysis this composition does not reproduce, "
                    "or is wrong (the verdict judges the claim by its own tests).")
    return said


def banner_numbers(s: Summary) -> list[tuple[str, str, str]]:
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
    if s["gap"] is not None and as_float(s["gap"]) < 0:  # a violation: by how much, never a negative gap
        nums.append(("exceeds the claim by", f"{-as_float(s['gap']):.4g}", "best lower bound minus claimed eps"))
    elif s["gap"] is not None:
        nums.append(("gap", f"{as_float(s['gap']):.4g}", "claimed minus lower bound"))
    u = s.get("upper")
    if u is not None and u["refuted"]:
        nums.append(("proved upper bound", "none", f"the {u['source']}'s figure is refuted by a lower bound"))
    elif u is not None and u["epsilon"] is not None:
        low = as_float(s["epsilon_lower"]) if s["epsilon_lower"] is not None else 0.0
        nums.append(("bracket", f"[{low:.4g}, {u['epsilon']:.4g}]", f"lower bound to proved upper bound: {u['short']}"))
    return nums


def exceeded(out: FindingsLike) -> list[str]:
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


def renyi_zero_notes(out: FindingsLike) -> list[str]:
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
