"""Exact joint-DP audits of finite contextual policies by enumeration: no sampling.

The interactive joint/local DP definitions (:mod:`dpaudit.papers`), Def. "Anticipating JDP": for every
round t, any two histories H_t, H'_t differing only at round t, and any future observations D_{t+1:T} = {(x_s, r_s)}_{s>t},

    P(a_{t+1..T} in E | H_t, D) <= e^eps P(a_{t+1..T} in E | H'_t, D) + delta,

with ``P(a_{t+1..T} | H_t, D) = prod_{s>t} pi_s(a_s | (x_u, a_u, r_u)_{u<s}, x_s)``. For a
:class:`~dpaudit.policies.finite_contextual.FiniteContextualPolicy` every such distribution is a finite
vector over the K^(T-t) action sequences, so the privacy profile ``delta(eps)``, the smallest eps at
a delta and the Rényi divergences are maxima over finitely many (t, history before t, neighbouring
round-t data, future) and are computed exactly. Two neighbour relations are reported:

* ``history`` (the verdict's: the definition above): round t's triple (c_t, a_t, r_t) vs (c'_t, a'_t, r'_t),
  the history before t fixed; a_t is part of the conditioning (user t's own action is not in the view).
  Choices where the definitions are silent: histories are those the policy can produce (every action in the
  history before t, and a_t, has positive probability under its rule); the future rewards are per-arm tables
  r_s(.) fixed in advance (user s's data), of which the policy observes r_s(a_s), so the maximum also covers
  futures whose observed rewards do not depend on the actions. The reward of round T is never observed and is
  not enumerated.
* ``data``: user t's data (c_t, r_t(.)) vs (c'_t, r'_t(.)) with a_t drawn by the policy
  (``sum_a pi_t(a | H_{t-1}, c_t) P(. | H_{t-1}, (c_t, a, r_t(a)), D)``). By joint convexity it is at
  most the ``history`` value; reported beside it.

Beside them the ``central`` view a_t..a_T (user t's own action included, data neighbours) shows what
joint DP does not promise. For one fixed pair and future the smallest eps at delta is read off the
Neyman-Pearson prefix sums (:func:`dpaudit.attacks.exact.epsilon_for_delta`), as in the exact
Table/View/Interactive audits.

Enumeration is exponential: :func:`joint_work` counts the work first and :func:`exact_joint_profile`
refuses beyond ``max_work``, naming the sizes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence, TypedDict

import numpy as np

from dpaudit.errors import DPAuditError, check_delta, check_nonnegative, check_order, check_positive
from dpaudit.policies.finite_contextual import FiniteContextualPolicy, histories

from .exact import DEFAULT_MAX_WORK, epsilon_for_delta, hockey_stick, renyi_divergence, witness_event

__all__ = ["MODES", "JointProfile", "joint_work", "exact_joint_profile", "view_distribution_brute"]

#: the neighbour relations, the verdict's first
MODES = ("history", "data", "central")
_CHUNK_ELEMENTS = 2_000_000
#: elementary operations per (pair, future, view) element of one quantity (argsort, cumsums, logs)
_OPS_PER_ELEMENT = 12


class RoundSizes(TypedDict):
    """The sizes of one canary round's enumeration (:func:`joint_work`)."""

    round: int  # 1-based
    prefixes: int  # histories before the round
    triples: int  # (context, arm, reward) triples of the round
    data: int  # users' data (context, per-arm rewards)
    futures: int  # future contexts and per-arm rewards
    views: int  # action sequences a_{t+1}..a_T


class JointWork(TypedDict):
    """What :func:`joint_work` counts: each canary round's sizes, the elementary operations and the pairs."""

    rounds: list[RoundSizes]
    work: float
    pairs: int


def _sizes(policy: FiniteContextualPolicy, t: int) -> RoundSizes:
    C, K, R, T = policy.n_contexts, policy.n_arms, policy.n_rewards, policy.horizon
    L = T - 1 - t
    U = C * K * R
    D = C * R**K
    return {"round": t + 1, "prefixes": U**t, "triples": U, "data": D, "futures": C**L * R ** (K * (L - 1)),
            "views": K**L}


def joint_work(policy: FiniteContextualPolicy, n_quantities: int = 3) -> JointWork:
    """Sizes of the exact joint-DP enumeration and its operation count, without doing it."""
    rounds: list[RoundSizes] = []
    work = 0.0
    for t in range(policy.horizon - 1):
        s = _sizes(policy, t)
        pairs = s["triples"] ** 2 + s["data"] ** 2 * (1 + policy.n_arms)
        elements = float(s["prefixes"]) * pairs * s["futures"] * s["views"]
        work += elements * _OPS_PER_ELEMENT * n_quantities
        rounds.append(s)
    return {"rounds": rounds, "work": work,
            "pairs": sum(r["prefixes"] * r["triples"] * (r["triples"] - 1) * r["futures"] for r in rounds)}


#: one round's triple as a witness shows it: (context label, arm, reward)
Triple = tuple[str, int, float]
#: one user's data as a witness shows it: (context label, [r(0), ..., r(K-1)])
UserData = tuple[str, list[float]]


@dataclass
class JointWitness:
    """The neighbouring pair, fixed history and future behind one exact number."""

    value: float
    round: int  # 1-based canary round
    history: list[Triple]  # before the canary round
    canary: Triple | UserData  # a triple (history relation) or a user's data (data and central relations)
    neighbour: Triple | UserData
    future_contexts: list[str]
    future_rewards: list[list[float]]  # per later round s < T: [r_s(0), ..., r_s(K-1)]
    event: list[list[int]]  # the view sequences (arms of rounds t+1..T, or t..T for central) in the event
    p_event: float
    q_event: float

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class JointProfile:
    """Exact joint-DP numbers of a finite contextual policy, per neighbour relation (:data:`MODES`)."""

    horizon: int
    epsilons: list[float]
    deltas: list[float]
    alphas: list[float]
    delta_at: dict[str, list[float]] = field(default_factory=dict)
    epsilon_at: dict[str, list[float]] = field(default_factory=dict)
    renyi: dict[str, list[float]] = field(default_factory=dict)
    witnesses: dict[str, dict[str, list[JointWitness | None]]] = field(default_factory=dict)
    sizes: JointWork | dict[str, object] = field(default_factory=dict)  # empty until enumerated
    seconds: float = 0.0

    def epsilon(self, delta: float, mode: str = "history") -> float:
        return self.epsilon_at[mode][self.deltas.index(delta)]

    def delta(self, epsilon: float, mode: str = "history") -> float:
        return self.delta_at[mode][self.epsilons.index(epsilon)]

    def divergence(self, alpha: float, mode: str = "history") -> float:
        return self.renyi[mode][self.alphas.index(alpha)]


def _digits(n: int, base: int, width: int) -> np.ndarray:
    idx = np.arange(n, dtype=np.int64)
    return (idx[:, None] // base ** np.arange(width - 1, -1, -1, dtype=np.int64)) % base


def _futures(C: int, K: int, R: int, L: int) -> tuple[np.ndarray, np.ndarray]:
    """Future contexts (F, L) and reward-index tables (F, L-1, K), every combination."""
    nc, nr = C**L, R ** (K * (L - 1))
    ctx = _digits(nc, C, L)
    rew = _digits(nr, R, K * (L - 1)).reshape(nr, L - 1, K)
    return np.repeat(ctx, nr, axis=0), np.tile(rew, (nc, 1, 1))


def _reachable_prefixes(policy: FiniteContextualPolicy, t: int) -> np.ndarray:
    """Mask over the (C K R)^t histories before round t: every action has positive probability."""
    C, K, R = policy.n_contexts, policy.n_arms, policy.n_rewards
    n = (C * K * R) ** t
    if t == 0:
        return np.ones(1, dtype=bool)
    h = histories(C, K, R, t)
    ok = np.ones(n, dtype=bool)
    state = np.zeros(n, dtype=np.int64)
    for s in range(t):
        c, a, r = h[:, s, 0], h[:, s, 1], h[:, s, 2]
        ok &= policy.rules[s][state * C + c, a] > 0
        state = ((state * C + c) * K + a) * R + r
    return ok


def _view_probs(policy: FiniteContextualPolicy, t: int, hist: np.ndarray, ctx: np.ndarray, rew: np.ndarray,
                outs: np.ndarray) -> np.ndarray:
    """P(a_{t+1..T} = v | history index ``hist`` after round t, future): (H, F, V)."""
    C, K, R = policy.n_contexts, policy.n_arms, policy.n_rewards
    L = outs.shape[1]
    state = hist[:, None, None]
    prob = np.ones((hist.size, ctx.shape[0], outs.shape[0]))
    for j in range(L):
        row = state * C + ctx[None, :, j, None]
        a = outs[None, None, :, j]
        prob = prob * policy.rules[t + 1 + j][row, a]
        if j < L - 1:
            r = rew[None, :, j, :][..., outs[:, j]]  # (1, F, V): r_{s}(a_s)
            state = ((state * C + ctx[None, :, j, None]) * K + a) * R + r
    return prob


def exact_joint_profile(policy: FiniteContextualPolicy, *, epsilons: Sequence[float] = (1.0,),
                        deltas: Sequence[float] = (1e-5,), alphas: Sequence[float] = (2.0,),
                        max_work: float = DEFAULT_MAX_WORK) -> JointProfile:
    """The exact joint-DP profile (module docstring), with witnesses; refuses beyond ``max_work``."""
    if not isinstance(policy, FiniteContextualPolicy):
        raise DPAuditError(f"the exact joint-DP audit needs a FiniteContextualPolicy, got {type(policy).__name__}.")
    epsilons = [check_nonnegative("epsilon", e) for e in epsilons]
    deltas = [check_delta(d, allow_zero=True) for d in deltas]
    alphas = [check_order(a) for a in alphas]
    max_work = check_positive("max_work", max_work)
    nq = len(epsilons) + len(deltas) + len(alphas)
    sizes = joint_work(policy, max(nq, 1))
    _refuse_beyond(policy, sizes, max_work)
    t0 = time.perf_counter()
    space = _JointSpace.of(policy)
    prof = JointProfile(policy.horizon, list(epsilons), list(deltas), list(alphas), sizes=sizes)
    best = _JointMaxima(prof)
    for t in range(policy.horizon - 1):
        _enumerate_round(space, best, t)
    best.fill(prof, lambda mode, kind, n: _joint_witness(space, prof, best.at[mode].get((kind, n)), mode, kind, n))
    prof.seconds = time.perf_counter() - t0
    return prof


def _refuse_beyond(policy: FiniteContextualPolicy, sizes: JointWork, max_work: float) -> None:
    """Refuse an enumeration of more than ``max_work`` operations, naming the sizes of its largest round."""
    if not sizes["work"] > max_work:
        return
    worst = max(sizes["rounds"], key=lambda r: r["prefixes"] * r["futures"] * r["views"])
    raise DPAuditError(
        f"exact joint-DP enumeration of this policy (T = {policy.horizon}, K = {policy.n_arms}, "
        f"C = {policy.n_contexts}, R = {policy.n_rewards}) needs about {sizes['work']:.2g} operations (at round "
        f"{worst['round']}: {worst['prefixes']} histories x {worst['triples']} canary triples x {worst['futures']} "
        f"futures x {worst['views']} views), above the limit {max_work:.2g}; shorten the horizon or raise max_work.")


@dataclass(frozen=True)
class _JointSpace:
    """What the steps of one joint enumeration share: the policy, its round-t triples and users' data, and the
    ordered pairs of each."""

    policy: FiniteContextualPolicy
    triples: np.ndarray  # (U, 3): c, a, r of each round-t triple
    datas: np.ndarray  # (D, 1 + K): c, r(0..K-1) of each user's data
    upairs: np.ndarray  # (U (U - 1), 2): ordered pairs of distinct triples (the history relation)
    dpairs: np.ndarray  # (D (D - 1), 2): ordered pairs of distinct data (the data and central relations)

    @classmethod
    def of(cls, policy: FiniteContextualPolicy) -> _JointSpace:
        C, K, R = policy.n_contexts, policy.n_arms, policy.n_rewards
        U = C * K * R
        triples = np.stack(np.unravel_index(np.arange(U), (C, K, R)), axis=1)
        datas = np.stack([np.repeat(np.arange(C), R**K), *(np.tile(_digits(R**K, R, K)[:, k], C) for k in range(K))],
                         1)
        D = datas.shape[0]
        upairs = np.array([(i, j) for i in range(U) for j in range(U) if i != j]).reshape(-1, 2)
        dpairs = np.array([(i, j) for i in range(D) for j in range(D) if i != j]).reshape(-1, 2)
        return cls(policy, triples, datas, upairs, dpairs)

    @property
    def U(self) -> int:  # round-t triples
        return int(self.triples.shape[0])

    @property
    def D(self) -> int:  # users' data
        return int(self.datas.shape[0])


#: where one maximum was attained: (value, canary round t, history before t, pair index, future)
_Argmax = tuple[float, int, int, int, int]


class _JointMaxima:
    """The largest value so far of each quantity per relation (:data:`MODES`), keyed by (kind, index into its
    parameters), and where it was attained (:data:`_Argmax`)."""

    def __init__(self, prof: JointProfile) -> None:
        self.epsilons, self.deltas, self.alphas = prof.epsilons, prof.deltas, prof.alphas
        self.at: dict[str, dict[tuple[str, int], _Argmax]] = {m: {} for m in MODES}

    def update(self, mode: str, key: tuple[str, int], values: np.ndarray, t: int, pre: np.ndarray, f0: int) -> None:
        """Fold in ``values`` (histories ``pre``, pairs, futures ``f0``..); ties keep the first."""
        flat = int(np.argmax(values))
        v = float(values.flat[flat])
        if key not in self.at[mode] or v > self.at[mode][key][0]:
            p, q, f = np.unravel_index(flat, values.shape)
            self.at[mode][key] = (v, t, int(pre[p]), int(q), f0 + int(f))

    def measure(self, mode: str, P: np.ndarray, Q: np.ndarray, ok: np.ndarray, t: int, pre: np.ndarray,
                f0: int) -> None:
        """P, Q: (prefixes, pairs, futures, atoms); ok: (prefixes, pairs) pairs the relation allows."""
        mask = ok[:, :, None]
        for n, e in enumerate(self.epsilons):
            self.update(mode, ("delta", n), np.where(mask, hockey_stick(P, Q, e), -1.0), t, pre, f0)
        for n, d in enumerate(self.deltas):
            self.update(mode, ("epsilon", n), np.where(mask, epsilon_for_delta(P, Q, d)[0], -1.0), t, pre, f0)
        for n, al in enumerate(self.alphas):
            self.update(mode, ("renyi", n), np.where(mask, renyi_divergence(P, Q, al), -1.0), t, pre, f0)

    def fill(self, prof: JointProfile, witness: Callable[[str, str, int], JointWitness | None]) -> None:
        """Write each relation's maxima (0 where nothing was measured) and witnesses (``witness(mode, kind,
        index)``) into ``prof``."""
        for mode in MODES:
            at = self.at[mode]

            def get(kind: str, n: int) -> float:
                return max(at[(kind, n)][0], 0.0) if (kind, n) in at else 0.0

            prof.delta_at[mode] = [get("delta", n) for n in range(len(self.epsilons))]
            prof.epsilon_at[mode] = [get("epsilon", n) for n in range(len(self.deltas))]
            prof.renyi[mode] = [get("renyi", n) for n in range(len(self.alphas))]
            prof.witnesses[mode] = {kind: [witness(mode, kind, n) for n in range(len(vals))]
                                    for kind, vals in (("delta", self.epsilons), ("epsilon", self.deltas),
                                                       ("renyi", self.alphas))}


def _enumerate_round(space: _JointSpace, best: _JointMaxima, t: int) -> None:
    """Every reachable history before canary round ``t``, pair and future, measured into ``best`` in chunks of
    (histories, futures) of at most ``_CHUNK_ELEMENTS`` pair elements each: bounded memory."""
    policy = space.policy
    C, K, R = policy.n_contexts, policy.n_arms, policy.n_rewards
    s = _sizes(policy, t)
    L = policy.horizon - 1 - t
    ctx_all, rew_all = _futures(C, K, R, L)
    outs = _digits(K**L, K, L)
    reach = np.flatnonzero(_reachable_prefixes(policy, t))
    per_future = max(len(space.upairs), len(space.dpairs) * K) * s["views"]
    fstep = max(1, _CHUNK_ELEMENTS // per_future)
    for f0 in range(0, s["futures"], fstep):
        ctx, rew = ctx_all[f0:f0 + fstep], rew_all[f0:f0 + fstep]
        nf = ctx.shape[0]
        step = max(1, _CHUNK_ELEMENTS // (per_future * nf))
        for i0 in range(0, reach.size, step):
            _measure_chunk(space, best, t, reach[i0:i0 + step], ctx, rew, outs, f0)


def _measure_chunk(space: _JointSpace, best: _JointMaxima, t: int, pre: np.ndarray, ctx: np.ndarray,
                   rew: np.ndarray, outs: np.ndarray, f0: int) -> None:
    """The three relations measured on histories ``pre`` before round ``t`` and futures ``f0``.. (``ctx``,
    ``rew``): the history relation on round-t triples, the data relation (a_t drawn by the policy) and the
    central view (a_t in it) on users' data."""
    policy, triples, datas, upairs, dpairs = space.policy, space.triples, space.datas, space.upairs, space.dpairs
    C, K, R, U, D = policy.n_contexts, policy.n_arms, policy.n_rewards, space.U, space.D
    nf, V = ctx.shape[0], outs.shape[0]
    hist = (pre[:, None] * U + np.arange(U)[None, :]).reshape(-1)
    P = _view_probs(policy, t, hist, ctx, rew, outs).reshape(pre.size, U, nf, V)
    pi_t = policy.rules[t][pre[:, None] * C + np.arange(C)[None, :]]  # (np, C, K)
    tri_ok = pi_t[:, triples[:, 0], triples[:, 1]] > 0  # (np, U): a_t possible under c_t
    ok = tri_ok[:, upairs[:, 0]] & tri_ok[:, upairs[:, 1]]
    best.measure("history", P[:, upairs[:, 0]], P[:, upairs[:, 1]], ok, t, pre, f0)
    # user data (c, r(.)): a_t drawn by the policy; atoms (a_t, view) for the central view
    w = pi_t[:, datas[:, 0]]  # (np, D, K)
    u_of = (datas[:, 0, None] * K + np.arange(K)[None, :]) * R + datas[:, 1:]  # (D, K) triple per a_t
    J = w[:, :, None, :, None] * np.moveaxis(P[:, u_of], 2, 3)  # (np, D, F, K, V)
    M = J.sum(axis=3)
    allok = np.ones((pre.size, len(dpairs)), dtype=bool)
    best.measure("data", M[:, dpairs[:, 0]], M[:, dpairs[:, 1]], allok, t, pre, f0)
    Jf = J.reshape(pre.size, D, nf, K * V)
    best.measure("central", Jf[:, dpairs[:, 0]], Jf[:, dpairs[:, 1]], allok, t, pre, f0)


def _joint_witness(space: _JointSpace, prof: JointProfile, at: _Argmax | None, mode: str, kind: str,
                   n: int) -> JointWitness | None:
    """The witness of one maximum ``at`` of relation ``mode`` (None when nothing positive was found, Rényi
    orders aside): the pair's two distributions on its history and future, and the event."""
    if at is None:
        return None
    v, t, p, q, f = at
    if v <= 0 and kind != "renyi":
        return None
    policy = space.policy
    C, K, R = policy.n_contexts, policy.n_arms, policy.n_rewards
    L = policy.horizon - 1 - t
    ctx, rew = _futures(C, K, R, L)
    outs = _digits(K**L, K, L)
    hist = p * space.U + np.arange(space.U)
    Pall = _view_probs(policy, t, hist, ctx[f:f + 1], rew[f:f + 1], outs)[:, 0]  # (U, V)
    Pp, Qq, seqs, desc = _witness_pair(space, mode, t, p, q, Pall, outs)
    param = {"delta": prof.epsilons, "epsilon": prof.deltas, "renyi": prof.alphas}[kind][n]
    k = int(epsilon_for_delta(Pp, Qq, param)[1]) if kind == "epsilon" else 0
    event = witness_event(kind, v, k, param, Pp, Qq)
    rv = policy.rewards
    h = histories(C, K, R, t)[p] if t else np.zeros((0, 3), dtype=np.int64)
    return JointWitness(
        value=v, round=t + 1,
        history=[(policy.contexts[c], int(a), float(rv[r])) for c, a, r in h],
        canary=desc[0], neighbour=desc[1],
        future_contexts=[policy.contexts[c] for c in ctx[f]],
        future_rewards=[[float(rv[x]) for x in row] for row in rew[f]],
        event=(seqs[np.sort(event)] + 0).tolist(), p_event=float(Pp[event].sum()), q_event=float(Qq[event].sum()))


def _witness_pair(space: _JointSpace, mode: str, t: int, p: int, q: int, Pall: np.ndarray, outs: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Triple] | list[UserData]]:
    """Pair ``q`` of relation ``mode`` after history ``p``: its two view distributions, the view sequences they
    are over, and the two sides as a witness shows them. ``Pall`` (U, V): the view after each round-t triple."""
    policy, rv = space.policy, space.policy.rewards
    C, K, R = policy.n_contexts, policy.n_arms, policy.n_rewards
    if mode == "history":
        i, j = space.upairs[q]
        triples = space.triples
        sides = [(policy.contexts[triples[k, 0]], int(triples[k, 1]), float(rv[triples[k, 2]])) for k in (i, j)]
        return Pall[i], Pall[j], outs, sides
    i, j = space.dpairs[q]
    datas = space.datas
    pi_t = policy.rules[t][p * C + np.arange(C)]
    dist = []
    for d in (i, j):
        c = datas[d, 0]
        Jd = pi_t[c][:, None] * Pall[(c * K + np.arange(K)) * R + datas[d, 1:]]  # (K, V)
        dist.append(Jd.reshape(-1) if mode == "central" else Jd.sum(axis=0))
    L = outs.shape[1]
    seqs = np.hstack([np.repeat(np.arange(K), K**L)[:, None], np.tile(outs, (K, 1))]) if mode == "central" else outs
    users = [(policy.contexts[datas[d, 0]], [float(rv[x]) for x in datas[d, 1:]]) for d in (i, j)]
    return dist[0], dist[1], seqs, users


# ---- the definition, written out (slow; the tests' reference) ------------------------------------

def view_distribution_brute(policy: FiniteContextualPolicy, history: Sequence[tuple[int, int, int]],
                            future_contexts: Sequence[int], future_rewards: Sequence[Sequence[int]]) -> dict:
    """``P(a_{t+1..T} | H_t, D)`` by the definitions' product formula, one Python loop per action sequence.

    ``history``: (context, arm, reward-index) triples of rounds 1..t; ``future_contexts`` of rounds
    t+1..T; ``future_rewards[j][a]``: reward index of arm a at round t+1+j (rounds t+1..T-1)."""
    import itertools

    L = len(future_contexts)
    out = {}
    for seq in itertools.product(range(policy.n_arms), repeat=L):
        h = list(history)
        p = 1.0
        for j, a in enumerate(seq):
            p *= float(policy.row(h, future_contexts[j])[a])
            if j < L - 1:
                h.append((future_contexts[j], a, future_rewards[j][a]))
        out[seq] = p
    return out
