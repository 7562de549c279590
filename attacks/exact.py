"""Exact audits of finite policies by enumeration: privacy profiles and Rényi divergences, no sampling.

For a :class:`~dpaudit.policies.finite.FinitePolicy` (decision-rule tables over K arms, horizon T and
a reward alphabet of size R) every view distribution is a finite vector over the K^T action
sequences, so the quantities of Azize & Basu (2023a), "Concentrated Differential Privacy for Bandits",
Sec. III, can be computed exactly:

* the privacy profile ``delta(eps) = max over neighbours of sum_a (P(a) - e^eps Q(a))_+``,
* the smallest ``eps >= 0`` with ``delta(eps) <= delta``,
* Rényi divergences ``D_alpha(P || Q)`` (``inf`` allowed),

under Table DP and View DP (Def. 3) and Interactive DP (Def. 4), where the maximum also runs over
every deterministic adversary, which suffices (App. B, Remark 6). Each answer comes with a witness:
the two inputs, the changed row, the adversary and the event.

Two reductions keep the enumeration small and exact. The reward of the last round is never
observed before the horizon ends, so inputs are enumerated over rounds ``1..T-1`` only (neighbours
that differ in round T give identical views and contribute delta = 0). For a fixed pair, the
smallest epsilon at level delta is ``max_S log((P(S) - delta) / Q(S))``, and the maximising event
is a prefix of the atoms sorted by likelihood ratio (the Neyman-Pearson sets), so it is read off
cumulative sums: no bisection, no per-sequence Python loop.

Enumeration is exponential. :func:`estimate_work` counts the work first and :func:`exact_profile`
refuses, naming the size and the limit, rather than hang.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence, TypedDict

import numpy as np

from dpaudit.errors import DPAuditError, check_delta, check_nonnegative, check_order, check_positive
from dpaudit.policies.finite import FinitePolicy

from .result import AuditResult

__all__ = [
    "DEFAULT_MAX_WORK",
    "ExactProfile",
    "estimate_work",
    "exact_profile",
    "exact_audit",
    "view_distributions",
    "view_distribution",
    "hockey_stick",
    "epsilon_for_delta",
    "witness_event",
    "renyi_divergence",
]

#: Default ceiling on elementary operations of one enumeration (about a minute of numpy on one core).
DEFAULT_MAX_WORK = 2e9
PROTOCOL_NAMES = ("table", "view", "interactive")
_CHUNK_ELEMENTS = 4_000_000


# ---------------------------------------------------------------------------------------------
# Divergences between pairs of discrete distributions (rows of P and Q), vectorised over pairs.
# ---------------------------------------------------------------------------------------------
def hockey_stick(P: np.ndarray, Q: np.ndarray, epsilon: float) -> np.ndarray:
    """``sum_a (P(a) - e^eps Q(a))_+`` along the last axis."""
    return np.maximum(P - math.exp(epsilon) * Q, 0.0).sum(axis=-1)


def epsilon_for_delta(P: np.ndarray, Q: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Smallest ``eps >= 0`` with ``hockey_stick(P, Q, eps) <= delta``, per row, and the event size.

    Returns ``(eps, k)``: the witness event is the ``k`` atoms of highest ratio P/Q (``k = 0`` when
    ``eps = 0`` is already enough).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(Q > 0, np.log(P) - np.log(Q), np.where(P > 0, np.inf, -np.inf))
    order = np.argsort(-ratio, axis=-1, kind="stable")
    cp = np.cumsum(np.take_along_axis(P, order, -1), axis=-1)
    cq = np.cumsum(np.take_along_axis(Q, order, -1), axis=-1)
    excess = cp - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        cand = np.where(excess > 1e-15, np.log(np.maximum(excess, 1e-300)) - np.log(cq), -np.inf)
    cand = np.where((excess > 1e-15) & (cq <= 0), np.inf, cand)
    k = np.argmax(cand, axis=-1)
    eps = np.take_along_axis(cand, k[..., None], -1)[..., 0]
    return np.maximum(eps, 0.0), np.where(eps > 0, k + 1, 0)


def renyi_divergence(P: np.ndarray, Q: np.ndarray, alpha: float) -> np.ndarray:
    """``D_alpha(P || Q)`` along the last axis, computed in log space; ``inf`` where P is not << Q."""
    support = P > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        logp = np.where(support, np.log(P), -np.inf)
        logq = np.where(Q > 0, np.log(Q), -np.inf)
        bad = np.any(support & (Q <= 0), axis=-1)
        if math.isinf(alpha):
            val = np.max(np.where(support, logp - logq, -np.inf), axis=-1)
        else:
            terms = np.where(support, alpha * logp + (1 - alpha) * logq, -np.inf)
            m = np.max(terms, axis=-1, keepdims=True)
            lse = m[..., 0] + np.log(np.sum(np.exp(terms - m), axis=-1))
            val = lse / (alpha - 1)
    return np.where(bad, np.inf, np.maximum(val, 0.0))


# ---------------------------------------------------------------------------------------------
# Enumeration of inputs, neighbours and adversaries.
# ---------------------------------------------------------------------------------------------
def _digits(n: int, base: int, width: int) -> np.ndarray:
    """(n, width) digits of 0..n-1 in ``base``, most significant first."""
    idx = np.arange(n, dtype=np.int64)
    powers = base ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return (idx[:, None] // powers) % base


@dataclass(frozen=True)
class _Space:
    """The finite inputs of one protocol and its neighbouring pairs."""

    K: int
    R: int
    T: int
    protocol: str

    @property
    def units(self) -> int:  # rounds whose data can influence the view
        return self.T - 1

    @property
    def unit_radix(self) -> int:  # values one unit (row or entry) can take
        return self.R**self.K if self.protocol != "view" else self.R

    @property
    def n_inputs(self) -> int:
        return self.unit_radix**self.units

    @property
    def n_pairs(self) -> int:
        return self.n_inputs * self.units * (self.unit_radix - 1)

    @property
    def n_views(self) -> int:
        return self.K**self.T

    @property
    def adversary_entries(self) -> int:
        return sum(self.K ** (s + 1) for s in range(self.units)) if self.protocol == "interactive" else 0

    @property
    def n_adversaries(self) -> int:
        return self.K**self.adversary_entries if self.protocol == "interactive" else 1

    @property
    def fixed_entries(self) -> int:  # adversary entries enumerated by the tree method (all but the last query)
        return sum(self.K ** (s + 1) for s in range(self.units - 1)) if self.protocol == "interactive" else 0

    def inputs(self) -> np.ndarray:
        """Reward indices, (n_inputs, T-1, K) for tables or (n_inputs, T-1) for lists."""
        if self.protocol == "view":
            return _digits(self.n_inputs, self.R, self.units)
        return _digits(self.n_inputs, self.R, self.units * self.K).reshape(self.n_inputs, self.units, self.K)

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Ordered neighbouring pairs ``(i, i2, unit)``: inputs i and i2 differ in unit ``unit`` only."""
        M, U = self.unit_radix, self.units
        unit_vals = _digits(self.n_inputs, M, U)  # (n_inputs, U)
        i = np.repeat(np.arange(self.n_inputs), U * M)
        j = np.tile(np.repeat(np.arange(U), M), self.n_inputs)
        w = np.tile(np.arange(M), self.n_inputs * U)
        v = unit_vals[i, j]
        keep = w != v
        i, j, w, v = i[keep], j[keep], w[keep], v[keep]
        i2 = i + (w - v) * M ** (U - 1 - j)
        return i, i2, j


class WorkEstimate(TypedDict):
    """What :func:`estimate_work` counts: the enumeration's sizes and its elementary operations."""

    protocol: str
    inputs: int
    neighbouring_pairs: int
    views: int
    adversaries: int
    adversaries_enumerated: float
    method: str  # "tree" or "brute" under Interactive DP, else "enumeration"
    work: float


def estimate_work(policy: FinitePolicy, protocol: str, method: str = "tree") -> WorkEstimate:
    """Sizes and elementary-operation count of an exact enumeration, without doing it.

    Under Interactive DP the ``tree`` method enumerates adversaries up to their last query and
    optimises the last query per output prefix (a factor ``K^(K^(T-1))`` fewer adversaries);
    ``brute`` enumerates every deterministic adversary.
    """
    sp = _Space(policy.n_arms, policy.n_rewards, policy.horizon, _check_protocol(protocol))
    if protocol == "interactive" and method == "tree":
        enumerated = float(sp.K) ** sp.fixed_entries
        work = enumerated * (sp.n_inputs * sp.n_views * sp.K * sp.T + sp.n_pairs * sp.n_views * sp.K * 12)
    else:
        enumerated = float(sp.n_adversaries)
        work = enumerated * sp.n_inputs * sp.n_views * max(sp.T, 1) + enumerated * sp.n_pairs * sp.n_views
    return {
        "protocol": protocol,
        "inputs": sp.n_inputs,
        "neighbouring_pairs": sp.n_pairs,
        "views": sp.n_views,
        "adversaries": sp.n_adversaries,
        "adversaries_enumerated": enumerated,
        "method": method if protocol == "interactive" else "enumeration",
        "work": work,
    }


def _check_protocol(protocol: str) -> str:
    if protocol not in PROTOCOL_NAMES:
        raise DPAuditError(f"protocol must be one of {', '.join(PROTOCOL_NAMES)}, got {protocol!r}.")
    return protocol


def _view_probs(rules: Sequence[np.ndarray], K: int, R: int, outputs: np.ndarray,
                queries: np.ndarray, rewards: np.ndarray) -> np.ndarray:
    """P(view = o) for every o: ``prod_t pi_t(o_t | q_1, r_1, ..., q_{t-1}, r_{t-1})``.

    ``outputs`` (V, T); ``queries`` and ``rewards`` (..., V, T-1), broadcastable.
    """
    T = outputs.shape[1]
    shape = np.broadcast_shapes(queries.shape, rewards.shape)[:-1]
    hist = np.zeros(shape, dtype=np.int64)
    prob = np.ones(shape)
    for t in range(T):
        prob = prob * rules[t][hist, outputs[:, t]]
        if t < T - 1:
            hist = hist * (K * R) + queries[..., t] * R + rewards[..., t]
    return prob


def view_distributions(policy: FinitePolicy, protocol: str = "table") -> tuple[np.ndarray, np.ndarray]:
    """Every view distribution under Table or View DP: ``(P, inputs)``.

    ``P[i]`` is the distribution over the K^T action sequences (base-K order, ``a_1`` most
    significant) for input ``i``; ``inputs`` holds reward indices as enumerated by the space.
    """
    if protocol not in ("table", "view"):
        raise DPAuditError(f"view_distributions covers the table and view protocols, got {protocol!r}.")
    sp = _Space(policy.n_arms, policy.n_rewards, policy.horizon, protocol)
    outputs = _digits(sp.n_views, sp.K, sp.T)
    inputs = sp.inputs()
    q = outputs[None, :, : sp.units]
    if protocol == "view":
        r = np.broadcast_to(inputs[:, None, :], (sp.n_inputs, sp.n_views, sp.units))
    else:
        s_idx = np.arange(sp.units)[None, None, :]
        r = inputs[np.arange(sp.n_inputs)[:, None, None], s_idx, q]
    return _view_probs(policy.rules, sp.K, sp.R, outputs, q, r), inputs


def view_distribution(policy: FinitePolicy, data: np.ndarray, protocol: str = "table") -> np.ndarray:
    """The exact distribution of the view (a_1..a_T, base-K order, ``a_1`` most significant) on one input:
    a T x K reward table (Table DP) or a list of T rewards (View DP), T <= the policy's horizon, every
    reward in its alphabet. One input, so ``K^T`` views and no enumeration of inputs."""
    if protocol not in ("table", "view"):
        raise DPAuditError(f"view_distribution covers the table and view protocols, got {protocol!r}.")
    d = np.asarray(data, dtype=float)
    K, R = policy.n_arms, policy.n_rewards
    if d.ndim != (1 if protocol == "view" else 2) or (protocol == "table" and d.shape[1] != K) \
            or not 1 <= d.shape[0] <= policy.horizon:
        raise DPAuditError(f"view_distribution needs {'a list of T' if protocol == 'view' else f'a T x {K} table of'} "
                           f"rewards with 1 <= T <= {policy.horizon}, got shape {d.shape}.")
    T = d.shape[0]
    idx = policy.reward_index(d.ravel()).reshape(d.shape)
    outputs = _digits(K**T, K, T)
    q = outputs[:, : T - 1]
    r = idx[None, : T - 1] if protocol == "view" else idx[np.arange(T - 1)[None, :], q]
    return _view_probs(policy.rules[:T], K, R, outputs, q, r)


# ---------------------------------------------------------------------------------------------
# The profile.
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Witness:
    """The neighbouring pair, the adversary and the event behind one exact number."""

    value: float
    input: list
    neighbour: list
    round: int  # 1-based round (user) whose data differs
    adversary: str
    event: list[list[int]]  # the action sequences of the distinguishing event
    p_event: float
    q_event: float

    def to_dict(self) -> dict[str, object]:
        return {
            "value": self.value,
            "round": self.round,
            "input": self.input,
            "neighbour": self.neighbour,
            "adversary": self.adversary,
            "event": self.event,
            "P(event)": self.p_event,
            "Q(event)": self.q_event,
        }


@dataclass
class ExactProfile:
    """Exact privacy numbers of a finite policy under one protocol (maxima over all neighbours)."""

    protocol: str
    horizon: int
    arms: int
    epsilons: list[float] = field(default_factory=list)
    delta_at: list[float] = field(default_factory=list)
    deltas: list[float] = field(default_factory=list)
    epsilon_at: list[float] = field(default_factory=list)
    alphas: list[float] = field(default_factory=list)
    renyi: list[float] = field(default_factory=list)
    witnesses: dict[str, list[Witness]] = field(default_factory=dict)
    sizes: WorkEstimate | dict[str, object] = field(default_factory=dict)  # empty until enumerated
    seconds: float = 0.0

    def delta(self, epsilon: float) -> float:
        return self.delta_at[self.epsilons.index(epsilon)]

    def epsilon(self, delta: float) -> float:
        return self.epsilon_at[self.deltas.index(delta)]

    def divergence(self, alpha: float) -> float:
        return self.renyi[self.alphas.index(alpha)]


def _adversary_queries(sp: _Space, start: int, stop: int, outputs: np.ndarray) -> np.ndarray:
    """Queries (n_adv, V, T-1) of deterministic adversaries ``start..stop-1``."""
    digits = (np.arange(start, stop, dtype=np.int64)[:, None]
              // sp.K ** np.arange(sp.adversary_entries - 1, -1, -1, dtype=np.int64)) % sp.K
    q = np.empty((stop - start, outputs.shape[0], sp.units), dtype=np.int64)
    offset = 0
    for s in range(sp.units):
        prefix = outputs[:, : s + 1] @ (sp.K ** np.arange(s, -1, -1, dtype=np.int64))
        q[:, :, s] = digits[:, offset + prefix]
        offset += sp.K ** (s + 1)
    return q


def _describe_adversary(sp: _Space, index: int | Sequence[int]) -> str:
    """Human description of a deterministic adversary, given by index or by its lookup-table digits."""
    if sp.protocol != "interactive":
        return "none (the policy observes the rewards of its own actions)"
    if isinstance(index, (int, np.integer)):
        digits = [(index // sp.K ** (sp.adversary_entries - 1 - p)) % sp.K for p in range(sp.adversary_entries)]
    else:
        digits = [int(d) for d in index]
    parts, offset, identity = [], 0, True
    for s in range(sp.units):
        n = sp.K ** (s + 1)
        table = digits[offset : offset + n]
        offset += n
        identity &= all(q == i % sp.K for i, q in enumerate(table))
        cells = ", ".join(f"{np.base_repr(i, sp.K).zfill(s + 1)}->{q}" for i, q in enumerate(table))
        parts.append(f"B_{s + 1}({cells})")
    return ("identity: " if identity else "") + "; ".join(parts)


def exact_profile(
    policy: FinitePolicy,
    protocol: str = "table",
    *,
    epsilons: Sequence[float] = (),
    deltas: Sequence[float] = (),
    alphas: Sequence[float] = (),
    max_work: float = DEFAULT_MAX_WORK,
    progress: Callable[[int, int], None] | None = None,
    method: str = "tree",
) -> ExactProfile:
    """Enumerate every neighbouring pair (and adversary) once and return the requested maxima.

    ``epsilons``: where to evaluate delta(eps); ``deltas``: where to find the smallest epsilon;
    ``alphas``: Rényi orders (``inf`` allowed). ``progress(done, total)`` is called after each chunk
    of adversaries (Interactive DP). ``method`` (Interactive DP only): ``tree`` optimises the last
    query per output prefix, ``brute`` enumerates every adversary (slow; kept as a cross-check). Raises :class:`DPAuditError` if the enumeration
    would exceed ``max_work`` elementary operations.
    """
    epsilons, deltas, alphas, max_work = _checked_request(policy, protocol, epsilons, deltas, alphas, method, max_work)
    sizes = estimate_work(policy, protocol, method)
    _refuse_beyond(policy, protocol, sizes, max_work)
    t0 = time.perf_counter()
    sp = _Space(policy.n_arms, policy.n_rewards, policy.horizon, protocol)
    prof = ExactProfile(protocol, sp.T, sp.K, list(epsilons), [0.0] * len(epsilons), list(deltas),
                        [0.0] * len(deltas), list(alphas), [0.0] * len(alphas), sizes=sizes)
    if sp.units == 0:  # T = 1: no observed reward can influence the view
        prof.witnesses = {"delta": [], "epsilon": [], "renyi": []}
    elif protocol == "interactive" and method == "tree":
        _interactive_tree(policy, sp, prof, progress)
    else:
        _enumerate_adversaries(_Enumeration.of(policy, sp), prof, progress)
    prof.seconds = time.perf_counter() - t0
    return prof


def _checked_request(policy: FinitePolicy, protocol: str, epsilons: Sequence[float], deltas: Sequence[float],
                     alphas: Sequence[float], method: str,
                     max_work: float) -> tuple[list[float], list[float], list[float], float]:
    """:func:`exact_profile`'s arguments checked, each fault refused in one sentence naming the value."""
    if not isinstance(policy, FinitePolicy):
        raise DPAuditError(
            f"exact enumeration needs a FinitePolicy (decision-rule tables), got {type(policy).__name__}; "
            "use the likelihood or membership attack for other policies."
        )
    _check_protocol(protocol)
    eps = [check_nonnegative("epsilon", e) for e in epsilons]
    if any(e > 700 for e in eps):  # e^eps overflows a double past ~709: refused by name, not an OverflowError
        raise DPAuditError(f"epsilon must be at most 700 for exact enumeration (e^epsilon overflows beyond), got "
                           f"{max(eps):g}.")
    dels = [check_delta(d, allow_zero=True) for d in deltas]
    orders = [check_order(a) for a in alphas]
    if method not in ("tree", "brute"):
        raise DPAuditError(f"method must be 'tree' or 'brute', got {method!r}.")
    # NaN would compare False and let any enumeration run
    return eps, dels, orders, check_positive("max_work", max_work)


def _refuse_beyond(policy: FinitePolicy, protocol: str, sizes: WorkEstimate, max_work: float) -> None:
    """Refuse an enumeration of more than ``max_work`` operations, naming its sizes and the way out."""
    if not sizes["work"] > max_work:
        return
    what = f"{sizes['inputs']} inputs x {sizes['views']} views"
    if protocol == "interactive":
        what = f"{sizes['adversaries_enumerated']:.3g} deterministic adversaries x " + what
    raise DPAuditError(
        f"exact {protocol} enumeration of this policy (T = {policy.horizon}, K = {policy.n_arms}, "
        f"R = {policy.n_rewards}) needs about {sizes['work']:.2g} operations ({what}), above the limit "
        f"{max_work:.2g}; use a sampling attack (dpaudit.attacks.likelihood or membership) or raise max_work."
    )


#: the profile's quantities: delta at each epsilon, epsilon at each delta, D_alpha at each order
_KINDS = ("delta", "epsilon", "renyi")


def _parameters(prof: ExactProfile, kind: str) -> list[float]:
    """Where the profile evaluates ``kind``: its epsilons (delta), deltas (epsilon) or orders (Rényi)."""
    return {"delta": prof.epsilons, "epsilon": prof.deltas, "renyi": prof.alphas}[kind]


class _Maxima:
    """The largest value so far of each requested quantity, keyed by (kind, index into its parameters), and
    where it was attained: (value, adversary, pair index, event size)."""

    def __init__(self) -> None:
        self.at: dict[tuple[str, int], tuple[float, int, int, int]] = {}

    def update(self, key: tuple[str, int], values: np.ndarray, a0: int, extra: np.ndarray | None = None) -> None:
        """Fold in ``values`` (adversaries ``a0``.., pairs); ``extra`` the event sizes beside them. Ties keep
        the first."""
        flat = int(np.argmax(values))
        v = float(values.flat[flat])
        if key not in self.at or v > self.at[key][0]:
            a, p = divmod(flat, values.shape[-1])
            self.at[key] = (v, a0 + a, p, int(extra.flat[flat]) if extra is not None else 0)

    def fill(self, prof: ExactProfile, witness: Callable[[str, int], Witness]) -> None:
        """Write the maxima and their witnesses (``witness(kind, index)``) into ``prof``."""
        prof.delta_at = [self.at[("delta", n)][0] for n in range(len(prof.epsilons))]
        prof.epsilon_at = [self.at[("epsilon", n)][0] for n in range(len(prof.deltas))]
        prof.renyi = [self.at[("renyi", n)][0] for n in range(len(prof.alphas))]
        prof.witnesses = {kind: [witness(kind, n) for n in range(len(_parameters(prof, kind)))] for kind in _KINDS}


@dataclass(frozen=True)
class _Enumeration:
    """What the steps of one enumeration share: the policy, its space, every view, input and neighbouring pair."""

    policy: FinitePolicy
    sp: _Space
    outputs: np.ndarray  # (V, T): every view, base-K order
    inputs: np.ndarray  # reward indices of every input (:meth:`_Space.inputs`)
    pi: np.ndarray  # pair p: input pi[p] and its neighbour pj[p], which differ in unit punit[p]
    pj: np.ndarray
    punit: np.ndarray

    @classmethod
    def of(cls, policy: FinitePolicy, sp: _Space) -> _Enumeration:
        pi, pj, punit = sp.pairs()
        return cls(policy, sp, _digits(sp.n_views, sp.K, sp.T), sp.inputs(), pi, pj, punit)

    def witness(self, value: float, p: int, adversary: str, event: np.ndarray, P: np.ndarray,
                Q: np.ndarray) -> Witness:
        """The witness of pair ``p``: ``event`` indexes the views, ``P`` and ``Q`` are its two distributions."""
        rv = self.policy.rewards
        return Witness(
            value=value,
            input=rv[self.inputs[self.pi[p]]].tolist(),
            neighbour=rv[self.inputs[self.pj[p]]].tolist(),
            round=int(self.punit[p]) + 1,
            adversary=adversary,
            event=self.outputs[np.sort(event)].tolist(),
            p_event=float(P[event].sum()),
            q_event=float(Q[event].sum()),
        )


def _enumerate_adversaries(en: _Enumeration, prof: ExactProfile, progress: Callable[[int, int], None] | None) -> None:
    """Fill ``prof`` by enumerating every deterministic adversary in chunks (Interactive DP), or the one
    view distribution of each input (Table and View DP: no adversary)."""
    sp = en.sp
    if sp.protocol == "interactive":
        per_adv = max(sp.n_pairs, sp.n_inputs) * sp.n_views
        chunk = max(1, _CHUNK_ELEMENTS // per_adv)
        starts = range(0, sp.n_adversaries, chunk)
    else:
        chunk, starts = 1, range(1)
    best = _Maxima()
    for a0 in starts:
        P = _adversaries_views(en, a0, min(a0 + chunk, sp.n_adversaries))  # (A, I, V)
        _measure(best, prof, P[:, en.pi], P[:, en.pj], a0)  # (A, pairs, V) each
        if progress is not None:
            progress(min(a0 + chunk, sp.n_adversaries), sp.n_adversaries)
    best.fill(prof, lambda kind, n: _adversary_witness(en, best.at[(kind, n)], kind, _parameters(prof, kind)[n]))


def _adversaries_views(en: _Enumeration, a0: int, a1: int) -> np.ndarray:
    """Every input's view distribution under adversaries ``a0..a1-1`` (Interactive DP), (A, I, V); under
    Table and View DP, (1, I, V)."""
    sp = en.sp
    if sp.protocol != "interactive":
        return view_distributions(en.policy, sp.protocol)[0][None]
    q = _adversary_queries(sp, a0, a1, en.outputs)[:, None]  # (A, 1, V, U)
    s_idx = np.arange(sp.units)[None, None, None, :]
    r = en.inputs[np.arange(sp.n_inputs)[None, :, None, None], s_idx, q]  # (A, I, V, U)
    return _view_probs(en.policy.rules, sp.K, sp.R, en.outputs, q, r)


def _measure(best: _Maxima, prof: ExactProfile, Pa: np.ndarray, Qa: np.ndarray, a0: int) -> None:
    """Every requested quantity of the pairs' distributions ``Pa``, ``Qa`` (A, pairs, V), folded into ``best``."""
    for n, e in enumerate(prof.epsilons):
        best.update(("delta", n), hockey_stick(Pa, Qa, e), a0)
    for n, d in enumerate(prof.deltas):
        eps, k = epsilon_for_delta(Pa, Qa, d)
        best.update(("epsilon", n), eps, a0, k)
    for n, al in enumerate(prof.alphas):
        best.update(("renyi", n), renyi_divergence(Pa, Qa, al), a0)


def _adversary_witness(en: _Enumeration, at: tuple[float, int, int, int], kind: str, param: float) -> Witness:
    """The witness of one maximum ``at`` = (value, adversary, pair, event size); ``param`` its epsilon, delta
    or order."""
    v, a, p, k = at
    sp = en.sp
    if sp.protocol == "interactive":
        q = _adversary_queries(sp, a, a + 1, en.outputs)[0]
        s_idx = np.arange(sp.units)[None, :]
        P, Q = (_view_probs(en.policy.rules, sp.K, sp.R, en.outputs, q, en.inputs[i][s_idx, q])
                for i in (en.pi[p], en.pj[p]))
    else:
        P_all = view_distributions(en.policy, sp.protocol)[0]
        P, Q = P_all[en.pi[p]], P_all[en.pj[p]]
    return en.witness(v, p, _describe_adversary(sp, a), witness_event(kind, v, k, param, P, Q), P, Q)


def witness_event(kind: str, v: float, k: int, param: float, P: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """The views of a witness's event: those with P > e^eps Q (delta at eps = ``param``), the ``k`` of largest
    ratio P/Q (epsilon: the Neyman-Pearson set of :func:`epsilon_for_delta`), or those that make D_alpha
    infinite, else the one of largest ratio (Rényi)."""
    if kind == "delta":
        return np.flatnonzero(P > math.exp(param) * Q)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(Q > 0, np.log(P) - np.log(Q), np.where(P > 0, np.inf, -np.inf))
    order = np.argsort(-ratio, kind="stable")
    if kind == "epsilon":
        return order[:k]
    return np.flatnonzero(np.isposinf(ratio)) if np.isposinf(v) else order[:1]


# ---------------------------------------------------------------------------------------------
# Interactive DP by enumeration of all but the last query.
# ---------------------------------------------------------------------------------------------
def _newton_epsilon(Pa: np.ndarray, Qa: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Smallest ``c = e^eps >= 1`` with ``g(c) = sum_u max_q sum_o (P - c Q)_+ <= delta``, per row.

    ``Pa, Qa``: (..., U, K, K) atoms indexed by prefix u, last query q and last action o. ``g`` is
    convex, decreasing and piecewise linear in ``c``, so Newton's method started at ``c = 1`` (left
    of the root) climbs monotonically onto it and stops after finitely many steps. Returns
    ``(log c, stuck)``; ``log c = inf`` where mass with ``Q = 0`` alone exceeds delta.
    """
    lead = Pa.shape[:-3]
    P2 = Pa.reshape((-1,) + Pa.shape[-3:])
    Q2 = Qa.reshape(P2.shape)
    c = np.ones(P2.shape[0])
    active = np.arange(P2.shape[0])  # rows still climbing; finished rows drop out
    for _ in range(200):
        Pr, Qr, cr = P2[active], Q2[active], c[active][:, None, None, None]
        gap = Pr - cr * Qr
        pos = gap > 0
        per_q = np.where(pos, gap, 0.0).sum(-1)  # (n, U, K)
        q = np.argmax(per_q, axis=-1)[..., None]
        g = np.take_along_axis(per_q, q, -1)[..., 0].sum(-1)
        slope = np.take_along_axis(np.where(pos, Qr, 0.0).sum(-1), q, -1)[..., 0].sum(-1)
        excess = g - delta
        finished = excess <= 1e-14 * np.maximum(1.0, g)
        stuck = ~finished & (slope <= 0)
        c[active[stuck]] = np.inf
        climbing = ~finished & ~stuck
        c[active[climbing]] += excess[climbing] / slope[climbing]
        active = active[climbing]
        if active.size == 0:
            break
    done = np.ones(c.shape, dtype=bool)
    done[active] = False
    return np.log(c).reshape(lead), ~done.reshape(lead)


def _prefix_and_history(rules, K, R, prefixes, queries, rewards):
    """P(prefix) and the history index after it, for prefixes of length T-1."""
    n = prefixes.shape[1]
    shape = np.broadcast_shapes(queries.shape, rewards.shape)[:-1]
    hist = np.zeros(shape, dtype=np.int64)
    prob = np.ones(shape)
    for t in range(n):
        prob = prob * rules[t][hist, prefixes[:, t]]
        hist = hist * (K * R) + queries[..., t] * R + rewards[..., t]
    return prob, hist


def _interactive_tree(policy: FinitePolicy, sp: _Space, prof: ExactProfile,
                      progress: Callable[[int, int], None] | None) -> None:
    """Fill ``prof`` for Interactive DP, optimising the adversary's last query per output prefix.

    The last query q_{T-1} = B_{T-1}(o_1..o_{T-1}) only changes the factor pi_T(o_T | ...) of the
    atoms below the prefix o_1..o_{T-1}. The hockey-stick divergence and sum P^a Q^(1-a) are sums
    over atoms, so their maximum over B_{T-1} is the sum over prefixes of the maximum over that
    prefix's query: exact, with K^(T-1) choices instead of K^(K^(T-1)) lookup tables.
    """
    tree = _Tree.of(_Enumeration.of(policy, sp))
    n_adv = sp.K**tree.n_fixed
    per_adv = sp.n_pairs * tree.prefixes.shape[0] * sp.K * sp.K
    chunk = max(1, _CHUNK_ELEMENTS // per_adv)
    best = _Maxima()
    for a0 in range(0, n_adv, chunk):
        a1 = min(a0 + chunk, n_adv)
        _, Pa, Qa = tree.atoms(a0, a1)
        _measure_tree(best, prof, Pa, Qa, a0)
        if progress is not None:
            progress(a1, n_adv)
    best.fill(prof, lambda kind, n: tree.witness(best.at[(kind, n)], kind, _parameters(prof, kind)[n]))
    prof.epsilon_at = [max(e, 0.0) for e in prof.epsilon_at]


@dataclass(frozen=True)
class _Tree:
    """Interactive DP's adversaries enumerated up to their last query (:func:`_interactive_tree`): the
    atoms of each pair under each adversary's first T-2 lookup tables and every last query."""

    en: _Enumeration
    prefixes: np.ndarray  # (V', U): every output prefix o_1..o_{T-1}
    n_fixed: int  # lookup-table entries of B_1..B_{T-2}, the ones enumerated

    @classmethod
    def of(cls, en: _Enumeration) -> _Tree:
        U = en.sp.units
        return cls(en, _digits(en.sp.K**U, en.sp.K, U), en.sp.fixed_entries)

    def atoms(self, a0: int, a1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Adversaries ``a0..a1-1``: their lookup tables (A, n_fixed) and the atoms P, Q of every pair, each
        (A, pairs, V', last query, o_T)."""
        sp, policy, prefixes = self.en.sp, self.en.policy, self.prefixes
        K, U = sp.K, sp.units
        if self.n_fixed:
            digits = (np.arange(a0, a1, dtype=np.int64)[:, None]
                      // K ** np.arange(self.n_fixed - 1, -1, -1, dtype=np.int64)) % K
        else:
            digits = np.zeros((a1 - a0, 0), dtype=np.int64)
        q = np.empty((a1 - a0, prefixes.shape[0], U), dtype=np.int64)
        offset = 0
        for s in range(U - 1):
            idx = prefixes[:, : s + 1] @ (K ** np.arange(s, -1, -1, dtype=np.int64))
            q[:, :, s] = digits[:, offset + idx]
            offset += K ** (s + 1)
        final = policy.rules[sp.T - 1]
        probs, lasts_p = None, []
        for ql in _digits(K, K, 1)[:, 0]:
            q[:, :, U - 1] = ql
            qb = q[:, None]  # (A, 1, V', U)
            r = self.en.inputs[np.arange(sp.n_inputs)[None, :, None, None], np.arange(U)[None, None, None, :], qb]
            pre, hist = _prefix_and_history(policy.rules, K, sp.R, prefixes, qb, r)
            probs = pre  # the prefix probability does not depend on the last query
            lasts_p.append(final[hist])  # (A, I, V', K)
        last = np.stack(lasts_p, axis=-2)  # (A, I, V', q, o_T)
        atoms_all = probs[..., None, None] * last
        return digits, atoms_all[:, self.en.pi], atoms_all[:, self.en.pj]

    def witness(self, at: tuple[float, int, int, int], kind: str, param: float) -> Witness:
        """The witness of one maximum ``at`` = (value, adversary, pair, _): its last query chosen per prefix."""
        v, a, p, _ = at
        digits, Pa, Qa = self.atoms(a, a + 1)
        Pa, Qa = Pa[0, p], Qa[0, p]  # (V', q, o_T)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(Qa > 0, np.log(Pa) - np.log(Qa), np.where(Pa > 0, np.inf, -np.inf))
        q = _last_queries(kind, v, param, Pa, Qa, ratio)
        Pq = np.take_along_axis(Pa, q[:, None, None], 1)[:, 0].reshape(-1)  # atoms in base-K order
        Qq = np.take_along_axis(Qa, q[:, None, None], 1)[:, 0].reshape(-1)
        rq = np.take_along_axis(ratio, q[:, None, None], 1)[:, 0].reshape(-1)
        full_digits = list(digits[0]) + [int(x) for x in q]
        return self.en.witness(v, p, _describe_adversary(self.en.sp, full_digits), _tree_event(kind, v, param, Pq, Qq, rq),
                               Pq, Qq)


def _measure_tree(best: _Maxima, prof: ExactProfile, Pa: np.ndarray, Qa: np.ndarray, a0: int) -> None:
    """Every requested quantity of the atoms ``Pa``, ``Qa`` (A, pairs, V', q, o_T), maximised over the last
    query per prefix, folded into ``best``."""
    for n, e in enumerate(prof.epsilons):
        per_q = np.maximum(Pa - math.exp(e) * Qa, 0.0).sum(-1)
        best.update(("delta", n), per_q.max(-1).sum(-1), a0)
    for n, d in enumerate(prof.deltas):
        eps, _ = _newton_epsilon(Pa, Qa, d)
        best.update(("epsilon", n), eps, a0)
    for n, al in enumerate(prof.alphas):
        best.update(("renyi", n), _renyi_tree(Pa, Qa, al), a0)


def _last_queries(kind: str, v: float, param: float, Pa: np.ndarray, Qa: np.ndarray, ratio: np.ndarray) -> np.ndarray:
    """The witness adversary's last query per prefix (V',): the one that attains the maximum of ``kind`` (value
    ``v``; ``param`` its epsilon or order) from the pair's atoms ``Pa``, ``Qa`` and log ratios (V', q, o_T)."""
    if kind == "renyi":
        al = param
        if math.isinf(v) or math.isinf(al):
            return np.argmax(ratio.max(-1), axis=-1)
        return np.argmax(np.where(Pa > 0, np.exp(al * np.log(np.where(Pa > 0, Pa, 1))
                                                 + (1 - al) * np.log(np.where(Qa > 0, Qa, 1))), 0).sum(-1), -1)
    c = math.exp(param) if kind == "delta" else math.exp(min(v, 700.0))
    return np.argmax(np.maximum(Pa - c * Qa, 0.0).sum(-1), axis=-1)


def _tree_event(kind: str, v: float, param: float, Pq: np.ndarray, Qq: np.ndarray, rq: np.ndarray) -> np.ndarray:
    """The views of a witness's event under its last queries (atoms ``Pq``, ``Qq``, log ratios ``rq``): those
    above e^eps (delta at eps = ``param``), those of ratio at least the value (epsilon; none at 0), or those
    that make D_alpha infinite, else the one of largest ratio (Rényi)."""
    if kind == "delta":
        return np.flatnonzero(Pq > math.exp(param) * Qq)
    if kind == "epsilon":
        event = np.flatnonzero(rq > v - 1e-12) if math.isfinite(v) else np.flatnonzero(np.isposinf(rq))
        return event[:0] if v == 0 else event
    return np.flatnonzero(np.isposinf(rq)) if math.isinf(v) else np.argsort(-rq, kind="stable")[:1]


def _renyi_tree(Pa: np.ndarray, Qa: np.ndarray, alpha: float) -> np.ndarray:
    """max over last queries of D_alpha, from atoms (..., U, K, K)."""
    support = Pa > 0
    bad = support & (Qa <= 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        if math.isinf(alpha):
            ratio = np.where(support & ~bad, np.log(np.where(support, Pa, 1)) - np.log(np.where(Qa > 0, Qa, 1)), -np.inf)
            val = ratio.max(axis=(-1, -2, -3))
            return np.where(bad.any(axis=(-1, -2, -3)), np.inf, np.maximum(val, 0.0))
        terms = np.where(support & ~bad, np.exp(alpha * np.log(np.where(support, Pa, 1))
                                                 + (1 - alpha) * np.log(np.where(Qa > 0, Qa, 1))), 0.0)
    per_q = terms.sum(-1)  # (..., U, K)
    inf_q = bad.any(-1)  # a query that makes the divergence infinite
    total = per_q.max(-1).sum(-1)
    val = np.log(np.maximum(total, 1e-300)) / (alpha - 1)
    return np.where(inf_q.any(axis=(-1, -2)), np.inf, np.maximum(val, 0.0))


def exact_audit(policy: FinitePolicy, protocol: str = "table", *, delta: float = 0.1,
                max_work: float = DEFAULT_MAX_WORK) -> AuditResult:
    """The exact epsilon at ``delta`` as an :class:`AuditResult` (confidence 1: no sampling)."""
    prof = exact_profile(policy, protocol, deltas=[delta], max_work=max_work)
    w = prof.witnesses["epsilon"][0].to_dict() if prof.witnesses["epsilon"] else {}
    return AuditResult(
        attack=f"exact-{protocol}",
        epsilon_lower=prof.epsilon_at[0],
        delta=delta,
        confidence=1.0,
        witness=w,
        samples=0,
        seconds=prof.seconds,
        details={"sizes": prof.sizes},
    )


# ---- finite local channels ----------------------------------------------------------------------------

def exact_channel_epsilon(P: np.ndarray, delta: float) -> tuple[float, tuple[int, int]]:
    """Exact eps(delta) of a finite channel P[z, o] (rows sum to 1): max over ordered pairs of inputs.

    delta(eps) = sum_o (P[z, o] - e^eps P[z', o])_+ is non-increasing in eps; eps(delta) is its
    smallest root, found by bisection to 1e-12 (inf when some o has P[z', o] = 0 < P[z, o] and that
    mass exceeds delta).
    """
    P = np.asarray(P, dtype=float)
    if P.ndim != 2 or P.shape[0] < 2 or np.any(P < 0) or not np.allclose(P.sum(axis=1), 1.0):
        raise DPAuditError(f"a finite channel's table must be (inputs >= 2, outputs) with rows of probabilities "
                           f"summing to 1, got shape {P.shape}.")
    best, arg = 0.0, (0, 1)
    for i in range(P.shape[0]):
        for j in range(P.shape[0]):
            if i == j:
                continue
            p, q = P[i], P[j]

            def dlt(e: float) -> float:
                return float(np.maximum(p - math.exp(e) * q, 0.0).sum())

            if dlt(0.0) <= delta:
                e = 0.0
            elif p[q == 0].sum() > delta:
                e = math.inf
            else:
                lo, hi = 0.0, 1.0
                while dlt(hi) > delta:
                    hi *= 2
                while hi - lo > 1e-12 * max(1.0, hi):
                    mid = 0.5 * (lo + hi)
                    lo, hi = (mid, hi) if dlt(mid) > delta else (lo, mid)
                e = hi
            if e > best:
                best, arg = e, (i, j)
    return best, arg


