"""``dpaudit check policy NAME --protocol joint|shuffle``: audits under joint DP and shuffle DP (issue 13).

Both return the same kind of JSON-ready dict as :func:`dpaudit.check.audit_policy` (verdict, reason,
epsilon_claimed, epsilon_lower, gap, attacks, ledger, notes, ...).

Joint DP (seed 000, "anticipating JDP"). The adversary fixes every context and reward
(:class:`dpaudit.protocols.ContextInput`): the history before the canary round t and the future.
dpaudit's adversaries (a small search, choices of ours): contexts ``+e1`` and ``-e1`` on arms 0 and 1
(the zero vector on the others) in every round, rewards 1/2, and at round t either

* ``reward``: the canary's rewards are 1 on every arm versus 0 (moves the PGD gradients), or
* ``context``: the canary's arms all carry ``e1`` versus ``e2`` (moves the trees' outer products; ``-e1``
  when d = 1),

with t in {0, T/2}. Three attacks, Bonferroni-corrected (each at 1 - (1 - confidence)/3):

* ``membership`` (black-box, the JDP view ``a_{t+1}..a_T``): :class:`dpaudit.attacks.membership.ViewScorer`
  statistics fitted on a training split, the best (pair, statistic, threshold) chosen on a selection
  split, and Clopper-Pearson counts on fresh runs (:mod:`dpaudit.attacks.bounds`).
* ``tree-releases`` (gray-box): the same pipeline on the values of the binary-tree nodes at and beside
  the canary (every node whose interval contains t, and their siblings), scored by Fisher's linear
  discriminant fitted on the training split (ridge 1e-9 of the mean variance). A tree whose noise is
  missing or reused has a noise-free direction that the discriminant finds. Actions are post-processing
  of these releases, so the claim (which the policy proves for its releases) bounds this attack too.
* ``ledger``: the per-round composition of every release the policy recorded (exact accounting of its
  Gaussian releases, :func:`dpaudit.accounting.ledger_audit`); the policy's own record of releases beyond
  its claim is a violation without sampling error.

Beside them (not part of the verdict) the central view ``a_t..a_T`` is attacked on a pair whose canary
swaps which arm carries ``e1``: joint DP does not promise to hide a_t, and the report shows how much it
reveals.

Shuffle DP (seed 002 Alg. 1). The view is what the analyzer receives from one batch: the policy's
``batch_release`` runs on a first batch (the smallest, where amplification is weakest) fixed by the
adversary (:func:`shuffle_pairs`): the ``context`` pair puts the canary's outer-product coordinate (1, 1)
at the top of its range against a background at the bottom (the extreme canary), the ``reward`` pair
moves her gradient term by half its range against a background at the other side. Two feature
families (:func:`_shuffle_features`): the binned multiset (counts of every message cell: coordinate and
y-bin, with bins cut at the Piecewise Mechanism's pieces; a shuffler leaves nothing else) and the
cells of the messages at the canary's arrival position (informative only if the order was kept). For
each (pair, family) a discriminant on the 8 most separated cells is fitted on a training split, the
threshold chosen on a selection split for the fresh sample size (:func:`_threshold_on_selection`), and
the best candidate counted once on fresh views (Clopper-Pearson). The bound is compared with the
amplified claim at the policy's delta (an (eps, delta)-DP claim says nothing at a smaller delta);
``consistent`` needs a positive bound, and the findings carry the power (pairs and families tried,
fresh runs per side, the smallest and largest bound that sample size can show). The defaults: 40,000
fresh runs and 10,000 fitting runs per side (a batch of users is simulated per run).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np

from dpaudit.accountants import Guarantee
from dpaudit.attacks.bounds import smallest_detectable
from dpaudit.attacks.discriminant import lda_attack, screened_lda_attack
from dpaudit.attacks.membership import view_attack
from dpaudit.errors import DPAuditError, check_delta, check_int
from dpaudit.protocols.joint import (JointPair, joint_pairs, readout_pairs,
                                     tree_features)
from dpaudit.protocols.shuffle import ShufflePair, shuffle_features, shuffle_pairs

__all__ = ["JOINT_DEFAULTS", "joint_pairs", "audit_joint", "audit_shuffle", "lda_attack", "audit_joint_finite",
           "readout_pairs", "membership_power", "membership_only"]

#: a joint audit's horizon, and the most fresh runs per side it uses (larger --runs are capped, with a note)
JOINT_DEFAULTS = {"horizon": 16, "runs": 20000}
#: a shuffle audit simulates a whole batch per run, so it caps the fresh runs per side and the fitting sizes
SHUFFLE_CAPS = {"runs": 40000, "fit": 10000}
_CHUNK_CELLS = 4_000_000


# ---- the statistics ----------------------------------------------------------------------------------

def _chunks(n: int, cells_per_run: int, seed: np.random.SeedSequence) -> list[tuple[int, np.random.SeedSequence]]:
    size = max(1, _CHUNK_CELLS // max(1, cells_per_run))
    k = max(1, math.ceil(n / size))
    return [(min(size, n - i * size), ss) for i, ss in enumerate(seed.spawn(k)) if n - i * size > 0]


def _versions() -> dict[str, str]:
    from dpaudit.check import _versions as versions

    return versions()


def _build(spec: str, params: dict[str, str], horizon: int | None) -> Any:
    from dpaudit.check import _build_policy

    return _build_policy(spec, params, horizon if horizon is not None else JOINT_DEFAULTS["horizon"])


def _claim(policy: Any, spec: str, delta: float) -> tuple[Guarantee, float, str]:
    from dpaudit.check import claimed_epsilon

    claim = getattr(policy, "claim", None)
    if not isinstance(claim, Guarantee):
        raise DPAuditError(f"policy {spec!r} declares no claim (its `claim` is {claim!r}); a private policy must state "
                           "a Guarantee from dpaudit.accountants to be judged against.")
    eps, how = claimed_epsilon(claim, delta)
    return claim, eps, how


def _verdict(out: dict[str, Any], attacks: list[dict[str, Any]], eps_claim: float, delta: float,
             ledger_eps: float | None) -> None:
    best = max(attacks, key=lambda a: a["epsilon_lower"])
    out["attacks"] = attacks
    out["epsilon_lower"] = best["epsilon_lower"]
    out["gap"] = eps_claim - best["epsilon_lower"]
    out["witness"] = {"attack": best["attack"], **best["witness"]}
    if best["epsilon_lower"] > eps_claim:
        out["verdict"] = "violation"
        out["reason"] = (f"the {best['attack']} attack's lower bound eps >= {best['epsilon_lower']:.4g} exceeds the "
                         f"claimed eps = {eps_claim:.4g} at delta = {delta:g}")
    elif ledger_eps is not None and ledger_eps > eps_claim * (1 + 1e-9):
        out["verdict"] = "violation"
        out["reason"] = (f"the policy's own ledger composes to eps = {ledger_eps:.4g} per round, above the claimed "
                         f"eps = {eps_claim:.4g} at delta = {delta:g}")
        out["witness"] = {"attack": "ledger", **(out.get("ledger") or {})}
    elif best["epsilon_lower"] <= 0:
        # the project's rule (dpaudit.check): no power on any pair tried is no evidence either way
        out["verdict"] = "inconclusive"
        out["reason"] = (f"no attack told the two sides apart on any of the pairs tried (every lower bound is 0; "
                         f"claimed eps = {eps_claim:.4g}), so this audit is no evidence either way")
    else:
        out["verdict"] = "consistent"
        out["reason"] = (f"no attack's lower bound exceeds the claimed eps = {eps_claim:.4g} at delta = {delta:g} "
                         f"(best: {best['attack']}, eps >= {best['epsilon_lower']:.4g}; gap {out['gap']:.4g})")


def audit_joint(spec: str, params: dict[str, str] | None = None, *, delta: float = 1e-5, confidence: float = 0.95,
                runs: int = 20000, horizon: int | None = None, seed: int = 0, command: str = "",
                progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The joint-DP audit of a contextual policy (module docstring); returns a JSON-ready dict. A finite
    contextual policy (a bundled name or a ``.json`` spec) is audited exactly instead (:func:`audit_joint_finite`)."""
    from dpaudit.policies.finite_contextual import is_contextual_spec

    if is_contextual_spec(spec):
        return audit_joint_finite(spec, params, delta=delta, command=command, progress=progress)
    from dpaudit.attacks.bounds import check_confidence
    from dpaudit.accounting import ledger_audit
    from dpaudit.engine import one_blas_thread
    from dpaudit.protocols import JointDP

    t0 = time.perf_counter()
    delta = check_delta(delta)
    confidence = check_confidence(confidence)
    runs = check_int("--runs", runs, minimum=100)
    params = dict(params or {})
    T = check_int("--horizon", horizon if horizon is not None else JOINT_DEFAULTS["horizon"], minimum=3)
    policy = _build(spec, params, T)
    dim = getattr(policy, "dim", None)
    if not isinstance(dim, (int, np.integer)) or dim < 1:
        raise DPAuditError(f"policy {spec!r} has no context dimension `dim`, so it is not a contextual policy and "
                           "cannot be audited under joint DP; use --protocol table.")
    claim, eps_claim, how = _claim(policy, spec, delta)
    proto = JointDP()
    K = int(policy.n_arms)
    out: dict[str, Any] = {"command": command, "policy": spec, "params": params, "protocol": "joint", "horizon": T,
                           "delta": delta, "confidence": confidence, "seed": seed, "n_arms": K,
                           "claim": claim.describe(), "claim_method": how, "epsilon_claimed": eps_claim, "notes": []}
    root = np.random.SeedSequence(seed)
    s_ledger, s_view, s_tree, s_central = root.spawn(4)
    has_ledger = hasattr(policy, "ledger")
    n_att = 2 + (1 if has_ledger else 0)
    conf_each = 1 - (1 - confidence) / n_att
    out["confidence_per_attack"] = conf_each
    if runs > JOINT_DEFAULTS["runs"]:
        out["notes"].append(f"fresh runs capped at {JOINT_DEFAULTS['runs']} per side (asked {runs}) to keep the audit "
                            "within two minutes; the bounds hold at their confidence whatever the sample size.")
        runs = JOINT_DEFAULTS["runs"]
    small = max(500, min(4000, runs // 5))
    pairs = joint_pairs(K, int(dim), T)

    def views(pair: JointPair, side: int, n: int, ss: np.random.SeedSequence, record: bool = False) -> np.ndarray:
        data = pair.d1 if side else pair.d0
        return np.concatenate([proto.run(policy, data, m, np.random.default_rng(cs), record=record)
                               for m, cs in _chunks(n, T * K, ss)])

    with one_blas_thread():
        ledger_eps = None
        if has_ledger:
            if progress:
                progress("joint: ledger accounting")
            led = ledger_audit(policy, proto, pairs[0].d0, s_ledger)
            if led is not None:
                g = led.pop("implied_guarantee", None)
                if g is not None:
                    from dpaudit.check import claimed_epsilon

                    ledger_eps = claimed_epsilon(g, delta)[0]
                    led["implied_epsilon"] = ledger_eps
            out["ledger"] = led
        else:
            out["ledger"] = None

        # black-box on the JDP view a_{t+1}..a_T
        if progress:
            progress("joint: membership attack on a_{t+1}..a_T")
        view_pairs = pairs + readout_pairs(K, int(dim), T)  # + the PGD read-out adversary (appended section)
        attacks = [view_attack(view_pairs, views, K, T, s_view, delta, conf_each, small, runs, "membership",
                                lambda p: p.round)]

        if has_ledger:
            if progress:
                progress("joint: gray-box attack on the tree releases")

            def tree_sample(pair: JointPair, side: int, n: int, ss: np.random.SeedSequence) -> np.ndarray:
                data = pair.d1 if side else pair.d0
                feats = []
                for m, cs in _chunks(n, 8 * T * T.bit_length() * (int(dim) * (int(dim) + 1) // 2 + 1), ss):
                    proto.run(policy, data, m, np.random.default_rng(cs), record=True)
                    feats.append(tree_features(policy, pair.round, T))
                return np.concatenate(feats)

            attacks.append(lda_attack(tree_sample, pairs, s_tree, delta=delta, confidence=conf_each, n_train=small,
                                      n_select=small, n_test=runs, name="tree-releases"))

        # beside the verdict: the central view a_t..a_T
        cpairs = joint_pairs(K, int(dim), T, central=True)
        central = view_attack(cpairs, views, K, T, s_central, delta, confidence, small, runs, "central view",
                               lambda p: p.round - 1)
    out["central"] = central
    out["notes"].append(f"central view a_t..a_T (not promised by joint DP): eps >= {central['epsilon_lower']:.4g} on "
                        f"the pair '{cpairs[0].label}'.")
    out["power"] = membership_power(attacks[0], len(view_pairs), runs, delta, conf_each, eps_claim, T, has_ledger)
    if out["power"]["note"]:
        out["notes"].append(out["power"]["note"])
    _verdict(out, attacks, eps_claim, delta, ledger_eps)
    out["versions"] = _versions()
    out["seconds"] = time.perf_counter() - t0
    return out


def audit_shuffle(spec: str, params: dict[str, str] | None = None, *, delta: float | None = None,
                  confidence: float = 0.95, runs: int = 20000, horizon: int | None = None, seed: int = 0,
                  command: str = "", progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The shuffle-DP audit of a batched shuffle policy (module docstring); returns a JSON-ready dict."""
    from dpaudit.attacks.bounds import check_confidence
    from dpaudit.attacks.bounds import eps_lower_from_counts
    from dpaudit.engine import one_blas_thread
    from dpaudit.protocols import ShuffleDP

    t0 = time.perf_counter()
    confidence = check_confidence(confidence)
    runs = check_int("--runs", runs, minimum=100)
    params = dict(params or {})
    if horizon is None:  # the policy's own horizon (it only places the later batches; the view is the first)
        from dpaudit.policies.registry import make_policy

        policy = make_policy(spec, params)
    else:
        policy = _build(spec, params, check_int("--horizon", horizon, minimum=2))
    if not all(hasattr(policy, a) for a in ("batch_release", "batch0", "shuffler_outer", "shuffler_grad")):
        raise DPAuditError(f"policy {spec!r} has no shuffle pipeline (batch_release, batch0 and its shufflers), so it "
                           "cannot be audited under shuffle DP.")
    if not all(hasattr(sh, "decode") and hasattr(sh, "C") for sh in (policy.shuffler_outer, policy.shuffler_grad)):
        raise DPAuditError(f"policy {spec!r} shuffles messages the shuffle audit cannot read: it reads the messages of "
                           "dpaudit.mechanisms.PiecewiseShuffler (one sampled coordinate per message).")
    pdelta = getattr(policy, "delta", None)
    delta = check_delta(delta if delta is not None else pdelta)
    claim, eps_claim, how = _claim(policy, spec, delta)
    B, dim, groups = int(policy.batch0), int(policy.dim), int(policy.groups)
    proto = ShuffleDP()
    out: dict[str, Any] = {"command": command, "policy": spec, "params": params, "protocol": "shuffle",
                           "horizon": int(getattr(policy, "horizon", B)), "batch": B, "delta": delta, "confidence": confidence, "seed": seed,
                           "n_arms": int(policy.n_arms), "claim": claim.describe(), "claim_method": how,
                           "epsilon_claimed": eps_claim, "ledger": None, "confidence_per_attack": confidence,
                           "notes": [f"view: the shuffled messages of the first (smallest) batch ({B} users, {groups} PGD "
                                     "group(s)), where amplification is weakest."]}
    if pdelta is not None and delta < pdelta:
        out["notes"].append(f"the audit's delta {delta:g} is below the claim's {pdelta:g}, where the claim promises nothing.")
    pairs = shuffle_pairs(B, dim)
    size = B // groups

    def sample(pair: ShufflePair, side: int, n: int, ss: np.random.SeedSequence) -> dict[str, np.ndarray]:
        data = pair.d1 if side else pair.d0
        parts = [shuffle_features(policy, proto.run(policy, data, m, np.random.default_rng(cs)), pair.pos, size)
                 for m, cs in _chunks(n, B * 8, ss)]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    if progress:
        progress("shuffle: attack on the analyzer's view")
    if runs > SHUFFLE_CAPS["runs"]:
        out["notes"].append(f"fresh runs capped at {SHUFFLE_CAPS['runs']} per side (asked {runs}): every run simulates "
                            f"a batch of {B} users.")
        runs = SHUFFLE_CAPS["runs"]
    n_fit = max(500, min(SHUFFLE_CAPS["fit"], runs // 4))
    with one_blas_thread():
        att = screened_lda_attack(sample, pairs, np.random.SeedSequence(seed), delta=delta, confidence=confidence,
                             n_fit=n_fit, n_test=runs)
    parts = getattr(policy, "claim_parts", None)
    if parts:
        out["notes"].append("claim = basic composition of the amplified outer-product and gradient messages: "
                            + " + ".join(p.describe() for p in parts)
                            + f" (Feldman-McMillan-Talwar numerical bound; local guarantee {policy.eps0:g}-DP per message).")
    ceiling = float(eps_lower_from_counts(0, runs, 0, runs, delta, confidence, 1))
    out["power"] = {"pairs_tried": len(pairs), "candidates": att["details"]["candidates"], "fresh_runs_per_side": runs,
                    "fit_runs_per_side": n_fit, "membership_largest_bound": ceiling,
                    "membership_smallest_detectable": smallest_detectable(runs, delta, confidence)}
    _verdict(out, [att], eps_claim, delta, None)
    if out["verdict"] == "inconclusive":
        out["reason"] += (f"; with {runs} fresh runs per side the attack shows eps >= {out['power']['membership_smallest_detectable']:.3g}"
                          " at best for a pair as separable as randomised response, and a shuffled canary among "
                          f"{B} users is far less separable")
    elif out["verdict"] == "consistent":
        out["reason"] += (f"; power: {len(pairs)} pairs x 2 feature families tried, {runs} fresh runs per side (at most "
                          f"eps {ceiling:.3g} can be shown; a pair as separable as randomised response at eps "
                          f"{out['power']['membership_smallest_detectable']:.3g} would show a positive bound)")
    out["versions"] = _versions()
    out["seconds"] = time.perf_counter() - t0
    return out


# ==================================================================================================
# Exact joint-DP audits of finite contextual policies (issue 13; dpaudit.attacks.exact_joint). Appended.
# ==================================================================================================

#: relative tolerance of the exact comparison with the claim (float rounding of e^eps and of sums of
#: products of table entries; a finite spec's rows themselves are checked to sum to 1 within 1e-9)
EXACT_TOLERANCE = 1e-9


def audit_joint_finite(spec: Any, params: dict[str, str] | None = None, *, delta: float = 1e-5,
                       epsilon: float = 1.0, alpha: float = 2.0, max_work: float | None = None, command: str = "",
                       progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The exact joint-DP audit of a finite contextual policy (a bundled name such as ``jdp-finite-rr``, a
    ``.json`` spec of either finite format, or a ``FiniteContextualPolicy``): the exact eps at ``delta``,
    delta at ``epsilon`` and D_alpha under seed 000's definition (:mod:`dpaudit.attacks.exact_joint`),
    compared with the spec's claim. No sampling: ``consistent`` and ``violation`` are exact (up to
    :data:`EXACT_TOLERANCE`); a spec without a claim gets the numbers and verdict ``None``."""
    from dpaudit.accountants import ApproxDP, PureDP
    from dpaudit.attacks.exact import DEFAULT_MAX_WORK
    from dpaudit.attacks.exact_joint import exact_joint_profile
    from dpaudit.check import claimed_epsilon
    from dpaudit.policies.finite_contextual import load_contextual

    t0 = time.perf_counter()
    if params:
        raise DPAuditError(f"a finite contextual policy has no parameters (its rules are its spec), got {dict(params)}.")
    delta = check_delta(delta)
    policy = load_contextual(spec)
    claim = policy.claim
    deltas, epsilons = [delta], [float(epsilon)]
    point = None  # the claim's own (eps, delta) point, checked exactly as well
    if isinstance(claim, PureDP):
        point = (claim.epsilon, 0.0)
    elif isinstance(claim, ApproxDP):
        point = (claim.epsilon, claim.delta)
    if point is not None:
        epsilons.append(point[0])
    if progress:
        progress("joint: exact enumeration")
    prof = exact_joint_profile(policy, epsilons=epsilons, deltas=deltas, alphas=[alpha],
                               max_work=DEFAULT_MAX_WORK if max_work is None else max_work)
    label = spec if isinstance(spec, str) else (policy.label or "finite contextual policy")
    exact = {m: {"epsilon": prof.epsilon_at[m][0], "delta_at_epsilon": prof.delta_at[m][0], "renyi": prof.renyi[m][0],
                 "witness_epsilon": _wd(prof.witnesses[m]["epsilon"][0]),
                 "witness_delta": _wd(prof.witnesses[m]["delta"][0]),
                 "witness_renyi": _wd(prof.witnesses[m]["renyi"][0])} for m in prof.epsilon_at}
    eps_h = exact["history"]["epsilon"]
    out: dict[str, Any] = {
        "command": command, "policy": label, "params": {}, "protocol": "joint", "method": "exact enumeration",
        "horizon": policy.horizon, "n_arms": policy.n_arms, "contexts": list(policy.contexts),
        "rewards": [float(r) for r in policy.rewards], "delta": delta, "confidence": 1.0, "seed": 0,
        "at": {"epsilon": float(epsilon), "delta": delta, "alpha": float(alpha)}, "exact": exact, "sizes": prof.sizes,
        "ledger": None, "epsilon_lower": eps_h,
        "notes": [f"exact enumeration ({prof.seconds:.3g} s): every canary round, every history before it the policy "
                  "can produce, every pair of round-t triples (context, action, reward), every future of contexts and "
                  "per-arm rewards; no sampling.",
                  f"user-data neighbours (a_t drawn by the policy): eps = {_f(exact['data']['epsilon'])} at delta = "
                  f"{delta:g}; the central view a_t..a_T (not promised by joint DP): eps = "
                  f"{_f(exact['central']['epsilon'])}."],
    }
    attack = {"attack": "exact-joint", "epsilon_lower": eps_h, "delta": delta, "confidence": 1.0,
              "witness": {"label": _witness_label(exact["history"]["witness_epsilon"]),
                          **(exact["history"]["witness_epsilon"] or {})},
              "samples": 0, "seconds": prof.seconds,
              "details": {"renyi": {"orders": [float(alpha)], "lower": [exact["history"]["renyi"]]},
                          "delta_at_epsilon": {"epsilon": float(epsilon), "delta": exact["history"]["delta_at_epsilon"]},
                          "sizes": prof.sizes}}
    out["attacks"] = [attack]
    out["central"] = {"attack": "exact central view", "epsilon_lower": exact["central"]["epsilon"],
                      "witness": exact["central"]["witness_epsilon"]}
    out["witness"] = {"attack": "exact-joint", **attack["witness"]}
    if claim is None:
        out.update({"claim": None, "claim_method": None, "epsilon_claimed": None, "gap": None, "verdict": None,
                    "reason": "the spec states no claim, so there is nothing to judge; the exact numbers stand alone"})
    else:
        from dpaudit.api import claim_curves

        eps_claim, how = claimed_epsilon(claim, delta)
        out.update({"claim": claim.describe(), "claim_method": how, "epsilon_claimed": eps_claim,
                    "gap": eps_claim - eps_h, "claim_curves": claim_curves(claim)})
        reasons = []
        if eps_h > eps_claim * (1 + EXACT_TOLERANCE) + EXACT_TOLERANCE:
            reasons.append(f"the exact joint-DP epsilon at delta = {delta:g} is {_f(eps_h)}, above the claimed "
                           f"eps = {eps_claim:.6g}")
        if point is not None:
            d_exact = prof.delta_at["history"][1]
            out["claim_point"] = {"epsilon": point[0], "delta_claimed": point[1], "delta_exact": d_exact}
            if d_exact > point[1] + EXACT_TOLERANCE:
                reasons.append(f"at the claim's own eps = {point[0]:.6g} the exact delta is {d_exact:.6g}, above its "
                               f"delta = {point[1]:g}")
        if reasons:
            out["verdict"], out["reason"] = "violation", "; ".join(reasons) + " (exact, no sampling)"
        else:
            out["verdict"] = "consistent"
            out["reason"] = (f"the exact joint-DP epsilon at delta = {delta:g} is {_f(eps_h)} <= the claimed "
                             f"{eps_claim:.6g}" + (f", and delta at the claim's eps = {point[0]:.6g} is "
                                                   f"{prof.delta_at['history'][1]:.6g} <= {point[1]:g}" if point else "")
                             + " (exact, no sampling)")
    out["protocol_summary"] = ("input: per round a context label and per-arm rewards; view: a_{t+1}..a_T; neighbours: "
                               "round t's (context, action, reward) changed, the history before t and every future "
                               "context and reward fixed by the adversary (seed 000, anticipating JDP)")
    out["versions"] = _versions()
    out["seconds"] = time.perf_counter() - t0
    return out


def _f(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.6g}"


def _wd(w: Any) -> dict[str, Any] | None:
    return None if w is None else w.to_dict()


def _witness_label(w: dict[str, Any] | None) -> str:
    if not w:
        return "no pair differs"
    return (f"round {w['round']}: {tuple(w['canary'])} vs {tuple(w['neighbour'])} after history {w['history']}, "
            f"future contexts {w['future_contexts']}")


# ==================================================================================================
# The black-box attack's power under joint DP (issue 13): the PGD read-out adversary and the power
# section of the joint audit. Appended.
# ==================================================================================================

def membership_power(attack: dict[str, Any], pairs_tried: int, runs: int, delta: float, confidence: float,
                     eps_claim: float, horizon: int, has_ledger: bool = True) -> dict[str, Any]:
    """What the black-box attack on a_{t+1}..a_T could show at this sample size, and a plain note when the
    claim lies beyond what it showed (the verdict then rests on the gray-box and ledger parts)."""
    from dpaudit.attacks.bounds import eps_lower_from_counts

    ceiling = float(eps_lower_from_counts(0, runs, 0, runs, delta, confidence, 1))
    smallest = smallest_detectable(runs, delta, confidence)
    got = float(attack["epsilon_lower"])
    note = ""
    if got <= eps_claim:
        seen = "shows nothing (bound 0)" if got <= 0 else f"shows eps >= {got:.3g}"
        note = (f"power: the black-box attack on a_{{t+1}}..a_T {seen} at T = {horizon} with {runs} fresh runs per side "
                f"(it could show eps from {smallest:.3g} up to {ceiling:.3g}); the claimed eps = {eps_claim:.4g} is beyond "
                "what the actions revealed, so " + ("this verdict rests on the gray-box tree attack and the ledger"
                                                    if has_ledger else "with no ledger for a gray-box attack, "
                                                    "nothing in this audit tests the claim near its value"))
    return {"pairs_tried": pairs_tried, "fresh_runs_per_side": runs, "membership_epsilon_lower": got,
            "membership_smallest_detectable": smallest, "membership_largest_bound": ceiling, "note": note}


def membership_only(spec: str, params: dict[str, str] | None = None, *, horizon: int, pairs: str = "all",
                    delta: float = 1e-5, confidence: float = 0.95, runs: int = 20000, fit: int | None = None,
                    seed: int = 0) -> dict[str, Any]:
    """The joint audit's black-box attack alone (for measuring its power, ``benchmarks/joint_power.py``):
    ``pairs`` is ``"all"`` (the audit's pairs and the read-out pair), ``"default"`` or ``"readout"``;
    ``fit`` the views per side for fitting and for selection (default as the audit: runs/5 in [500, 4000])."""
    from dpaudit.engine import one_blas_thread
    from dpaudit.protocols import JointDP

    T = check_int("--horizon", horizon, minimum=3)
    runs = check_int("--runs", runs, minimum=100)
    policy = _build(spec, dict(params or {}), T)
    K, dim = int(policy.n_arms), int(policy.dim)
    chosen = {"all": joint_pairs(K, dim, T) + readout_pairs(K, dim, T), "default": joint_pairs(K, dim, T),
              "readout": readout_pairs(K, dim, T)}.get(pairs)
    if not chosen:
        raise DPAuditError(f"pairs must be 'all', 'default' or 'readout' (the read-out pair needs d >= 2 and T >= 8), "
                           f"got {pairs!r} at d = {dim}, T = {T}.")
    small = fit if fit is not None else max(500, min(4000, runs // 5))
    proto = JointDP()

    def views(pair: JointPair, side: int, n: int, ss: np.random.SeedSequence, record: bool = False) -> np.ndarray:
        data = pair.d1 if side else pair.d0
        return np.concatenate([proto.run(policy, data, m, np.random.default_rng(cs), record=False)
                               for m, cs in _chunks(n, T * K, ss)])

    with one_blas_thread():
        return view_attack(chosen, views, K, T, np.random.SeedSequence(seed), delta, confidence, small, runs,
                            "membership", lambda p: p.round)
