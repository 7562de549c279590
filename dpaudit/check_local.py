"""``dpaudit check policy NAME --protocol local``: a local-DP claim audited per user.

Under local DP (seed 000 "Local DP"; seed 003 Def. 1) each user's data z_t is private and the
adversary sees the server's whole transcript: every message o_1..o_T and every action. A claim of
(eps, delta)-LDP says that every user's channel z -> o is (eps, delta)-DP over the whole data
domain. :func:`audit_local` checks it five ways and reports each:

1. *ledger* (exact arithmetic, no sampling): every message the policy sent through
   :mod:`dpaudit.mechanisms`'s channels on an audit table, composed per user (Gaussian messages by
   their exact joint multiplier mu = sqrt(sum mu_i^2), pure messages by summing eps), gives the
   exact per-user epsilon at delta, compared with the claim; plus the calibration lint of the
   closed-form Gaussian rule the channel used (:mod:`dpaudit.accountants.gaussian`).
2. *channel* (black box): the plug-in's ``channel(z_batch, rng)`` is queried with z and z' at the
   extremes of its ``domain`` (or the pairs of ``domain_pairs()``), and a threshold test on the
   message (on its projection onto the mean difference learnt on a training split, for vector
   messages) gives a Clopper-Pearson lower bound (:mod:`dpaudit.attacks.bounds`). A one-shot
   mechanism, so this is cheap and near tight.
3. *exact* (finite channels, e.g. randomised response): ``channel_table()`` gives P(o | z); the
   exact eps(delta) over every ordered pair of inputs, no sampling.
4. *transcript* (black box on the view): for users t in {0, 1, T/2, T-2}, neighbouring tables
   that differ in user t's row (domain extremes, mid background) are run through the protocol and
   the message the server received from user t (``transcript()``) is tested as in 2 (the server is
   causal, so these runs stop at round t + 1). This is what catches a server that peeks at a raw
   value: its channel is honest, its transcript is not.
5. *central* (Table DP, seed 001 Def. 3): LDP implies DP of the action sequence with the same
   (eps, delta) (seed 003 Thm 1), so :func:`dpaudit.check.audit_policy` runs with
   ``protocol="table"`` and the same claim and its findings are reported beside.

Verdict: ``violation`` when the ledger's exact per-user epsilon, an exact finite-channel epsilon,
or any lower bound at its confidence exceeds the claimed epsilon at delta (the central audit's own
verdict included); else ``consistent`` with the gap. Unlike the central audit, which reports its
ledger without judging by it, a ledger above the claim is a violation here: it is exact arithmetic
on the noise the users' channels recorded, so the claim is provably too low for what was done. The
threshold tests are chosen on a selection split for the bound they will give at the fresh sample
size and evaluated on fresh samples only. The error budget 1 - confidence is split
equally (Bonferroni) between the sampling parts (2, 4, 5); each part corrects internally for the
pairs it evaluates on fresh samples. Without a channel (``channel`` and ``domain``) the audit is
refused with that reason.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np

from dpaudit.accountants import ApproxDP, Guarantee
from dpaudit.accounting import calibration_lints, ledger_per_user
from dpaudit.attacks.exact import exact_channel_epsilon
from dpaudit.attacks.membership import threshold_attack
from dpaudit.errors import DPAuditError, check_delta, check_int

__all__ = ["audit_local", "channel_attack", "exact_channel_epsilon", "ledger_findings", "ledger_per_user",
           "local_markdown", "local_verdict", "write_local_report", "LOCAL_DEFAULTS"]

#: fresh channel samples per side = ``channel_factor`` x runs; transcript runs per side = runs / ``transcript_div``
LOCAL_DEFAULTS = {"channel_factor": 20, "transcript_div": 5, "central_div": 5, "chunk": 250_000}


def _has_channel(policy: Any) -> bool:
    if getattr(policy, "local_channel", True) is None:  # dpaudit's non-private twins: a channel method, no channel
        return False
    return callable(getattr(policy, "channel", None)) and getattr(policy, "domain", None) is not None


def _domain_pairs(policy: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    pairs = getattr(policy, "domain_pairs", None)
    if callable(pairs):
        out = [(np.asarray(a, dtype=float), np.asarray(b, dtype=float)) for a, b in pairs()]
        if not out:
            raise DPAuditError("domain_pairs() returned no pair of user data to compare.")
        return out
    try:
        lo, hi = (float(x) for x in policy.domain)
    except (TypeError, ValueError):
        raise DPAuditError(f"the policy's domain must be (low, high) for scalar data, or give domain_pairs(); "
                           f"got {policy.domain!r}.") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise DPAuditError(f"the policy's domain must be finite with low < high, got {policy.domain!r}.")
    return [(np.array(lo), np.array(hi))]


def _messages(policy: Any, z: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` messages of a user with data ``z`` as (n, m) floats, checked for shape and finiteness."""
    batch = np.broadcast_to(z, (n,) + z.shape).copy()
    try:
        m = np.asarray(policy.channel(batch, rng), dtype=float)
    except DPAuditError:
        raise
    except Exception as exc:  # the plug-in's channel failed on data from its own domain
        raise DPAuditError(f"the policy's channel raised {type(exc).__name__} on data {z.tolist()} from its own "
                           f"domain: {exc}.") from exc
    if m.shape[:1] != (n,):
        raise DPAuditError(f"the policy's channel returned messages of shape {m.shape} for {n} users; expected ({n}, ...).")
    if not np.all(np.isfinite(m)):
        raise DPAuditError("the policy's channel returned NaN or inf messages.")
    return m.reshape(n, -1)


def channel_attack(policy: Any, *, delta: float, confidence: float, n_fresh: int, n_select: int,
                   seed: np.random.SeedSequence, chunk: int = LOCAL_DEFAULTS["chunk"],
                   pair: tuple[float, float] | None = None):
    """Black-box lower bound on the channel's epsilon: z, z' at the domain's extremes (or ``pair``), threshold test on o."""
    from dpaudit.attacks.result import AuditResult

    t0 = time.perf_counter()
    pairs = _domain_pairs(policy) if pair is None else [(np.array(float(pair[0])), np.array(float(pair[1])))]
    best: dict[str, Any] | None = None
    rows = []
    for (z0, z1), ss in zip(pairs, seed.spawn(len(pairs))):
        res = threshold_attack(lambda side, n, rng: _messages(policy, z1 if side else z0, n, rng),
                                n_select, n_fresh, ss, delta, confidence, len(pairs), chunk)
        res["z"], res["z_prime"] = z0.tolist(), z1.tolist()
        rows.append(res)
        if best is None or res["epsilon_lower"] > best["epsilon_lower"]:
            best = res
    assert best is not None
    witness = {"label": f"user data z = {best['z']} vs z' = {best['z_prime']}", "statistic": best["score"],
               "threshold": best["threshold"], "direction": best["direction"]}
    return AuditResult("channel", best["epsilon_lower"], delta, confidence, witness,
                       samples=2 * len(pairs) * (n_fresh + n_select + max(1, n_select // 2)),
                       seconds=time.perf_counter() - t0, details={"fpr": best["fpr"], "fnr": best["fnr"], "pairs": rows})


def _transcript_attack(policy_for: Callable[[], Any], horizon: int, *, delta: float,
                       confidence: float, n_fresh: int, n_select: int, seed: np.random.SeedSequence,
                       pair: tuple[float, float] | None = None, background: str = "mid"):
    """Black-box bound on what the server received from user t, over neighbouring tables differing in t's row."""
    from dpaudit.protocols import PairSpec, make_pair
    from dpaudit.attacks.result import AuditResult
    from dpaudit.protocols import LocalDP

    t0 = time.perf_counter()
    proto = LocalDP()
    probe = policy_for()
    lo, hi = (float(x) for x in probe.domain) if pair is None else pair
    K = int(probe.n_arms)
    rounds = sorted({j for j in (0, 1, horizon // 2, horizon - 2) if 0 <= j <= horizon - 2})
    rows = []
    for j, ss in zip(rounds, seed.spawn(len(rounds))):
        # the server is causal: what it received from user j depends on rounds 0..j only, so the runs stop
        # at round j + 1 (make_pair's canary round must be below T - 1); exact, and much cheaper for small j
        nb = make_pair(PairSpec(j, background), proto, K, min(horizon, j + 2), (lo, hi))

        def sample(side: int, n: int, rng: np.random.Generator, j: int = j, nb: Any = nb) -> np.ndarray:
            pol = policy_for()
            getattr(pol, "wrapped", pol).keep_transcript = True  # past FixedActionSet, which forwards reads only
            proto.run(pol, nb.d1 if side else nb.d0, n, rng, None, record=False)
            return pol.transcript()[:, j, :]

        res = threshold_attack(sample, n_select, n_fresh, ss, delta, confidence, len(rounds), max(n_fresh, 1))
        res["round"] = j
        rows.append(res)
    best = max(rows, key=lambda r: r["epsilon_lower"])
    other = (lo + hi) / 2 if background == "mid" else lo
    witness = {"label": f"user {best['round']}'s row all {lo:g} vs all {hi:g} (other rows {other:g})",
               "statistic": best["score"], "threshold": best["threshold"], "direction": best["direction"]}
    return AuditResult("transcript", best["epsilon_lower"], delta, confidence, witness,
                       samples=2 * len(rounds) * (n_fresh + n_select + max(1, n_select // 2)),
                       seconds=time.perf_counter() - t0, details={"fpr": best["fpr"], "fnr": best["fnr"], "rounds": rows})


def ledger_findings(out: dict[str, Any], notes: list[str], policy: Any, ledger: dict[str, Any] | None,
                    users: int) -> None:
    """Record the ledger part (``out["ledger"]``, ``out["lints"]``) and its notes: too few recorded
    messages for the ``users`` (run, user) pairs simulated, and every flagged calibration lint."""
    if ledger is not None and ledger["messages"] and ledger.get("users", 0) < users:
        notes.append(f"only {ledger['users']} of {users} (run, user) pairs sent a recorded message.")
    out["ledger"] = ledger
    out["lints"] = calibration_lints(policy)
    notes.extend(ln["message"] for ln in out["lints"] if ln["flagged"])


def local_verdict(eps_claim: float, delta: float, ledger: dict[str, Any] | None, exact: dict[str, Any] | None,
                  attacks: list[Any], central_out: dict[str, Any] | None) -> tuple[str, str, float]:
    """(verdict, reason, best lower bound) of a local audit: ``violation`` when the ledger's exact per-user
    epsilon, a finite channel's exact epsilon, any attack's lower bound or the central audit exceeds the claim.

    Exact figures are compared up to their numerical precision (the conversions and the bisection solve to
    ~1e-12 relative), lower bounds strictly.
    """
    findings: list[tuple[float, str, float]] = []  # (value, text, relative tolerance)
    if ledger and ledger.get("epsilon") is not None:
        findings.append((ledger["epsilon"], f"the ledger's exact per-user epsilon {ledger['epsilon']:.4g} "
                                            f"({ledger['method']})", 1e-9))
    if exact is not None:
        findings.append((exact["epsilon"], f"the finite channel's exact epsilon {exact['epsilon']:.4g}", 1e-9))
    for a in attacks:
        findings.append((a.epsilon_lower, f"the {a.attack} attack's lower bound eps >= {a.epsilon_lower:.4g}", 0.0))
    bounds = [a.epsilon_lower for a in attacks]
    if central_out is not None and central_out.get("epsilon_lower") is not None:
        findings.append((central_out["epsilon_lower"], f"the central Table-DP audit's lower bound eps >= "
                                                        f"{central_out['epsilon_lower']:.4g}", 0.0))
        bounds.append(central_out["epsilon_lower"])
    best_lower = max(bounds) if bounds else 0.0
    over = [f for f in findings if f[0] > eps_claim * (1 + f[2])]
    if central_out is not None and central_out.get("verdict") == "violation" and not over:
        over.append((central_out["epsilon_lower"], f"the central Table-DP audit: {central_out['reason']}", 0.0))
    if over:
        worst = max(over, key=lambda f: f[0])
        reason = f"{worst[1]} exceeds the claimed eps = {eps_claim:.4g} at delta = {delta:g}"
        if len(over) > 1:
            reason += f" (and {len(over) - 1} more finding{'s' if len(over) > 2 else ''})"
        return "violation", reason, best_lower
    return "consistent", (f"no lower bound, exact channel or ledger figure exceeds the claimed eps = {eps_claim:.4g} "
                          f"at delta = {delta:g} (best lower bound {best_lower:.4g}; gap {eps_claim - best_lower:.4g})"), \
        best_lower


def audit_local(
    spec: str,
    params: dict[str, str] | None = None,
    *,
    delta: float = 1e-5,
    confidence: float = 0.95,
    runs: int = 50000,
    horizon: int | None = None,
    seed: int = 0,
    central: bool = True,
    workers: int = 1,
    executor: Any = None,
    progress: Callable[[str], None] | None = None,
    command: str = "",
    rewards: Any = None,
    claim: Any = None,
    adapter: str | None = None,
) -> dict[str, Any]:
    """Audit a local-DP claim (module docstring); returns a JSON-ready dict like :func:`dpaudit.check.audit_policy`.

    ``rewards`` (``--rewards``): the only user data the policy accepts; then z, z' are its smallest
    and largest value, the tables' other rows hold the smallest, and the central audit gets it too.
    ``claim`` and ``adapter`` are :func:`dpaudit.check.audit_policy`'s (a replacement claim; a one-run
    class run as N copies), passed on to the central audit as well.

    ``runs`` sets the sample sizes: ``20 runs`` fresh channel messages per side, ``runs / 5`` fresh
    transcript runs per side and per user tried, and ``runs / 5`` fresh runs per side for the central
    Table-DP audit (``central=False`` skips it).
    """
    from dpaudit import __version__
    from dpaudit.attacks.bounds import check_confidence
    from dpaudit.check import _alphabet, _build_policy, _with_features, audit_policy, claimed_epsilon
    from dpaudit.protocols import PairSpec, make_pair
    from dpaudit.protocols import TableDP

    t_start = time.perf_counter()
    delta = check_delta(delta)
    confidence = check_confidence(confidence)
    runs = check_int("--runs", runs, minimum=100)
    params = dict(params or {})
    T = check_int("--horizon", horizon, minimum=2) if horizon is not None else 48
    notes: list[str] = []

    def policy_for() -> Any:
        return _with_features(_build_policy(spec, dict(params), T, adapter, claim), seed)

    policy = policy_for()
    if not _has_channel(policy):
        raise DPAuditError(
            f"policy {spec!r} exposes no channel, so --protocol local cannot query what a user sends: a local-DP "
            "plug-in must give channel(z_batch, rng) -> messages and its data domain (see the README, 'Local DP')."
        )
    stated = getattr(policy, "claim", None)  # (``claim`` above stays the caller's replacement, if any)
    if not isinstance(stated, Guarantee):
        raise DPAuditError(f"policy {spec!r} declares no claim (its `claim` is {stated!r}); a local-DP policy must "
                           "state a Guarantee from dpaudit.accountants, e.g. ApproxDP(1, 1e-5).")
    if isinstance(stated, ApproxDP) and stated.delta > delta:
        notes.append(f"the claim's delta {stated.delta:g} is above --delta {delta:g}, where it promises nothing; "
                     f"audited at delta = {stated.delta:g}.")
        delta = stated.delta
    eps_claim, claim_method = claimed_epsilon(stated, delta)
    if getattr(policy, "continuous_actions", False):  # BCO plays points, not arms: dpaudit.bco's parts (issue 10)
        from dpaudit.bco import audit_local_bco

        if rewards is not None or adapter is not None:
            raise DPAuditError("--rewards and --adapter apply to K-armed policies; a BCO policy's users hold loss "
                               "functions, so drop them.")
        chan = getattr(policy, "local_channel", None)
        out_bco: dict[str, Any] = {
            "command": command, "policy": spec, "params": policy.params(), "protocol": "local", "horizon": T,
            "delta": delta, "confidence": confidence, "seed": seed, "claim": stated.describe(),
            "claim_method": claim_method, "epsilon_claimed": eps_claim, "notes": notes,
            "channel": chan.describe() if chan is not None else None,
            "seconds_before": time.perf_counter() - t_start}
        return audit_local_bco(policy_for, out_bco, delta=delta, confidence=confidence, runs=runs, horizon=T,
                               seed=seed, central=central, eps_claim=eps_claim, progress=progress)
    alphabet = None
    if rewards is not None:
        if callable(getattr(policy, "domain_pairs", None)):
            raise DPAuditError("--rewards applies to scalar user data; this policy's users send vectors "
                               "(domain_pairs()), so it cannot be restricted to a reward alphabet.")
        lo_d, hi_d = (float(x) for x in policy.domain)
        alphabet = _alphabet(policy, rewards, (lo_d, hi_d))
    root = np.random.SeedSequence(seed)
    s_ledger, s_channel, s_transcript = root.spawn(3)
    has_transcript = callable(getattr(policy, "transcript", None)) and hasattr(policy, "keep_transcript")
    n_parts = 1 + int(has_transcript) + int(central)
    conf_each = 1 - (1 - confidence) / n_parts
    K = int(policy.n_arms)
    lo_hi = getattr(policy, "reward_range", policy.domain)
    out: dict[str, Any] = {
        "command": command, "policy": spec, "params": policy.params() if callable(getattr(policy, "params", None)) else params,
        "protocol": "local", "horizon": T, "delta": delta, "confidence": confidence, "seed": seed, "n_arms": K,
        "claim": stated.describe(), "claim_method": claim_method, "epsilon_claimed": eps_claim,
        "confidence_per_attack": conf_each, "notes": notes,
    }
    chan = getattr(policy, "local_channel", None)
    if chan is not None:
        out["channel"] = chan.describe()

    # 1. ledger, per user
    if progress:
        progress("local: ledger")
    ledger = None
    rng_pair = (alphabet[0], alphabet[-1]) if alphabet else tuple(float(x) for x in lo_hi)
    background = "low" if alphabet else "mid"  # an alphabet need not contain the middle value
    if hasattr(policy, "ledger"):
        d = make_pair(PairSpec(0, background), TableDP(), K, T, rng_pair).d0
        TableDP().run(policy, d, 200, np.random.default_rng(s_ledger), None, record=True)
        ledger = ledger_per_user(policy.ledger, delta)
    ledger_findings(out, notes, policy, ledger, 200 * T)

    # 2. the channel, black box
    if progress:
        progress("local: channel attack")
    n_fresh = LOCAL_DEFAULTS["channel_factor"] * runs
    attacks = [channel_attack(policy, delta=delta, confidence=conf_each, n_fresh=n_fresh,
                              n_select=max(2000, runs // 2), seed=s_channel, pair=rng_pair if alphabet else None)]

    # 3. exact, finite channels
    exact = None
    if callable(getattr(policy, "channel_table", None)):
        try:
            inputs, outputs, P = policy.channel_table()
        except DPAuditError:
            inputs = None
        if inputs is not None:
            e, (i, j) = exact_channel_epsilon(P, delta)
            exact = {"epsilon": e, "inputs": np.asarray(inputs).tolist(), "outputs": np.asarray(outputs).tolist(),
                     "table": np.asarray(P).tolist(), "witness": {"z": float(inputs[i]), "z_prime": float(inputs[j])}}
    out["exact"] = exact

    # 4. the transcript, black box
    if has_transcript:
        if progress:
            progress("local: transcript attack")
        n_tr = max(1000, runs // LOCAL_DEFAULTS["transcript_div"])
        attacks.append(_transcript_attack(policy_for, T, delta=delta, confidence=conf_each,
                                          n_fresh=n_tr, n_select=max(1000, n_tr // 5), seed=s_transcript,
                                          pair=rng_pair if alphabet else None, background=background))
    else:
        notes.append("the policy keeps no transcript() of what its server received, so only its channel was attacked "
                     "black-box (a server that also reads raw data would show only in the central audit).")

    # 5. central Table DP
    central_out = None
    if central:
        if progress:
            progress("local: central Table-DP audit")
        central_out = audit_policy(spec, params, protocol="table", delta=delta, confidence=conf_each,
                                   runs=max(1000, runs // LOCAL_DEFAULTS["central_div"]), horizon=T, seed=seed,
                                   workers=workers, executor=executor, rewards=rewards, claim=claim, adapter=adapter)
        out["central"] = {k: central_out.get(k) for k in ("verdict", "reason", "epsilon_claimed", "epsilon_lower",
                                                          "gap", "witness", "attacks", "ledger", "notes", "seconds")}
    else:
        out["central"] = None

    verdict, reason, best_lower = local_verdict(eps_claim, delta, ledger, exact, attacks, central_out)
    out.update({
        "verdict": verdict, "reason": reason, "epsilon_lower": best_lower, "gap": eps_claim - best_lower,
        "attacks": [a.to_dict() for a in attacks],
        "versions": {"dpaudit": __version__, "numpy": np.__version__},
        "seconds": time.perf_counter() - t_start,
    })
    return out


def local_markdown(out: dict[str, Any]) -> str:
    """The local audit's findings as a Markdown report (every number needed to reproduce it)."""
    f = (lambda x: "-" if x is None else (f"{x:.4g}" if isinstance(x, (int, float)) else str(x)))
    lines = [f"# dpaudit check (local DP): {out['policy']}", "",
             f"**{out['verdict'].upper()}**: {out['reason']}.", "",
             f"- command: `{out.get('command', '')}`",
             f"- parameters: {out.get('params')}; {out.get('action_space') or 'K = ' + str(out.get('n_arms'))}, "
             f"T = {out.get('horizon')}, seed {out.get('seed')}",
             f"- claim: {out['claim_method']}: eps = {f(out['epsilon_claimed'])} at delta = {out['delta']:g}",
             f"- channel: {out.get('channel', 'given by the plug-in')}", "", "## Findings", "",
             "| part | epsilon | confidence | witness |", "| --- | ---: | ---: | --- |"]
    led = out.get("ledger") or {}
    if led.get("epsilon") is not None:
        lines.append(f"| ledger (exact, per user) | {f(led['epsilon'])} | exact | {led['method']}; {led['messages']} messages |")
    if out.get("exact"):
        w = out["exact"]["witness"]
        lines.append(f"| finite channel (exact) | {f(out['exact']['epsilon'])} | exact | z = {w['z']:g} vs z' = {w['z_prime']:g} |")
    for a in out["attacks"]:
        d = a["details"]
        lines.append(f"| {a['attack']} (lower bound) | {f(a['epsilon_lower'])} | {a['confidence']:.4g} | "
                     f"{a['witness']['label']}; threshold {a['witness']['threshold']:.4g}, FPR {d['fpr']:.4g}, "
                     f"FNR {d['fnr']:.4g} on {a['samples']} samples |")
    c = out.get("central")
    if c:
        lines.append(f"| central Table DP (lower bound) | {f(c['epsilon_lower'])} | {out['confidence_per_attack']:.4g} | "
                     f"{c['verdict']}: {c['reason']} |")
    for ln in out.get("lints", []):
        lines += ["", f"Calibration lint: {ln['message']}"]
    if out.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in out["notes"]]
    lines += ["", f"versions: {out.get('versions')}; {out.get('seconds', 0):.1f} s"]
    return "\n".join(lines) + "\n"


def write_local_report(out: dict[str, Any], path: str) -> list[Any]:
    """Write the Markdown report at ``path`` (.md) and a self-contained HTML page beside it."""
    import html
    from pathlib import Path

    p = Path(path)
    if p.suffix != ".md":
        raise DPAuditError(f"a report path must end in .md, got {str(p)!r}.")
    md = local_markdown(out)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(md)
        h = p.with_suffix(".html")
        h.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'>"
                     f"<title>dpaudit check (local): {html.escape(out['policy'])}</title></head><body><pre>"
                     f"{html.escape(md)}</pre></body></html>")
    except OSError as exc:
        raise DPAuditError(f"cannot write the report to {str(p)!r}: {exc.strerror}.") from None
    return [p, h]
