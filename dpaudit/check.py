"""What ``dpaudit check policy`` does for a registered policy or plug-in: claim, ledger, attacks, verdict.

``audit_policy`` does the work and returns one JSON-ready dict; :mod:`dpaudit.cli.check` parses the
command line and prints it. (Finite policies are audited exactly by :mod:`dpaudit.attacks.exact`.)

Verdict rule (DESIGN.md, "Check and report"): ``violation`` when some attack's lower bound on
epsilon, at the stated confidence, exceeds the claimed epsilon at the same delta (or, for the
gray-box attack, when its lower bound on a Rényi divergence exceeds the claim's Rényi curve at an
order); ``inconclusive`` when the audit had no power: no attack saw the two sides' views differ on
any pair tried (every lower bound 0), the policy's actions never depended on its input up to the
horizon discovery's cap, or (black-box only) the claim lies above the largest bound the sample size
can give; otherwise ``consistent``, with the gap. The error budget 1 - confidence is split equally
between the attacks that run (Bonferroni), and each attack corrects internally for everything it
evaluates on fresh samples, so a policy that keeps its claim is called a violation with probability
at most 1 - confidence.

The claimed epsilon at delta comes from the claim's own conversion (``Guarantee.conversion``, the
accountants' tightest valid conversion); if a claim type has none, the loose but valid
rho + 2 sqrt(rho log(1/delta)) bound for zCDP is used and the method says so.
"""

from __future__ import annotations

import math
import platform
import time
from typing import Any, Callable, Sequence

import numpy as np

from dpaudit.accountants import ApproxDP, Guarantee
from dpaudit.accounting import ledger_audit
from dpaudit.attacks.bounds import smallest_detectable
from dpaudit.errors import DPAuditError, check_delta, check_int
from dpaudit.protocols import FixedActionSet

__all__ = ["findings_json", "claimed_epsilon", "audit_horizon", "audit_policy", "AuditInterrupted", "DEFAULTS"]

#: default sample sizes: fresh views per side, likelihood runs, and the ranking sizes; the horizon is
#: the starting point of :func:`audit_horizon` when ``--horizon`` is not given
DEFAULTS = {"runs": 50000, "horizon": 48, "confidence": 0.95}
#: the longest horizon :func:`audit_horizon` will choose on its own
MAX_AUTO_HORIZON = 16384




def claimed_epsilon(claim: Guarantee, delta: float) -> tuple[float, str]:
    """The claim as epsilon at ``delta`` and the conversion used.

    The result enters the verdict's comparison, so it is refused unless it is a finite number >= 0:
    a NaN compares false with every lower bound (a silent ``consistent``), and an infinite claim can
    never be exceeded, so an audit against it could not fail.
    """
    eps, method = _convert_claim(claim, delta)
    return _comparable_epsilon(claim, delta, eps), method


def _convert_claim(claim: Guarantee, delta: float) -> tuple[Any, str]:
    conv = getattr(claim, "conversion", None)
    if conv is not None:
        try:
            c = conv(delta)
            order = f" at order {c.order:.4g}" if getattr(c, "order", None) else ""
            return c.epsilon, f"{claim.describe()} -> (eps, delta) by {c.method}{order}"
        except NotImplementedError:
            pass
    rho = getattr(claim, "rho", None)
    if rho is not None:
        try:
            eps = rho + 2 * math.sqrt(rho * math.log(1 / delta))
        except (TypeError, ValueError):
            raise DPAuditError(f"the claim {claim!r} has rho = {rho!r}, which is not a number >= 0, so it cannot "
                               "be converted to (epsilon, delta).") from None
        return eps, f"{claim.describe()} -> rho + 2 sqrt(rho log(1/delta)) (valid but loose)"
    raise DPAuditError(f"the claim {claim!r} cannot be converted to (epsilon, delta); give a Guarantee from dpaudit.accountants.")


def _comparable_epsilon(claim: Guarantee, delta: float, eps: Any) -> float:
    """``eps`` as a float, refused unless finite and >= 0 (see :func:`claimed_epsilon`)."""
    try:
        value = float(eps)
    except (TypeError, ValueError):
        value = math.nan
    if math.isnan(value) or value < 0:
        raise DPAuditError(f"the claim {claim.describe()} converts to epsilon = {eps!r} at delta = {delta:g}, which is "
                           "not a number >= 0, so no lower bound can be compared with it; fix the claim's parameters.")
    if math.isinf(value):
        raise DPAuditError(f"the claim {claim.describe()} converts to epsilon = inf at delta = {delta:g}, which no lower "
                           "bound can exceed, so the audit could never find a violation; audit at a --delta the "
                           "claim covers.")
    return value


def first_release_step(policy: Any, protocol: Any, data: np.ndarray, seed: np.random.SeedSequence,
                       n_runs: int = 20) -> int | None:
    """The earliest step at which any of ``n_runs`` runs on ``data`` releases (None: no release)."""
    protocol.run(policy, data, n_runs, np.random.default_rng(seed), None, record=True)
    ledger = getattr(policy, "ledger", None)
    steps = [int(r.step) for r in getattr(ledger, "releases", [])]
    return min(steps) if steps else None


def audit_horizon(policy_for: Callable[[int], Any], protocol: Any, seed: np.random.SeedSequence,
                  reward_range: tuple[float, float], alphabet: Sequence[float] | None = None,
                  cells: int | None = None) -> tuple[int, str, Any]:
    """Choose the audit horizon. Returns (horizon, how it was chosen, the discovery's findings or None).

    A policy with a ledger: 48, or for one that releases nothing by then (phase-based policies such
    as GOPE, whose first phase can last thousands of rounds) the first release step plus 48 rounds,
    so that the view shows what the release changed (a horizon without a release audits nothing
    private). A policy without a ledger, or whose ledger shows no release within
    ``MAX_AUTO_HORIZON`` rounds (a policy may touch its data without recording it):
    :func:`dpaudit.attacks.neighbours.discover_horizon`, the first round whose action depends on
    the input, plus 48 rounds.
    """
    from dpaudit.attacks.neighbours import discover_horizon
    from dpaudit.protocols import PairSpec, make_pair

    T = DEFAULTS["horizon"]
    tail = DEFAULTS["horizon"]
    while hasattr(policy_for(T), "ledger"):
        policy = policy_for(T)
        d = make_pair(PairSpec(0, "mid"), protocol, int(policy.n_arms), T, reward_range, alphabet).d0
        step = first_release_step(policy, protocol, d, seed)
        if step is not None:
            if T == DEFAULTS["horizon"]:
                return T, "default", None
            return min(step + 1 + tail, T), (f"first release at step {step}, so the audit runs {tail} rounds past "
                                             f"it (the default {DEFAULTS['horizon']} sees no release)"), None
        if T >= MAX_AUTO_HORIZON:
            break
        T *= 2
    kw = {} if cells is None else {"cells": cells}
    choice = discover_horizon(policy_for, protocol, seed, reward_range, alphabet, start=DEFAULTS["horizon"], tail=tail,
                              **kw)
    why = choice.reason
    if T >= MAX_AUTO_HORIZON:
        why = f"its ledger shows no release within {MAX_AUTO_HORIZON} rounds, so the horizon comes from its actions: " + why
    return choice.horizon, why, choice


def _versions() -> dict[str, str]:
    import scipy
    import statsmodels

    from dpaudit import __version__

    return {"dpaudit": __version__, "python": platform.python_version(), "numpy": np.__version__,
            "scipy": scipy.__version__, "statsmodels": statsmodels.__version__}


def _build_policy(spec: str, params: dict[str, str], horizon: int, adapter: str | None = None,
                  claim: Any = None) -> Any:
    """The policy to audit at ``horizon`` (:func:`dpaudit.adapters.build_policy`: the horizon goes to
    whichever constructor parameter names it, ``claim`` replaces a declared one, ``adapter="per-run"``
    runs a one-run class as N copies)."""
    from dpaudit.adapters import build_policy
    from dpaudit.sandbox import is_plugin_spec, wrap_plugin

    if not isinstance(spec, str):  # the Python API (dpaudit.audit) passes a class or an instance
        return _policy_from_object(spec, params, horizon, adapter, claim)
    policy = build_policy(spec, params, horizon, adapter=adapter, claim=claim)
    if is_plugin_spec(spec):  # plug-in code, a per-run adapter's copies too, runs behind dpaudit.sandbox
        policy = wrap_plugin(policy, spec)
    return _claim_as_guarantee(policy)


def _policy_from_object(obj: Any, params: dict[str, Any], horizon: int, adapter: str | None = None,
                        claim: Any = None) -> Any:
    """The hook of :func:`dpaudit.audit` for a policy given as a class or an instance.

    A class is built with ``params`` (typed by its constructor's signature, as ``--param`` values are)
    and, like a registered name, receives the audit's horizon under whatever name its constructor
    gives it (:func:`dpaudit.adapters.horizon_parameter`); an instance is audited as it is (its own
    parameters, whatever the horizon). ``claim`` replaces a declared claim, as for a name.
    """
    from dpaudit.adapters import horizon_parameter, parse_claim
    from dpaudit.policies.registry import coerce_params

    if adapter is not None:
        raise DPAuditError("the per-run adapter takes the plug-in as a 'file.py:Class' or 'module:Class' string, "
                           f"not a {'class' if isinstance(obj, type) else 'policy object'}.")
    if isinstance(obj, type):
        params = dict(params)
        hp = horizon_parameter(obj)
        if hp is not None and hp not in params:
            params[hp] = horizon
        kwargs = coerce_params(obj, params)
        try:
            policy = obj(**kwargs)
        except TypeError as exc:
            raise DPAuditError(f"cannot build {obj.__name__} with parameters {kwargs}: {exc}.") from exc
        try:
            policy._params = dict(kwargs)
        except AttributeError:
            pass
    else:
        policy = obj
    if not hasattr(policy, "n_arms") and not getattr(policy, "continuous_actions", False):  # BCO: dpaudit.bco
        raise DPAuditError(f"policy {policy!r} has no n_arms attribute; a policy must say how many arms it has.")
    if claim is not None:
        policy.claim = parse_claim(claim) if isinstance(claim, str) else claim
    return _claim_as_guarantee(policy)


def _claim_as_guarantee(policy: Any) -> Any:
    """A claim given as a dp-accounting DpEvent becomes the Guarantee it describes (issue 11)."""
    from dpaudit.accountants.guarantees import _is_dp_event, as_guarantee

    claim = getattr(policy, "claim", None)
    if _is_dp_event(claim):
        try:
            policy.claim = as_guarantee(claim)
        except AttributeError:
            raise DPAuditError(f"policy {type(policy).__name__} states its claim {claim!r} as a read-only DpEvent; "
                               "dpaudit needs to read it as a Guarantee: make `claim` a plain attribute.") from None
    return policy


def _alphabet(policy: Any, given: Sequence[float] | None, rr: tuple[float, float]) -> tuple[float, ...] | None:
    """The rewards the audit may feed: ``given`` (``--rewards``), else the policy's ``reward_alphabet``,
    else None (any value in the reward range)."""
    from dpaudit.policies.base import check_alphabet

    raw = given if given is not None else getattr(policy, "reward_alphabet", None)
    if raw is None:
        return None
    letters = check_alphabet(raw, "the reward alphabet (--rewards)" if given is not None else
                              "the policy's reward_alphabet")
    if letters[0] < rr[0] or letters[-1] > rr[1]:
        raise DPAuditError(f"the reward alphabet {list(letters)} must lie in the policy's reward range "
                           f"[{rr[0]:g}, {rr[1]:g}].")
    return letters


def _probe_alphabet(policy: Any, protocol: Any, rr: tuple[float, float], notes: list[str]) -> tuple[float, ...] | None:
    """None if ``policy`` accepts the middle of its reward range; (lo, hi) if it refuses it but accepts
    the extremes (a policy written for {0, 1} rewards), with a note; else the policy's own error."""
    from dpaudit.protocols import PairSpec, make_pair

    d = make_pair(PairSpec(0, "mid"), protocol, int(policy.n_arms), 8, rr).d0
    try:
        protocol.run(policy, d, 4, np.random.default_rng(0), None, record=False)
        return None
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # the policy's own check of its rewards, whatever it raises
        first = exc
    letters = (float(rr[0]), float(rr[1]))
    d = make_pair(PairSpec(0, "mid"), protocol, int(policy.n_arms), 8, rr, letters).d0
    try:
        protocol.run(policy, d, 4, np.random.default_rng(0), None, record=False)
    except KeyboardInterrupt:
        raise
    except Exception:
        raise first
    notes.append(f"the policy refused the reward {0.5 * (rr[0] + rr[1]):g} ({type(first).__name__}: {first}), so every "
                 f"audit input uses only the rewards {{{rr[0]:g}, {rr[1]:g}}} (give --rewards to choose others).")
    return letters


def _with_features(policy: Any, seed: int) -> Any:
    dim = getattr(policy, "dim", None)
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool) or dim < 1:
        return policy
    x = np.random.default_rng([int(seed), 7]).standard_normal((int(policy.n_arms), int(dim)))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return FixedActionSet(policy, x)


#: keys of an audit's findings that describe how it ran, not what it found
RUN_KEYS = ("seconds", "workers", "checkpoint", "attacks_seconds")


def findings_json(out: dict[str, Any]) -> str:
    """An audit's findings as canonical JSON without run times and the engine's description: what must
    not depend on where (or whether from a checkpoint) its pieces ran."""
    import json

    from dpaudit.attacks.result import jsonable

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in RUN_KEYS}
        return [strip(v) for v in x] if isinstance(x, list) else x

    return json.dumps(strip(jsonable(out)), sort_keys=True)


class AuditInterrupted(Exception):
    """Ctrl-C during :func:`audit_policy`; ``partial`` holds the findings that had finished."""

    def __init__(self, partial: dict[str, Any]) -> None:
        super().__init__("the audit was interrupted")
        self.partial = partial


def audit_policy(
    spec: str,
    params: dict[str, str] | None = None,
    *,
    protocol: str = "table",
    delta: float = 1e-5,
    confidence: float = 0.95,
    runs: int = 50000,
    horizon: int | None = None,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    command: str = "",
    workers: int = 1,
    executor: Any = None,
    rewards: Sequence[float] | None = None,
    claim: Any = None,
    adapter: str | None = None,
    pair: str | None = None,
    scheduler: str | None = None,
    checkpoint: str | None = None,
    max_hours: float | None = None,
) -> dict[str, Any]:
    """Run the claim, the ledger audit, the neighbouring search and both attacks; return the findings.

    ``horizon=None`` lets :func:`audit_horizon` choose it (48 unless the policy's first release comes
    later; for a policy without a ledger, the first round its actions depend on the input).
    ``workers`` local processes (or a ``concurrent.futures`` ``executor``) run the independent
    pieces; the findings do not depend on them (:mod:`dpaudit.engine`). ``rewards``: the only rewards
    the policy accepts. ``claim`` (a Guarantee or text such as ``"pure:eps=1"``) replaces the one the
    policy declares; ``adapter="per-run"`` audits a one-run class as N copies
    (:class:`dpaudit.adapters.PerRun`); ``pair``: a ``dpaudit.pair/1`` file, audited instead of the
    search's candidates (:mod:`dpaudit.pairs`). On Ctrl-C this raises :class:`AuditInterrupted`
    carrying what had finished.

    Reliability (issue 12; :mod:`dpaudit.cost`, :mod:`dpaudit.engine`): ``scheduler`` (a Dask
    scheduler address, ``tcp://HOST:PORT``) runs the pieces on that cluster; ``checkpoint`` (a
    directory) records each finished piece and reuses it when the same audit runs again; before
    starting, an audit that would need more memory than is available or more than ``max_hours``
    (default 24) is refused with the largest value that fits (the CLI also refuses ``--workers``
    beyond the cores unless ``--force-workers``).
    """
    from dpaudit.attacks.bounds import check_confidence
    from dpaudit.engine import Engine, one_blas_thread
    from dpaudit.protocols import get_protocol
    from dpaudit.cost import audit_preflight
    from dpaudit.engine import Checkpoint, dask_executor
    from dpaudit.sandbox import file_digest, plugin_digest

    from dpaudit.policies.bco import is_bco

    if protocol != "local" and is_bco(spec):  # issue 10: BCO plays points, not arms (dpaudit.bco)
        raise DPAuditError(f"{spec!r} plays points of a convex body (BCO), not one of K arms, so the {protocol} audit's "
                           "reward tables do not apply; its central Table-DP view (the point sequence) is audited as "
                           "the 'central' part of --protocol local.")
    if protocol == "local":  # local DP is audited per user (issue 10): dpaudit.check_local
        from dpaudit.check_local import audit_local

        if pair is not None:
            raise DPAuditError("--pair gives a neighbouring pair of reward tables, but --protocol local compares one "
                               "user's data at its domain's extremes; drop --pair or use --protocol table.")
        given = [f for f, v in (("--scheduler", scheduler), ("--checkpoint", checkpoint), ("--max-hours", max_hours))
                 if v is not None]
        if given:  # never silently ignored (issue 12)
            raise DPAuditError(f"{', '.join(given)} apply to the table, view and interactive audits, not yet to "
                               "--protocol local; drop them or use another protocol.")
        check_int("--seed", seed, minimum=0)
        return audit_local(spec, params, delta=delta, confidence=confidence, runs=runs, horizon=horizon, seed=seed,
                           workers=workers, executor=executor, progress=progress, command=command, rewards=rewards,
                           claim=claim, adapter=adapter)
    if protocol in ("joint", "shuffle"):  # issue 13: joint and shuffle DP have their own audits
        from dpaudit.check_joint import audit_joint, audit_shuffle

        given = [name for name, v in (("--rewards", rewards), ("--claim", claim), ("--adapter", adapter),
                                      ("--pair", pair), ("--scheduler", scheduler), ("--checkpoint", checkpoint),
                                      ("--max-hours", max_hours)) if v is not None]
        if given:
            raise DPAuditError(f"{', '.join(given)} cannot be combined with --protocol {protocol}: its audit builds "
                               "its own contextual inputs and judges the policy's own claim.")
        check_int("--seed", seed, minimum=0)
        if protocol == "joint":
            return audit_joint(spec, params, delta=delta, confidence=confidence, runs=runs, horizon=horizon,
                               seed=seed, command=command, progress=progress)
        return audit_shuffle(spec, params, delta=delta, confidence=confidence, runs=runs, horizon=horizon, seed=seed,
                             command=command, progress=progress)
    t0 = time.perf_counter()
    delta = check_delta(delta)
    confidence = check_confidence(confidence)
    runs = check_int("--runs", runs, minimum=100)
    seed = check_int("--seed", seed, minimum=0)
    proto = get_protocol(protocol)
    params = dict(params or {})
    workers = check_int("workers", workers, minimum=1)
    with one_blas_thread():
        audit_preflight(lambda T: _with_features(_build_policy(spec, dict(params), T, adapter, claim), seed), proto,
                        runs=runs, horizon=horizon if horizon is not None else DEFAULTS["horizon"], workers=workers,
                        local=executor is None and scheduler is None, max_hours=max_hours)
    cp = None if checkpoint is None else Checkpoint(checkpoint, {  # everything that determines the findings
        "policy": spec, "params": params, "plugin_sha256": plugin_digest(spec), "protocol": protocol, "delta": delta,
        "confidence": confidence, "runs": runs, "horizon": horizon, "seed": seed,
        "rewards": None if rewards is None else [float(r) for r in rewards], "claim": None if claim is None else
        str(claim), "adapter": adapter, "pair": pair, "pair_sha256": file_digest(pair) if pair else None,
        "dpaudit": _versions()})
    close_scheduler = None
    if scheduler is not None:
        executor, health, close_scheduler = dask_executor(scheduler)
    else:
        health = None
    engine = Engine(workers, executor, checkpoint=cp, health=health)
    out: dict[str, Any] = {"command": command, "policy": spec, "params": params, "protocol": protocol,
                           "horizon": horizon, "delta": delta, "confidence": confidence, "seed": seed,
                           "workers": engine.describe() if scheduler is None else f"Dask cluster {scheduler}",
                           "notes": []}
    finished: dict[str, Any] = {}
    stage = "setup"
    try:
        with one_blas_thread():
            _audit(out, finished, spec, params, proto, delta, confidence, runs, horizon, seed, progress, engine,
                   rewards, claim, adapter, pair)
    except KeyboardInterrupt:
        stage = out.pop("_stage", stage)
        if "membership" in finished:
            stage = "likelihood attack (the membership attack had finished)"
        elif "ranking" in finished:
            stage += f" ({len(finished['ranking'])} candidate pairs ranked)"
        done = [finished[k] for k in ("membership", "likelihood") if k in finished]
        out.update({
            "verdict": "interrupted",
            "reason": (f"interrupted during the {stage} after {time.perf_counter() - t0:.0f} s, so there is no "
                       "verdict; the parts that finished are reported here, and rerunning the same command "
                       "reproduces them exactly"),
            "attacks": [a.to_dict() for a in done],
            "epsilon_lower": max((a.epsilon_lower for a in done), default=None),
            "witness": None,
            "search": finished.get("ranking", []),
            "versions": _versions(),
            "seconds": time.perf_counter() - t0,
        })
        if cp is not None:
            out["checkpoint"] = cp.summary()
        raise AuditInterrupted(out) from None
    finally:
        engine.close()
        if close_scheduler is not None:
            close_scheduler()
    if cp is not None:
        out["checkpoint"] = cp.summary()
    out.pop("_stage", None)
    _check_verdict_numbers(out)
    out["seconds"] = time.perf_counter() - t0
    return out


def _check_verdict_numbers(out: dict[str, Any]) -> None:
    """Refuse a verdict reached with a NaN bound: NaN compares false, so it would read as ``consistent``."""
    bounds = [("epsilon_lower", out.get("epsilon_lower"))]
    bounds += [(f"the {a.get('attack')} attack's bound", a.get("epsilon_lower")) for a in out.get("attacks", [])]
    for name, value in bounds:
        if value is not None and isinstance(value, (int, float)) and math.isnan(value):
            raise DPAuditError(f"{name} came out NaN, so the verdict cannot be decided; this is a dpaudit bug, "
                               "please report it with the command line.")


def _audit(out: dict[str, Any], finished: dict[str, Any], spec: str, params: dict[str, str], proto: Any,
           delta: float, confidence: float, runs: int, horizon: int | None, seed: int,
           progress: Callable[[str], None] | None, engine: Any, rewards: Sequence[float] | None = None,
           claim_given: Any = None, adapter: str | None = None, pair_file: str | None = None) -> None:
    """The stages of :func:`audit_policy`, filling ``out`` as each one finishes."""
    from dpaudit.attacks.bounds import eps_lower_from_counts
    from dpaudit.attacks.neighbours import search, threshold_pairs
    from dpaudit.protocols import candidate_pairs

    if proto.name == "interactive":
        probe = _build_policy(spec, dict(params), DEFAULTS["horizon"], adapter, claim_given)
        if not getattr(probe, "accepts_queries", True):
            raise DPAuditError(
                f"policy {spec!r} cannot be audited under Interactive DP: it only observes the arm it chose "
                "(its schedule fixes the observed arm), so an adversary's query cannot be fed back; use "
                "--protocol table or --protocol view."
            )
    root = np.random.SeedSequence(seed)
    s_ledger, s_search, s_horizon, s_threshold = root.spawn(4)
    notes: list[str] = out["notes"]
    out["_stage"] = "choice of the horizon"
    from dpaudit.adapters import PerRun
    from dpaudit.attacks.neighbours import PILOT_CELLS
    from dpaudit.protocols import audit_range

    features = None

    def build(T: int) -> Any:
        policy = _build_policy(spec, dict(params), T, adapter, claim_given)
        return FixedActionSet(policy, features) if features is not None else _with_features(policy, seed)

    probe = build(DEFAULTS["horizon"])
    rr = audit_range(probe)
    alphabet = _alphabet(probe, rewards, rr)
    if alphabet is None:
        alphabet = _probe_alphabet(probe, proto, rr, notes)
    if alphabet is not None:
        out["reward_alphabet"] = list(alphabet)
    # one-run classes cost a Python call per run and step: a smaller pilot budget for the searches
    cells = PILOT_CELLS // 30 if isinstance(probe, PerRun) else PILOT_CELLS
    user_pair = None
    if pair_file is not None:
        from dpaudit.protocols.pairs import load_pair

        user_pair = load_pair(pair_file, n_arms=int(probe.n_arms), protocol=proto, reward_range=rr, alphabet=alphabet)
        T_pair = int(np.asarray(user_pair.d0).shape[0])
        if horizon is not None and int(horizon) != T_pair:
            raise DPAuditError(f"--horizon {horizon} differs from the pair's T = {T_pair}; the pair file fixes the "
                               "horizon, so leave --horizon out.")
        horizon = T_pair
        ctx = getattr(user_pair, "contexts", None)
        if ctx is not None:
            ctx = np.asarray(ctx, dtype=float)
            if ctx.ndim != 2:
                raise DPAuditError("the pair's contexts must be one fixed action set (K x d) for now; per-round "
                                   "contexts (T x K x d) are not fed to policies yet.")
            features = ctx
        out["horizon_reason"] = f"the horizon of the pair in {pair_file}"
    if horizon is None:
        horizon, how, choice = audit_horizon(build, proto, s_horizon, rr, alphabet, cells=cells)
        out["horizon_reason"] = how
        if choice is not None:
            out["horizon_search"] = {"first_dependent_round": choice.first_dependent_round, "tried_up_to": choice.tried}
            if choice.first_dependent_round is None:
                out["_unseen"] = (f"no action of the policy depended on its input within {choice.tried} rounds, so "
                                  "there was nothing to audit")
        if how != "default":
            notes.append(f"horizon T = {horizon} chosen automatically: {how}.")
    horizon = check_int("--horizon", horizon, minimum=2)
    out["horizon"] = horizon
    policy = build(horizon)
    claim = getattr(policy, "claim", None)
    if not isinstance(claim, Guarantee):
        raise DPAuditError(
            f"policy {spec!r} declares no claim (its `claim` is {claim!r}); give the guarantee to check with --claim "
            "(e.g. --claim pure:eps=1 or --claim zcdp:rho=0.1; claim= in dpaudit.audit), or have the policy state a "
            "Guarantee from dpaudit.accountants."
        )
    claim_delta = getattr(claim, "delta", None)
    if isinstance(claim, ApproxDP) and claim_delta is not None and claim_delta > delta:
        notes.append(f"the claim's own delta = {claim_delta:g} exceeds the audit's delta = {delta:g}, where no finite "
                     f"epsilon is claimed; the audit compares at delta = {claim_delta:g} instead.")
        delta = float(claim_delta)
        out["delta"] = delta
    eps_claim, claim_method = claimed_epsilon(claim, delta)
    has_ledger = hasattr(policy, "ledger")
    n_attacks = 2 if has_ledger else 1
    conf_each = 1 - (1 - confidence) / n_attacks
    K = int(policy.n_arms)
    out.update({
        "params": getattr(policy, "params", lambda: params)() if callable(getattr(policy, "params", None)) else params,
        "n_arms": K, "claim": claim.describe(), "claim_method": claim_method, "epsilon_claimed": eps_claim,
        "confidence_per_attack": conf_each, "ledger": None,
    })
    small = max(500, min(2000, runs // 10))

    out["_stage"] = "ledger audit"
    ledger = None
    if has_ledger:
        from dpaudit.protocols import PairSpec, make_pair

        d = make_pair(PairSpec(0, "mid"), proto, K, horizon, rr, alphabet).d0
        ledger = ledger_audit(policy, proto, d, s_ledger)
        if ledger is not None and ledger.get("releases") == 0:
            if out.get("horizon_search", {}).get("first_dependent_round") is not None:
                notes.append("its ledger records no release, yet its actions depend on its input: it uses its data "
                             "outside dpaudit's mechanisms, so only the black-box attack can judge it.")
            else:
                notes.append(f"no release happened within T = {horizon} rounds, so the attacks saw nothing private "
                             "and their bounds say nothing about the claim; rerun with a larger --horizon "
                             "(or without it, to let dpaudit find the first release).")
    if ledger is not None:
        ledger_out = {k: v for k, v in ledger.items() if k != "implied_guarantee"}
        g = ledger.get("implied_guarantee")
        if g is not None:
            ledger_out["implied_epsilon"] = float(_convert_claim(g, delta)[0])  # may be inf (an unnoised release)
        out["ledger"] = ledger_out

    out["_stage"] = "neighbouring-pair search and attacks"
    try:
        engine.check_picklable(policy, proto)
    except DPAuditError as exc:
        notes.append(f"ran in this process only: {exc}")
        engine = engine.serial()
        out["workers"] = engine.describe()
    if user_pair is not None:
        specs = [user_pair]
        notes.append(f"audited on the neighbouring pair given in {pair_file} (round {user_pair.round} differs); "
                     "no search.")
    else:
        specs = candidate_pairs(proto, K, horizon)
    if proto.name == "table" and user_pair is None:
        out["_stage"] = "threshold search"
        extra, info = threshold_pairs(policy, proto, horizon, s_threshold, rr, alphabet, cells=cells)
        out["threshold_search"] = info
        specs += extra
        out["_stage"] = "neighbouring-pair search and attacks"
    res = search(policy, proto, horizon=horizon, delta=delta, confidence_membership=conf_each,
                 confidence_likelihood=conf_each if has_ledger else None, seed=s_search, specs=specs,
                 reward_range=rr, n_train=small, n_select=small, n_test=runs, n_screen=small, n_likelihood=runs,
                 claim=claim, progress=progress, engine=engine, finished=finished, alphabet=alphabet)
    attacks = [res.membership] + ([res.likelihood] if res.likelihood is not None else [])
    best = max(attacks, key=lambda a: a.epsilon_lower)
    renyi_violation = res.likelihood.details.get("renyi_violation", []) if res.likelihood is not None else []
    violated = best.epsilon_lower > eps_claim or bool(renyi_violation)
    ceiling = float(eps_lower_from_counts(0, runs, 0, runs, delta, conf_each, 1))
    power = {"pairs_tried": len(specs), "fresh_runs_per_side": runs,
             "membership_largest_bound": ceiling,
             "membership_smallest_detectable": smallest_detectable(runs, delta, conf_each)}
    out["power"] = power
    unseen = out.pop("_unseen", None)
    if not violated and unseen is None and best.epsilon_lower <= 0:
        unseen = (f"the two sides' views could not be told apart on any of the {len(specs)} neighbouring pairs tried "
                  f"(every lower bound is 0 at {confidence:g} confidence)")
    if not violated and unseen is None and not has_ledger and eps_claim > ceiling:
        unseen = (f"the claim eps = {eps_claim:.4g} lies above {ceiling:.4g}, the largest bound {runs} fresh runs per "
                  "side can give the black-box attack (the only one without a ledger)")
    verdict = "violation" if violated else ("inconclusive" if unseen else "consistent")
    if best.epsilon_lower > eps_claim:
        why = (f"the {best.attack} attack's lower bound eps >= {best.epsilon_lower:.4g} exceeds the claimed "
               f"eps = {eps_claim:.4g} at delta = {delta:g}")
        witness_attack = best
    elif renyi_violation:
        v = max(renyi_violation, key=lambda r: r["D_alpha_lower"] - r["claimed"])
        why = (f"the likelihood attack's lower bound D_{v['order']:g} >= {v['D_alpha_lower']:.4g} exceeds the "
               f"claimed Rényi divergence {v['claimed']:.4g} at that order")
        witness_attack = res.likelihood
    elif unseen:
        why = (f"{unseen}, so this audit is no evidence either way; try a longer --horizon, more --runs, or "
               "--pair PAIR.json with the inputs where you expect the policy to leak")
        witness_attack = best
    else:
        why = (f"no attack's lower bound exceeds the claimed eps = {eps_claim:.4g} at delta = {delta:g} "
               f"(best: {best.attack}, eps >= {best.epsilon_lower:.4g}; gap {eps_claim - best.epsilon_lower:.4g})")
        witness_attack = best
    out.update({
        "verdict": verdict,
        "reason": why,
        "epsilon_lower": best.epsilon_lower,
        "gap": eps_claim - best.epsilon_lower,
        "witness": {"attack": witness_attack.attack, **witness_attack.witness},
        "attacks": [a.to_dict() for a in attacks],
        "renyi_violation": renyi_violation,
        "search": res.ranking,
        "versions": _versions(),
    })






