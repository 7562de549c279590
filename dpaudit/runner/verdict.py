"""The one verdict rule, for every protocol.

* ``violation`` when a finding exceeds the claim: an attack's lower bound on epsilon at its
  confidence (strictly), an exact figure the verdict judges (beyond its numerical precision, a
  relative 1e-9: the conversions and bisections solve to ~1e-12), or, for the gray-box likelihood
  attack, a lower bound on a Rényi divergence above the claim's Rényi curve at that order;
* ``inconclusive`` when the audit had no power: the plan found nothing private to audit (no action
  depended on the input within the horizon cap, no release happened), no attack told the two sides'
  views apart on any pair tried (every lower bound 0), or, when only the black-box attack judges the
  claim, the claim lies above the largest bound the sample size can give;
* otherwise ``consistent``, with the gap between the claim and the best lower bound.

The error budget 1 - confidence is split equally between the parts whose bounds enter the verdict
(:func:`dpaudit.attacks.bounds.split_confidence`), and each part corrects internally for everything
it evaluates on fresh samples, so a policy that keeps its claim is called a violation with probability
at most 1 - confidence; exact figures carry no sampling error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from dpaudit.attacks.result import AuditResult
from dpaudit.errors import InternalError

from .findings import Exact, Verdict

__all__ = ["Decision", "decide", "EXACT_TOLERANCE"]

#: relative tolerance of an exact figure's comparison with the claim
EXACT_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Decision:
    """What the rule decided: the verdict, its one-sentence reason, the best lower bound and the witness."""

    verdict: Verdict
    reason: str
    epsilon_lower: float
    witness: dict[str, Any] | None


def _check_numbers(attacks: Sequence[AuditResult], exact: Sequence[Exact]) -> None:
    """Refuse a verdict reached with a NaN: NaN compares false, so it would read as ``consistent``."""
    for a in attacks:
        if isinstance(a.epsilon_lower, float) and math.isnan(a.epsilon_lower):
            raise InternalError(f"the {a.attack} attack's bound came out NaN, so the verdict cannot be decided")
    for e in exact:
        if math.isnan(e.epsilon):
            raise InternalError(f"the exact {e.part} epsilon came out NaN, so the verdict cannot be decided")


def decide(eps_claim: float, delta: float, attacks: Sequence[AuditResult], exact: Sequence[Exact] = (), *,
           renyi_violation: Sequence[Mapping[str, float]] = (), unseen: str | None = None, blackbox_only: bool = False,
           ceiling: float = math.inf, runs: int | None = None, pairs_tried: int | None = None,
           confidence: float | None = None, advice: str | None = None) -> Decision:
    """Apply the rule (module docstring) to an audit's findings.

    ``attacks``: the lower bounds that enter the verdict; ``exact``: exact figures (only the ``judged``
    ones are compared); ``renyi_violation``: the likelihood attack's orders whose D_alpha lower bound
    exceeds the claim's curve; ``unseen``: the plan's reason there was nothing private to audit;
    ``blackbox_only`` with ``ceiling``: the claim must lie below the largest bound the fresh samples can
    give, or no bound could ever exceed it; ``advice``: what to try when the audit is inconclusive (None:
    the multi-run audit's horizon, runs and pair file).
    """
    _check_numbers(attacks, exact)
    best = max(attacks, key=lambda a: a.epsilon_lower, default=None)
    best_lower = best.epsilon_lower if best is not None else 0.0
    over = _over_the_claim(eps_claim, attacks, exact)
    if over:
        return _violation(over, eps_claim, delta, attacks, exact, best_lower)
    if renyi_violation:
        v = max(renyi_violation, key=lambda r: r["D_alpha_lower"] - r["claimed"])
        lik = next((a for a in attacks if a.attack == "likelihood"), best)
        return Decision(Verdict.VIOLATION, f"the likelihood attack's lower bound D_{v['order']:g} >= "
                                           f"{v['D_alpha_lower']:.4g} exceeds the claimed Rényi divergence "
                                           f"{v['claimed']:.4g} at that order", best_lower,
                        {"attack": lik.attack, **lik.witness} if lik is not None else None)
    judged = [e for e in exact if e.judged]
    if not attacks and judged:  # an exact audit: the figures are the whole mechanism's, no sampling
        top = max(judged, key=lambda e: e.epsilon)
        return Decision(Verdict.CONSISTENT, f"every exact figure is within the claimed eps = {eps_claim:.6g} at "
                                            f"delta = {delta:g} (the {top.part} gives eps = {top.epsilon:.6g}; exact, "
                                            "no sampling)",
                        judged[0].epsilon, {"attack": judged[0].part, **judged[0].witness})
    witness = {"attack": best.attack, **best.witness} if best is not None else None
    if unseen is None and best_lower <= 0:
        tried = f" of the {pairs_tried} neighbouring pairs tried" if pairs_tried else " pair tried"
        conf = f" at {confidence:g} confidence" if confidence is not None else ""
        unseen = (f"the two sides' views could not be told apart on any{tried} (every lower bound is 0{conf}; "
                  f"claimed eps = {eps_claim:.4g})")
    if unseen is None and blackbox_only and eps_claim > ceiling:
        per = f"{runs} fresh runs per side" if runs else "the fresh samples"
        unseen = (f"the claim eps = {eps_claim:.4g} lies above {ceiling:.4g}, the largest bound {per} can give the "
                  "black-box attack (the only one without a ledger)")
    if unseen is not None:
        advice = advice or ("try a longer --horizon, more --runs, or --pair PAIR.json with the inputs where you expect "
                            "the policy to leak")
        return Decision(Verdict.INCONCLUSIVE, f"{unseen}, so this audit is no evidence either way; {advice}",
                        best_lower, witness)
    what = "no attack's lower bound" + (" and no exact figure" if judged else "")
    assert best is not None
    return Decision(Verdict.CONSISTENT, f"{what} exceeds the claimed eps = {eps_claim:.4g} at delta = {delta:g} "
                                        f"(best: {best.attack}, eps >= {best_lower:.4g}; gap "
                                        f"{eps_claim - best_lower:.4g})",
                    best_lower, witness)


def _over_the_claim(eps_claim: float, attacks: Sequence[AuditResult],
                    exact: Sequence[Exact]) -> list[tuple[float, str, dict[str, object]]]:
    """Every finding above the claim: (its eps, what it is, its witness): an attack's bound strictly above it, a
    judged exact figure beyond its numerical precision (against the claim's own eps where it says so)."""
    over: list[tuple[float, str, dict[str, object]]] = []
    for a in attacks:
        if a.epsilon_lower > eps_claim:
            over.append((a.epsilon_lower, f"the {a.attack} attack's lower bound eps >= {a.epsilon_lower:.4g}",
                         {"attack": a.attack, **a.witness}))
    for e in exact:
        against = eps_claim if e.claimed is None else e.claimed
        if e.judged and e.epsilon > against * (1 + EXACT_TOLERANCE) + EXACT_TOLERANCE:
            over.append((e.epsilon, f"the {e.part}'s exact eps = {e.epsilon:.6g} ({e.method})"
                                    + (f" exceeds the claim's own eps = {against:.6g}" if e.claimed is not None else ""),
                         {"attack": e.part, **e.witness}))
    return over


def _violation(over: list[tuple[float, str, dict[str, object]]], eps_claim: float, delta: float,
               attacks: Sequence[AuditResult], exact: Sequence[Exact], best_lower: float) -> Decision:
    """The violation of the worst finding above the claim, with how many more there are."""
    worst = max(over, key=lambda f: f[0])
    reason = worst[1] if " exceeds " in worst[1] else (f"{worst[1]} exceeds the claimed eps = {eps_claim:.4g} at "
                                                       f"delta = {delta:g}")
    if len(over) > 1:
        reason += f" (and {len(over) - 1} more finding{'s' if len(over) > 2 else ''})"
    if not attacks:
        reason += " (exact, no sampling)"
        best_lower = next(e.epsilon for e in exact if e.judged)  # the first figure is at the audit's delta
    return Decision(Verdict.VIOLATION, reason, best_lower, worst[2])
