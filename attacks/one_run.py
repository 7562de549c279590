"""One-run audits: lower bounds on epsilon from the guesses about many canaries in a few runs.

m canaries are each included independently with probability 1/2 (S_i uniform in {-1, +1}); an
adversary reads the output and guesses T_i in {-1, 0, +1} (0: it abstains); W, the number of correct
guesses among the r it makes, cannot be too large for a private mechanism. Two analyses of W, both for
a mechanism that is private with respect to each canary's S_i:

* Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run" (NeurIPS 2023): for an
  eps-DP mechanism W is stochastically dominated by Binomial(r, e^eps / (1 + e^eps)) (their Thm 3.1);
  for (eps, delta)-DP the tail gains a delta term (their Sec. 5). :func:`steinke_p_value` is the p-value
  exactly as their App. D computes it, ``P[Binomial(r, q) >= v] + 2 m delta max_i P[v - i <= Binomial(r,
  q) < v] / i``, and :func:`steinke_epsilon` the eps lower bound at a confidence.
* Mahloujifar, Melis & Chaudhuri, "Auditing f-Differential Privacy in One Run" (ICML 2025): for an
  f-DP mechanism (a trade-off curve f), the recursion of their guessing-game analysis bounds the
  probability of v or more correct guesses among r; :func:`fdp_rejects` is its test and
  :func:`fdp_lower` the largest parameter of a family of curves it rejects. Families: pure eps-DP,
  (eps, delta)-DP and mu-Gaussian DP (:class:`Tradeoff`).

Both hold whatever the guesses depend on, as long as the guesses are a function of the output (and of
randomness independent of S), and for a fixed number r of guesses: dpaudit guesses the top and bottom
k scores, k fixed before the counted runs (:func:`choose_rule` on a pilot run). Where the papers leave a
choice, ours: the eps (mu) bound is the infimum of the parameters the test does not reject, found by a
scan and bisection (the paper's code bisects, which agrees whenever the p-value grows with eps); at
delta = 0 Steinke et al.'s bound is computed in closed form (the logit of a Clopper-Pearson limit); the
f-DP recursion is the two-option case (a canary is in or out) with abstention.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, TypedDict

import numpy as np

from dpaudit.errors import DPAuditError

if TYPE_CHECKING:
    from dpaudit.accountants import Guarantee

__all__ = ["steinke_p_value", "steinke_epsilon", "Tradeoff", "fdp_rejects", "fdp_lower", "fdp_epsilon",
           "gdp_epsilon", "ANALYSES", "analyses_for", "bound", "cap", "smallest_positive", "GuessRule", "guesses",
           "choose_rule", "predicted_bound", "candidate_row", "CandidateRow",
           "dyadic_rounds", "first_pull_rounds", "canary_inputs", "action_features", "message_scorer",
           "message_features", "STEINKE", "MAHLOUJIFAR"]

#: the two papers, as anything a user reads names them
STEINKE = 'Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run" (NeurIPS 2023)'
MAHLOUJIFAR = 'Mahloujifar, Melis & Chaudhuri, "Auditing f-Differential Privacy in One Run" (ICML 2025)'

#: the largest epsilon (and mu) the searches consider; a bound at it means "at least this much"
EPS_MAX = 60.0
#: scan step of the first-crossing searches (then bisection to BISECT_STEPS)
SCAN_STEP = 0.05
BISECT_STEPS = 36


def _check_counts(m: int, r: int, v: int) -> tuple[int, int, int]:
    m, r, v = int(m), int(r), int(v)
    if not 0 <= v <= r <= m:
        raise DPAuditError(f"a one-run count needs 0 <= correct guesses <= guesses <= canaries, got correct = {v}, "
                           f"guesses = {r}, canaries = {m}.")
    return m, r, v


def _level(confidence: float) -> float:
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise DPAuditError(f"confidence must lie strictly between 0 and 1, got {confidence!r}.")
    return 1.0 - c


def steinke_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """The p-value of v correct guesses out of r (m canaries) under (eps, delta)-DP: Steinke, Nasr &
    Jagielski (2023), App. D (their Thm 3.1 for delta = 0, Sec. 5 for delta > 0), as they state it::

        q = e^eps / (1 + e^eps),  beta = P[Binomial(r, q) >= v],
        alpha = max_{i = 1..v} P[v - i <= Binomial(r, q) < v] / i,
        p = min(1, beta + alpha * delta * 2 m).
    """
    from scipy.stats import binom

    m, r, v = _check_counts(m, r, v)
    if v == 0:
        return 1.0
    q = 1.0 / (1.0 + math.exp(-float(eps)))
    beta = float(binom.sf(v - 1, r, q))
    if delta == 0:
        return min(1.0, beta)
    i = np.arange(1, v + 1)
    below = np.cumsum(binom.pmf(v - i, r, q))  # P[v - i <= B < v]
    alpha = float(np.max(below / i))
    return min(1.0, beta + alpha * float(delta) * 2 * m)


def _first_crossing(ok: Callable[[float], bool], top: float = EPS_MAX, step: float = SCAN_STEP) -> float:
    """inf {x >= 0 : not ok(x)} (``top`` if ok holds up to it): a scan, then bisection inside the first
    bracket. The infimum, not some crossing, so that the bound needs no monotonicity of the test: every
    x below it was rejected (to the scan's resolution, ``step`` and finer where the bounds live)."""
    if not ok(0.0):
        return 0.0
    lo = 0.0
    x = step
    while x <= top and ok(x):
        lo = x
        x = round(x + step * max(1.0, x), 12)  # coarser far out
    if x > top:
        if ok(top):
            return top
        x = top
    hi = x
    for _ in range(BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def steinke_epsilon(m: int, r: int, v: int, delta: float, confidence: float) -> float:
    """The eps lower bound at ``confidence`` from v correct of r guesses (m canaries), Steinke et al. (2023):
    the infimum of the eps whose p-value (:func:`steinke_p_value`) is at least 1 - confidence. If the
    mechanism is (eps*, delta)-DP, the bound exceeds eps* with probability at most 1 - confidence (every
    eps below the bound, eps* among them, was rejected). The paper bisects between 0 and 1 + its first
    rejected integer; the infimum is the same when the p-value grows with eps, and valid when it does not."""
    m, r, v = _check_counts(m, r, v)
    level = _level(confidence)
    if v == 0:
        return 0.0
    if delta == 0:
        # P[Binomial(r, q) >= v] grows with q and equals 1 - confidence at the one-sided Clopper-Pearson lower
        # limit of v / r: the bound is exactly its logit (:func:`dpaudit.attacks.bounds.cp_lower`)
        from .bounds import cp_lower

        q = float(cp_lower(v, r, level))
        return min(EPS_MAX, max(0.0, math.log(q / (1.0 - q)))) if q < 1.0 else EPS_MAX
    # the delta term only adds to the p-value, so every eps not rejected at delta = 0 is not rejected here:
    # the search stays below the closed-form bound of delta = 0
    top = steinke_epsilon(m, r, v, 0.0, confidence)
    if top <= 0:
        return 0.0
    return _first_crossing(lambda e: steinke_p_value(m, r, v, e, delta) < level, top=top, step=top / 16)


# ---- f-DP (Mahloujifar, Melis & Chaudhuri 2025) -----------------------------------------------------------

@dataclass(frozen=True)
class Tradeoff:
    """A family of trade-off curves f_theta indexed by one parameter (larger: less private).

    ``kind`` is ``"pure"`` (eps-DP: f(a) = max(0, 1 - e^eps a, e^-eps (1 - a))), ``"approx"`` ((eps,
    delta)-DP at this ``delta``: f(a) = max(0, 1 - delta - e^eps a, e^-eps (1 - delta - a))) or
    ``"gaussian"`` (mu-GDP: f(a) = Phi(Phi^-1(1 - a) - mu)). :meth:`inverse_blowup` is what the guessing
    game's recursion needs: the smallest P[E] under one side that an event of probability y under the
    other side allows, i.e. the inverse of x -> 1 - f(x).
    """

    kind: str
    delta: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("pure", "approx", "gaussian"):
            raise DPAuditError(f"a trade-off family is 'pure', 'approx' or 'gaussian', got {self.kind!r}.")

    def inverse_blowup(self, theta: float) -> Callable[[float], float]:
        if self.kind == "gaussian":
            from scipy.special import ndtr, ndtri

            mu = float(theta)
            return lambda y: 0.0 if y <= 0.0 else (1.0 if y >= 1.0 else float(ndtr(ndtri(y) - mu)))
        e = math.exp(float(theta))
        d = float(self.delta) if self.kind == "approx" else 0.0
        return lambda y: max(0.0, (y - d) / e, 1.0 - d - e * (1.0 - y))

    def describe(self, theta: float) -> str:
        if self.kind == "gaussian":
            return f"{theta:.4g}-GDP"
        return f"{theta:.4g}-DP" if self.kind == "pure" else f"({theta:.4g}, {self.delta:g})-DP"


def fdp_rejects(inverse_blowup: Callable[[float], float], m: int, r: int, v: int, confidence: float) -> bool:
    """Whether v or more correct guesses out of r (m canaries) reject f-DP at ``confidence``: the recursion of
    Mahloujifar, Melis & Chaudhuri (2025) for the guessing game with two options per canary and abstention.

    Start from the least probability mass that P[v or more correct] >= tau (tau = 1 - confidence) needs at
    level v: correct-guess mass r_v = tau v / m and wrong-guess mass h_v = tau (r - v) / m; step down the
    levels i = v - 1, ..., 0, where f-DP forces the wrong-guess mass at levels >= i to be at least the
    inverse blow-up of the correct-guess mass at levels >= i + 1, h_i = max(h_{i+1}, f^-1(r_{i+1})), and
    each unit of wrong-guess mass added at level i brings i / (r - i) of correct-guess mass,
    r_i = r_{i+1} + i (h_i - h_{i+1}) / (r - i). Every canary is guessed with total probability r / m, so
    r_0 + h_0 > r / m is a contradiction: P[v or more correct] < tau, and f-DP is rejected.
    """
    m, r, v = _check_counts(m, r, v)
    tau = _level(confidence)
    if v == 0 or r == 0:
        return False
    rr = tau * v / m
    hh = tau * (r - v) / m
    for i in range(v - 1, -1, -1):
        h_new = max(hh, inverse_blowup(rr))
        if h_new == hh:  # nothing changes any more: f^-1 is monotone and rr no longer grows
            break
        rr = min(1.0, rr + i * (h_new - hh) / (r - i))
        hh = h_new
    return rr + hh > r / m


def fdp_lower(family: Tradeoff, m: int, r: int, v: int, confidence: float) -> float:
    """The largest parameter of ``family`` (eps, or mu for Gaussian DP) that v correct of r guesses reject at
    ``confidence`` (:func:`fdp_rejects`): the infimum of the parameters not rejected, so every smaller one
    was rejected. If the mechanism is f_theta*-DP, the bound exceeds theta* with probability at most
    1 - confidence."""
    m, r, v = _check_counts(m, r, v)
    if v == 0:
        return 0.0
    return _first_crossing(lambda th: fdp_rejects(family.inverse_blowup(th), m, r, v, confidence))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The eps of mu-Gaussian DP at ``delta`` (Dong, Roth & Su 2022, Cor. 2.13): the eps solving
    Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) = delta (0 when delta already covers it)."""
    from scipy.optimize import brentq
    from scipy.special import log_ndtr

    mu = float(mu)
    if mu <= 0:
        return 0.0

    def gap(eps: float) -> float:
        a = log_ndtr(-eps / mu + mu / 2)
        b = eps + log_ndtr(-eps / mu - mu / 2)
        return float(a + np.log1p(-np.exp(min(0.0, b - a))) - math.log(delta)) if b < a else -math.inf

    if gap(0.0) <= 0:
        return 0.0
    hi = max(1.0, mu * mu)
    while gap(hi) > 0:
        hi *= 2
    return float(brentq(gap, 0.0, hi, xtol=1e-10))


def fdp_epsilon(family: Tradeoff, theta: float, delta: float) -> float:
    """The eps at ``delta`` of the curve f_theta: theta itself for pure and (eps, delta') DP (at their own
    delta), :func:`gdp_epsilon` for Gaussian DP."""
    return gdp_epsilon(theta, delta) if family.kind == "gaussian" else float(theta)


# ---- the analysis a claim is judged by ----------------------------------------------------------------------

#: the analyses a bound can come from: Steinke et al.'s at delta ("steinke"; at delta = 0 for a pure claim),
#: and Mahloujifar et al.'s f-DP test for the (eps, delta)-DP curve at delta and for Gaussian DP
ANALYSES = ("steinke", "fdp-approx", "fdp-gaussian")


def analyses_for(claim: Guarantee | None, delta: float, gaussian: bool = False) -> tuple[tuple[str, float], ...]:
    """The analyses (and the delta each is at) that may judge ``claim``, from the claim and ``gaussian`` (whether
    the policy's noise is known to be Gaussian: every release its ledger recorded), never from the counts.

    * a pure eps-DP claim: Steinke et al.'s bound at delta = 0 (their Thm 3.1: exact binomial domination; at
      delta = 0 it was never looser than the f-DP test of the pure curve on the counts we tried), which
      contradicts the claim at any delta;
    * a zCDP claim of a policy whose noise is Gaussian (``gaussian``): the f-DP test of Gaussian DP, reading
      rho-zCDP as sqrt(2 rho)-GDP. **Assumption**: the claim's zCDP comes from those Gaussian mechanisms
      (composed adaptively they are exactly sqrt(sum 2 rho_i)-GDP, Dong, Roth & Su 2022; zCDP alone does not
      imply it: randomised response at eps is eps^2/2-zCDP but not eps-GDP). The bound is the eps at delta of
      the largest rejected mu, a lower bound on the mechanism's eps when its trade-off curve is Gaussian (and
      the claim's own sqrt(2 rho)-GDP is refuted whenever mu exceeds it). Without that evidence a zCDP claim
      is judged as any other;
    * any other claim (approximate DP, Rényi DP, compositions): at the audit's delta, Steinke et al.'s bound
      or the f-DP test of the (eps, delta)-DP curve, whichever the pilot predicts higher (the f-DP test has no
      2 m delta term, so it keeps its power with many canaries).
    """
    from dpaudit.accountants import ZCDP, PureDP

    if isinstance(claim, PureDP):
        return (("steinke", 0.0),)
    if isinstance(claim, ZCDP) and gaussian:
        return (("fdp-gaussian", float(delta)),)
    return (("steinke", float(delta)), ("fdp-approx", float(delta)))


def bound(analysis: str, m: int, r: int, v: int, delta: float, confidence: float) -> dict[str, float]:
    """The lower bound of ``analysis`` (:data:`ANALYSES`) from v correct of r guesses among m canaries:
    ``epsilon`` at ``delta`` (for Gaussian DP the eps at delta of the largest rejected mu, the assumption of
    :func:`analyses_for`) and ``theta``, the family's own parameter (eps, or mu)."""
    if analysis == "steinke":
        e = steinke_epsilon(m, r, v, delta, confidence)
        return {"epsilon": e, "theta": e}
    if analysis == "fdp-approx":
        e = fdp_lower(Tradeoff("approx", delta), m, r, v, confidence) if delta > 0 else \
            fdp_lower(Tradeoff("pure"), m, r, v, confidence)
        return {"epsilon": e, "theta": e}
    if analysis == "fdp-gaussian":
        mu = fdp_lower(Tradeoff("gaussian"), m, r, v, confidence)
        return {"epsilon": gdp_epsilon(mu, delta), "theta": mu}
    raise DPAuditError(f"the one-run analysis must be one of {', '.join(ANALYSES)}, got {analysis!r}.")


def cap(analysis: str, m: int, r: int, delta: float, confidence: float) -> float:
    """The largest bound r guesses among m canaries can give (every guess correct): the most a one-run audit
    with r guesses can show, whatever the mechanism (its power)."""
    return bound(analysis, m, r, r, delta, confidence)["epsilon"]


def _positive(analysis: str, m: int, r: int, v: int, delta: float, confidence: float) -> bool:
    """Whether the bound of ``analysis`` is above 0: its test rejects at eps = 0 (mu = 0)."""
    if analysis == "steinke":
        return steinke_p_value(m, r, v, 0.0, delta) < _level(confidence)
    family = Tradeoff("gaussian") if analysis == "fdp-gaussian" else (
        Tradeoff("approx", delta) if delta > 0 else Tradeoff("pure"))
    return fdp_rejects(family.inverse_blowup(0.0), m, r, v, confidence)


def smallest_positive(analysis: str, m: int, r: int, delta: float, confidence: float) -> float:
    """The smallest positive bound r guesses can give (at the fewest correct guesses whose bound is above 0);
    inf when none is."""
    if r == 0 or not _positive(analysis, m, r, r, delta, confidence):
        return math.inf
    lo, hi = 0, r
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _positive(analysis, m, r, mid, delta, confidence):
            hi = mid
        else:
            lo = mid
    return bound(analysis, m, r, hi, delta, confidence)["epsilon"]


# ---- the guesses: top and bottom k scores, k chosen on a pilot run -----------------------------------------

@dataclass(frozen=True)
class GuessRule:
    """Guess +1 (the canary's "high" side) for the ``plus`` highest scores of ``feature`` and -1 for the
    ``minus`` lowest, abstain on the rest; or (``either`` > 0, a *signed* rule) guess the sign of the score for
    the ``either`` largest |scores|, for a score centred where it says nothing (the action scores,
    :func:`action_features`). Fractions of the canaries counted."""

    feature: str
    plus: float
    minus: float
    either: float = 0.0

    def counts(self, n: int) -> tuple[int, int, int]:
        """(k+, k-, k+-) for n canaries: the guesses are fixed before any count, so r = k+ + k- + k+- is not
        random."""
        if self.either:
            return 0, 0, min(n, int(round(self.either * n)))
        kp = min(n, int(round(self.plus * n)))
        return kp, min(n - kp, int(round(self.minus * n))), 0

    def describe(self) -> str:
        if self.either:
            return (f"the sign of the {self.feature!r} score for the {_percent(self.either)} largest in size, "
                    "abstaining on the rest")
        parts = [f"+1 for the top {_percent(self.plus)}" if self.plus else "",
                 f"-1 for the bottom {_percent(self.minus)}" if self.minus else ""]
        return f"{' and '.join(p for p in parts if p)} of the {self.feature!r} scores, abstaining on the rest"


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.3g}%"


def guesses(scores: np.ndarray, kp: int, km: int, rng: np.random.Generator, either: int = 0,
            distinct: bool | None = None) -> np.ndarray:
    """T in {-1, 0, +1} per canary: +1 for the kp highest scores, -1 for the km lowest, and the sign of the
    score for the ``either`` largest |scores| (a random sign where the score is 0), 0 otherwise; ties broken at
    random by ``rng`` (which must not depend on the canaries' bits: the guesses are then a randomised function
    of the output, which both analyses allow). Exactly kp + km + either guesses.

    ``distinct`` (the scores have no ties; None: find out) takes a partition instead of a full sort, with the
    same result and the same draws from ``rng``."""
    s = np.asarray(scores, dtype=float).ravel()
    if not np.all(np.isfinite(s)):
        raise DPAuditError("a one-run score came out NaN or infinite; every canary needs a finite score.")
    n = s.size
    if kp + km + either > n or (either and kp + km):
        raise DPAuditError(f"{kp} + {km} + {either} guesses exceed the {n} canaries, or mix a signed rule with "
                           "top and bottom ones.")
    out = np.zeros(n, dtype=np.int64)
    if either:
        order = np.lexsort((rng.random(n), -np.abs(s)))  # descending |score|, random among ties
        pick = order[:either]
        sign = np.sign(s[pick]).astype(np.int64)
        zero = sign == 0
        sign[zero] = rng.choice(np.array([-1, 1]), size=int(zero.sum()))
        out[pick] = sign
        return out
    tiebreak = rng.random(n)
    if distinct is None:
        distinct = np.unique(s).size == n
    if distinct:  # no tie to break: the top kp and bottom km as sets, in linear time
        if kp:
            out[np.argpartition(-s, kp - 1)[:kp]] = 1
        if km:
            out[np.argpartition(s, km - 1)[:km]] = -1
        return out
    order = np.lexsort((tiebreak, -s))  # descending score, random among ties
    out[order[:kp]] = 1
    if km:
        out[order[n - km:]] = -1
    return out


#: the fractions of canaries the pilot may choose to guess on each side
FRACTIONS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5)
#: finer fractions, offered only where the pilot makes at least :data:`FINE_MIN_GUESSES` guesses with each
#: (thousands of canaries per run: the local audits): a Gaussian channel's eps above its claim may show only in
#: its tails (mutant-ldp-half-sensitivity, 0.41-GDP against eps = 1 at delta = 1e-5; benchmarks/results/one_run_gaussian.md)
FINE_FRACTIONS = (0.001, 0.002, 0.005, 0.01)
#: the fewest pilot guesses a finer fraction must make to be offered: with 4, the pilot's luck on a handful of
#: guesses chose fractions that then showed nothing (ldp-ucb's simulated channel at 4,096 users per run: median
#: bound 0.11 over 12 seeds, against 0.37 with the coarse fractions and 0.35 with 16). A finer fraction f is
#: offered for a score with at least 2 / f distinct values on the pilot only: the top f of a score with few
#: values (randomised response's two) is a random part of its ties, as accurate as the top 2% and fewer
#: (offered anyway, the pilot's luck chose them: ldp-ucb-rr 3 violations in 50 seeds at its exact claim and a
#: lower median bound, 0.913 against 0.944)
FINE_MIN_GUESSES = 16
#: the fractions of canaries a signed rule may guess (by the sign of its largest scores)
SIGNED_FRACTIONS = (0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 1.0)
#: the pilot's accuracy estimate: this quantile of the Beta(correct + 1/2, wrong + 1/2) posterior (a few
#: lucky pilot guesses must not win over many good ones)
PILOT_QUANTILE = 0.25


def _fractions(n: int, distinct: int) -> tuple[float, ...]:
    """The fractions a pilot score of ``n`` values, ``distinct`` of them different, is offered: :data:`FRACTIONS`
    and the finer ones it can rank."""
    return FRACTIONS + tuple(f for f in FINE_FRACTIONS if round(f * n) >= FINE_MIN_GUESSES and distinct * f >= 2)


def predicted_bound(pilot_correct: int, pilot_guesses: int, r: int, m_counted: int, confidence: float,
                    quantile: float = PILOT_QUANTILE) -> float:
    """The bound r guesses among ``m_counted`` canaries would give at the ``quantile`` of the pilot accuracy's
    Beta(correct + 1/2, wrong + 1/2) posterior, by Steinke et al. at delta = 0 (0 for no guess)."""
    from scipy.stats import beta as beta_dist

    if not r:
        return 0.0
    acc = float(beta_dist.ppf(quantile, pilot_correct + 0.5, pilot_guesses - pilot_correct + 0.5))
    return steinke_epsilon(m_counted, r, int(math.floor(acc * r)), 0.0, confidence)


class CandidateRow(TypedDict):
    """One guess rule :func:`choose_rule` tried on the pilot, and the bound it predicts."""

    feature: str
    plus: float  # the fractions of canaries guessed +1, -1, and either sign (signed rules)
    minus: float
    either: float
    pilot_guesses: int
    pilot_correct: int
    predicted: float


def candidate_row(rule: GuessRule, rows: list[CandidateRow]) -> CandidateRow:
    """The row of :func:`choose_rule`'s candidates that is ``rule``."""
    return next(c for c in rows if (c["feature"], c["plus"], c["minus"], c["either"])
                == (rule.feature, rule.plus, rule.minus, rule.either))


def choose_rule(pilot: dict[str, np.ndarray], pilot_bits: np.ndarray, m_counted: int, rng: np.random.Generator,
                confidence: float, signed: bool = False) -> tuple[GuessRule, float, list[CandidateRow]]:
    """The guess rule (feature, fractions on each side) with the largest predicted bound on ``m_counted``
    canaries, from the pilot's scores (``pilot``: feature name -> one score per pilot canary) and bits; with
    ``signed`` (scores centred where they say nothing), the signed rules (:class:`GuessRule`) too.

    The prediction: the rule's pilot accuracy (a low quantile of its Beta posterior, :data:`PILOT_QUANTILE`)
    times the r guesses it would make on the counted canaries, through Steinke et al.'s bound at
    delta = 0 (fast, and it ranks rules as the other analyses do). Returns the rule, its predicted bound and
    every candidate's row (for the findings). Uses the pilot only: the counted runs never choose anything.
    """
    y = np.asarray(pilot_bits).ravel()
    rows: list[CandidateRow] = []
    best: tuple[tuple[float, int], GuessRule] | None = None
    for name, sc in pilot.items():
        sc = np.asarray(sc, dtype=float).ravel()
        n_distinct = np.unique(sc).size
        fractions = _fractions(sc.size, n_distinct)
        distinct = n_distinct == sc.size
        shapes = [(fp, fm, 0.0) for fp in fractions for fm in fractions if 0 < fp + fm <= 1]
        if signed:
            shapes += [(0.0, 0.0, fe) for fe in SIGNED_FRACTIONS]
        for fp, fm, fe in shapes:
            rule = GuessRule(name, fp, fm, fe)
            kp, km, ke = rule.counts(y.size)
            if kp + km + ke == 0:
                continue
            t = guesses(sc, kp, km, rng, ke, distinct)
            r_p, c_p = int(np.count_nonzero(t)), int(np.count_nonzero(t * y > 0))
            r = sum(rule.counts(m_counted))
            pred = predicted_bound(c_p, r_p, r, m_counted, confidence)
            rows.append({"feature": name, "plus": fp, "minus": fm, "either": fe, "pilot_guesses": r_p,
                         "pilot_correct": c_p, "predicted": pred})
            # the largest prediction; among equal ones the most guesses (the larger cap)
            if best is None or (pred, r) > best[0]:
                best = ((pred, r), rule)
    if best is None:
        raise DPAuditError("the pilot run had no canary to choose the guesses on; give a longer --horizon.")
    return best[1], best[0][0], rows


# ---- canary layouts and the adversary's scores --------------------------------------------------------------

def dyadic_rounds(horizon: int) -> np.ndarray:
    """The canary rounds of the bandit layout: t = 2^k - 1 (k = 1, 2, ...) below T - 1.

    One canary per doubling block: a policy whose episodes double (per-arm doubling with forgetting, Azize &
    Basu 2023a, App. C) compares its arms' last episodes at the end of each block, where on a constant
    background the arms tie and the block's one canary decides the comparison; a canary's effect never mixes
    with another's in one release. A policy deciding every round sees fewer canaries than it could, and a
    policy deciding once per run (a commit, an elimination) gives at most one informative guess per run:
    that is the cap :func:`cap` reports.
    """
    T = int(horizon)
    out, k = [], 1
    while (1 << k) - 1 < T - 1:
        out.append((1 << k) - 1)
        k += 1
    return np.asarray(out, dtype=np.int64)


def canary_inputs(list_input: bool, n_arms: int, horizon: int, rounds: np.ndarray, bits: np.ndarray,
                  low: float, high: float, background: np.ndarray) -> np.ndarray:
    """The runs' inputs: row (or entry) ``rounds[i]`` of run j is ``high`` everywhere when bits[j, i] = +1 and
    ``low`` when -1; every other row is ``background`` (a T x K table, or a list of T rewards for View DP)."""
    bits = np.asarray(bits)
    R = bits.shape[0]
    base = np.asarray(background, dtype=float)
    d = np.broadcast_to(base, (R,) + base.shape).copy()
    val = np.where(bits > 0, float(high), float(low))
    if list_input:
        d[:, rounds] = val
    else:
        d[:, rounds, :] = val[:, :, None]
    return d


def first_pull_rounds(horizon: int, n_arms: int) -> np.ndarray:
    """The canary rounds of the *first-pulls* layout: 0 .. K - 1, then the dyadic rounds 2^k - 1 from K on.

    Many policies play every arm once, in index order, before their index decides (a UCB's or a greedy's
    initialisation, as AdaC-UCB's, Azize & Basu 2023a, App. C, Alg. 4): with K arms those K rounds are K
    canaries, one per arm, each alone in its arm's first release. On a constant background the order in which
    the arms are played again ranks those releases (``return``, :func:`action_features`), so a policy with
    many arms gives one informative canary per arm per run instead of one per doubling block. Past round K
    the layout is :func:`dyadic_rounds`'.
    """
    T, K = int(horizon), int(n_arms)
    d = dyadic_rounds(T)
    return np.concatenate([np.arange(min(K, T - 1), dtype=np.int64), d[d >= K]])


def action_features(views: np.ndarray, rounds: np.ndarray, returns: bool = False) -> dict[str, np.ndarray]:
    """The adversary's scores from the actions after each canary (views: runs x T; rounds: the canaries).

    With a = the arm played at the canary's round c (the one its reward went to), for the dyadic layout
    (:func:`dyadic_rounds`): ``next`` is 1 when the policy plays a again at c + 1, and ``share-c/4``,
    ``share-c`` are the shares of a among the actions of rounds c + 1 .. c + max(1, c / 4) and c + 1 .. 2c (a
    doubling policy's next block decides there), each minus 1/2 (what says nothing on two arms). With
    ``returns``, for the first-pulls layout (:func:`first_pull_rounds`, many arms) instead: ``return``, how
    soon a is played again (-log(1 + the rounds until then): the order in which the arms come back ranks their
    first releases); ``plays``, a's share of every later round (a greedy keeps favouring the arm whose first
    reward was high); ``ranks``, how early a's blocks of plays start among the other arms' blocks of the same
    order, averaged over a's blocks after the canary (:func:`_block_ranks`: a policy that reuses a reward in
    later releases keeps ranking its arm early); each centred at its median over the runs given. A high
    reward makes its arm more attractive to a policy that maximises reward, so high scores point to +1; the
    negated scores are candidates too (the pilot picks), for a policy that reacts the other way.

    The dyadic scores come in two orders among equal values (``next`` takes two values, the shares few):
    *later first* and *earlier first* (``next, later first`` ...: the score x (1 + 1e-6 j / m) for the j-th
    of m canaries, or m - 1 - j), so that the top and bottom k are the latest (earliest) of the canaries that
    score alike, not a random draw. A leak that grows with its block (a sensitivity off by the block's length)
    shows most on the later canaries; a leak confined to the first pulls, or canaries that later hide behind
    earlier ones, on the earlier. The first-pulls scores rarely tie and come later first only (fewer
    candidates for a pilot of one run). The pilot chooses. A function of the layout and the actions only, so
    the guesses stay a function of the output.
    """
    v = np.asarray(views)
    R, T = v.shape
    rounds = np.asarray(rounds, dtype=np.int64)
    a = v[:, rounds]
    m = len(rounds)
    position = np.arange(m) / max(1, m)
    orders = (("later first", 1.0 + 1e-6 * position), ("earlier first", 1.0 + 1e-6 * position[::-1]))
    out: dict[str, np.ndarray] = {}
    spans = (("next", lambda c: 1), ("share-c/4", lambda c: max(1, c // 4)), ("share-c", lambda c: max(1, c)))
    for name, span in () if returns else spans:
        sc = np.empty(a.shape)
        for j, c in enumerate(rounds):
            stop = min(T, int(c) + 1 + span(int(c)))
            sc[:, j] = (v[:, c + 1:stop] == a[:, j:j + 1]).mean(axis=1) if stop > c + 1 else 0.5
        for order, w in orders:
            out[f"{name}, {order}"] = (sc - 0.5) * w
            out[f"-{name}, {order}"] = -(sc - 0.5) * w
    if returns:
        back, rest = np.empty(a.shape), np.empty(a.shape)
        for j, c in enumerate(rounds):
            again = v[:, c + 1:] == a[:, j:j + 1]
            back[:, j] = -np.log1p(np.where(again.any(axis=1), again.argmax(axis=1), T - 1 - c))
            rest[:, j] = again.mean(axis=1) if c + 1 < T else 0.0
        back -= np.median(back) if back.size else 0.0
        rest -= np.median(rest) if rest.size else 0.0
        ranks = _block_ranks(v, rounds)
        for name, sc in (("return", back), ("plays", rest), ("ranks", ranks)):
            for order, w in orders[:1]:  # ties are rare (plays' ties say nothing): one order
                out[f"{name}, {order}"] = sc * w
                out[f"-{name}, {order}"] = -sc * w
    return out


def _block_ranks(views: np.ndarray, rounds: np.ndarray) -> np.ndarray:
    """For each run and canary round c (arm a = the arm played at c): the mean rank of a's later blocks.

    A block is a maximal run of consecutive plays of one arm; an arm's j-th block is ranked among every arm's
    j-th block by its start, 1 for the earliest and 0 for the latest (1/2 when it is the only one). The score
    averages the ranks of a's blocks that start after c (1/2 when there is none). An episodic policy plays an
    episode as one block, so the ranks order its releases: where every release of an arm holds the canary's
    reward, every one of them moves the arm's ranks the same way."""
    v = np.asarray(views)
    R, T = v.shape
    rounds = np.asarray(rounds, dtype=np.int64)
    out = np.full((R, len(rounds)), 0.5)
    for r in range(R):
        row = v[r]
        starts = np.flatnonzero(np.r_[True, row[1:] != row[:-1]])
        arms = row[starts]
        n = starts.size
        by_arm = np.lexsort((starts, arms))  # blocks by arm, then by start
        first = np.r_[True, arms[by_arm][1:] != arms[by_arm][:-1]]
        group = np.cumsum(first) - 1
        level = np.empty(n, dtype=np.int64)
        level[by_arm] = np.arange(n) - np.flatnonzero(first)[group]
        by_level = np.lexsort((starts, level))  # blocks by order, then by start
        lfirst = np.r_[True, level[by_level][1:] != level[by_level][:-1]]
        lgroup = np.cumsum(lfirst) - 1
        size = np.bincount(lgroup)
        pos = np.arange(n) - np.flatnonzero(lfirst)[lgroup]
        rank = np.empty(n)
        rank[by_level] = np.where(size[lgroup] > 1, 1.0 - pos / np.maximum(size[lgroup] - 1, 1), 0.5)
        for j, c in enumerate(rounds):
            later = (arms == row[c]) & (starts > c)
            if later.any():
                out[r, j] = rank[later].mean()
    return out


#: a message with at most this many distinct values in the pilot is scored by its likelihood ratio
DISCRETE_VALUES = 64


def message_scorer(pilot_messages: np.ndarray, pilot_bits: np.ndarray) -> tuple[str, Callable[[np.ndarray], np.ndarray]]:
    """A score for one user's message (rows of ``messages``: n x w), fitted on the pilot's canaries.

    A message with few distinct values (randomised response, a logged click) is scored by its log likelihood
    ratio between the pilot's high and low users (counts plus 1/2; a value the pilot never saw scores 0);
    any other by its projection on the pilot's mean difference (high minus low). Returns the scorer's name and
    the scorer."""
    X = np.asarray(pilot_messages, dtype=float).reshape(len(pilot_bits), -1)
    y = np.asarray(pilot_bits).ravel()
    hi, lo = X[y > 0], X[y < 0]
    values, inverse = np.unique(X, axis=0, return_inverse=True)
    if len(values) <= DISCRETE_VALUES and len(hi) and len(lo):
        inverse = inverse.ravel()
        n_hi = np.bincount(inverse[y > 0], minlength=len(values)) + 0.5
        n_lo = np.bincount(inverse[y < 0], minlength=len(values)) + 0.5
        llr = np.log(n_hi / n_hi.sum()) - np.log(n_lo / n_lo.sum())
        table = {tuple(v): float(s) for v, s in zip(values, llr)}

        def score(msgs: np.ndarray) -> np.ndarray:
            M = np.asarray(msgs, dtype=float).reshape(len(msgs), -1)
            return np.array([table.get(tuple(row), 0.0) for row in M])

        return f"likelihood ratio of the message ({len(values)} values on the pilot)", score
    w = (hi.mean(axis=0) if len(hi) else 0.0) - (lo.mean(axis=0) if len(lo) else 0.0)
    w = np.atleast_1d(np.asarray(w, dtype=float))
    if not np.any(w):
        w = np.ones(X.shape[1])

    def project(msgs: np.ndarray) -> np.ndarray:
        return np.asarray(msgs, dtype=float).reshape(len(msgs), -1) @ w

    return "projection of the message on the pilot's mean difference", project


def message_features(pilot_messages: np.ndarray, pilot_bits: np.ndarray,
                     counted_messages: np.ndarray) -> tuple[str, np.ndarray, np.ndarray]:
    """Scores of the pilot's and the counted canaries' messages (:func:`message_scorer`). The counted scores use
    the scorer fitted on the whole pilot; the pilot's own scores are cross-fitted (each half scored by the
    scorer of the other half), so that the pilot's choice of k is not flattered by scoring its own fit."""
    y = np.asarray(pilot_bits).ravel()
    X = np.asarray(pilot_messages, dtype=float).reshape(len(y), -1)
    name, scorer = message_scorer(X, y)
    half = np.arange(len(y)) % 2 == 0
    pilot_scores = np.empty(len(y))
    for part in (half, ~half):
        if part.all() or not part.any():
            pilot_scores[part] = scorer(X[part])
            continue
        pilot_scores[part] = message_scorer(X[~part], y[~part])[1](X[part])
    return name, pilot_scores, scorer(np.asarray(counted_messages, dtype=float).reshape(-1, X.shape[1]))
