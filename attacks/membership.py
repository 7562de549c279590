"""Black-box membership attack: distinguish neighbouring inputs from the views alone.

Trusts nothing the policy says about itself (no ledger, no claim): it runs the interactive
mechanism (policy, protocol, input) through :mod:`dpaudit.protocols`, samples views under d and
d', and turns a hypothesis test into an epsilon lower bound (:mod:`dpaudit.attacks.bounds`).

Three disjoint sample sets per side, as in DP-Sniper (Bichsel et al. 2021) and Jagielski et al.
(2020): a *training* split fits the scores, a *selection* split picks the statistic, threshold and
direction, and *fresh* samples give the counts that the Clopper-Pearson bounds are computed on.
Scores (choices of ours; the literature leaves the statistic open):

* ``pulls_after[a]`` - how often arm a is played after the canary round j (rounds before and at j
  cannot depend on round j's reward, so they carry no signal on their own);
* ``histogram`` - the log-likelihood ratio of the whole action sequence, estimated by its
  (add-1/2 smoothed) frequencies on the training split; unseen sequences score 0;
* ``logistic`` - an L2-regularised logistic regression on arm frequencies in time blocks after the
  canary and one-hot actions of the first rounds after it.

The final bound is corrected (Bonferroni) for every test evaluated on fresh samples, over all the
neighbouring pairs the caller evaluates (``n_tests``); the many tests tried on the selection split
need no correction because the fresh samples are independent of the choice.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence, TypedDict

import numpy as np

from dpaudit.errors import DPAuditError, check_delta
from dpaudit.engine import SERIAL, Engine
from dpaudit.policies.base import PolicyLike
from dpaudit.protocols import Adversary, Pair, Protocol

from .bounds import (TestCounts, best_threshold_test, candidate_tests, check_confidence,
                     select_projected_threshold)
from .result import AuditResult, ScoreHistogram
from .sampling import (CountDetails, Features, Source, Stop, Tally, count, count_in_looks, draw_many, draw_pilots,
                       score_edges, tally)

__all__ = [
    "Pair",
    "chunk_seeds",
    "sample_views",
    "ViewScorer",
    "MembershipCandidate",
    "fit_select",
    "fit_select_views",
    "evaluate",
    "membership_attack",
    "view_attack",
    "threshold_attack",
    "mean_difference_direction",
    "Projection",
    "screen_candidates",
    "ScreenRow",
    "ThresholdRow",
    "separation",
]

#: cells (runs x rounds) per chunk of sampled views; fixed so results do not depend on n.
CHUNK_CELLS = 2_000_000
_HASH_SEED = 0x5EED_D9A0



def chunk_seeds(n: int, horizon: int, seed: np.random.SeedSequence) -> list[tuple[int, np.random.SeedSequence]]:
    """Split ``n`` runs into chunks of at most ``CHUNK_CELLS // horizon`` runs, each with its own seed.

    The split depends on ``n`` and ``horizon`` only, so results do not depend on who runs the chunks.
    """
    chunk = max(1, CHUNK_CELLS // int(horizon))
    n_chunks = max(1, math.ceil(n / chunk))
    out = []
    for i, ss in enumerate(seed.spawn(n_chunks)):
        m = min(chunk, n - i * chunk)
        if m > 0:
            out.append((m, ss))
    return out


def sample_views(
    policy: PolicyLike,
    protocol: Protocol,
    data: np.ndarray,
    n: int,
    seed: np.random.SeedSequence,
    adversary: Adversary | None = None,
    *,
    record: bool = False,
) -> Iterator[np.ndarray]:
    """Yield chunks of views (runs x T) of (policy, protocol, data); chunk size depends on T only."""
    for m, ss in chunk_seeds(n, int(np.asarray(data).shape[0]), seed):
        yield protocol.run(policy, data, m, np.random.default_rng(ss), adversary, record=record)


def _count_rejections(policy: PolicyLike, protocol: Protocol, data: np.ndarray, m: int, ss: np.random.SeedSequence,
                      adversary: Adversary | None, scorer: "ViewScorer", test: TestCounts,
                      edges: np.ndarray | None = None) -> Tally:
    """One chunk of fresh views: how many the test rejects, with ``edges`` also their binned scores (a task
    of :func:`evaluate`; :func:`dpaudit.attacks.sampling.tally`)."""
    views = protocol.run(policy, data, m, np.random.default_rng(ss), adversary, record=False)
    s = scorer.scores(views, (test.statistic,))[test.statistic]
    return tally(s, np.count_nonzero(test.reject(s)), edges)


class ViewScorer:
    """Turns views into the statistics above; ``fit`` learns the histogram and the classifier."""

    def __init__(self, n_arms: int, horizon: int, round_: int, *, n_blocks: int = 8, n_after: int = 8) -> None:
        self.K = int(n_arms)
        self.T = int(horizon)
        self.j = int(round_)
        self.n_blocks = max(1, min(n_blocks, self.T - self.j - 1))
        self.n_after = max(0, min(n_after, self.T - self.j - 1))
        w = np.random.default_rng(_HASH_SEED).integers(1, 2**63, size=self.T, dtype=np.int64)
        self._w = (w.astype(np.uint64) << np.uint64(1)) | np.uint64(1)
        self._hist_keys = np.zeros(0, dtype=np.uint64)
        self._hist_vals = np.zeros(0)
        self._coef: np.ndarray | None = None
        self._mu = self._sd = None

    # ---- features -------------------------------------------------------------------------
    def hashes(self, views: np.ndarray) -> np.ndarray:
        """sum_t (a_t + 1) w_t modulo 2^64 per view, as one integer dot product (arms are never negative)."""
        v = np.asarray(views)
        v = v.view(np.uint64) if v.dtype == np.int64 and (v.size == 0 or v.min() >= 0) else v.astype(np.uint64)
        with np.errstate(over="ignore"):
            return v @ self._w[: v.shape[1]] + self._w[: v.shape[1]].sum(dtype=np.uint64)

    def _arm_counts(self, views: np.ndarray) -> np.ndarray:
        """(n, K) plays of each arm in each view: one bincount over the views (arms outside 0..K-1 not counted)."""
        n, w = views.shape
        if w == 0 or n == 0:
            return np.zeros((n, self.K), dtype=np.int64)
        if self.K <= 4 or views.min() < 0 or views.max() >= self.K:  # few arms: a comparison per arm is faster
            return np.stack([np.count_nonzero(views == a, axis=1) for a in range(self.K)], axis=1)
        idx = views + (np.arange(n, dtype=np.int64) * self.K)[:, None]
        return np.bincount(idx.reshape(-1), minlength=n * self.K).reshape(n, self.K)

    def pulls_after(self, views: np.ndarray) -> np.ndarray:
        return self._arm_counts(views[:, self.j + 1 :]).astype(float)

    def features(self, views: np.ndarray) -> np.ndarray:
        after = views[:, self.j + 1 :]
        cols = []
        if after.shape[1] > 0:
            edges = np.linspace(0, after.shape[1], self.n_blocks + 1).astype(int)
            for b in range(self.n_blocks):
                blk = after[:, edges[b] : edges[b + 1]]
                if blk.shape[1] == 0:
                    continue
                counts = self._arm_counts(blk)
                for a in range(self.K):
                    cols.append(counts[:, a] / blk.shape[1])  # the share of plays, as (blk == a).mean(axis=1)
            for s in range(self.n_after):
                for a in range(self.K):
                    cols.append((after[:, s] == a).astype(float))
        if not cols:
            return np.zeros((views.shape[0], 1))
        return np.stack(cols, axis=1)

    # ---- fitting ------------------------------------------------------------------------
    def fit(self, v0: np.ndarray, v1: np.ndarray, l2: float = 1e-3) -> None:
        h0, h1 = self.hashes(v0), self.hashes(v1)
        keys, inv = np.unique(np.concatenate([h0, h1]), return_inverse=True)
        c0 = np.bincount(inv[: h0.size], minlength=keys.size)
        c1 = np.bincount(inv[h0.size :], minlength=keys.size)
        self._hist_keys = keys
        self._hist_vals = np.log((c1 + 0.5) / (c0 + 0.5)) + math.log(h0.size / h1.size)

        x = np.concatenate([self.features(v0), self.features(v1)])
        y = np.concatenate([np.zeros(v0.shape[0]), np.ones(v1.shape[0])])
        self._mu = x.mean(axis=0)
        self._sd = x.std(axis=0) + 1e-9
        z = np.hstack([(x - self._mu) / self._sd, np.ones((x.shape[0], 1))])

        def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
            m = z @ w
            # mean logistic loss, numerically stable
            ll = np.mean(np.logaddexp(0.0, m) - y * m) + l2 * np.dot(w[:-1], w[:-1])
            p = 1.0 / (1.0 + np.exp(-m))
            g = z.T @ (p - y) / z.shape[0]
            g[:-1] += 2 * l2 * w[:-1]
            return float(ll), g

        from scipy.optimize import minimize  # on first use: `import dpaudit.attacks` should not pay for it

        res = minimize(loss, np.zeros(z.shape[1]), jac=True, method="L-BFGS-B", options={"maxiter": 200})
        self._coef = res.x

    def scores(self, views: np.ndarray, names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """Every statistic of ``views``, or only those in ``names`` (a fresh count needs its test's one)."""
        out: dict[str, np.ndarray] = {}
        if names is None or any(n.startswith("pulls_after") for n in names):
            pulls = self.pulls_after(views)
            for a in range(self.K):
                out[f"pulls_after[{a}]"] = pulls[:, a]
        if self._hist_keys.size and (names is None or "histogram" in names):
            h = self.hashes(views)
            pos = np.clip(np.searchsorted(self._hist_keys, h), 0, self._hist_keys.size - 1)
            hit = self._hist_keys[pos] == h
            out["histogram"] = np.where(hit, self._hist_vals[pos], 0.0)
        if self._coef is not None and (names is None or "logistic" in names):
            z = (self.features(views) - self._mu) / self._sd
            out["logistic"] = z @ self._coef[:-1] + self._coef[-1]
        return out

    def only(self, name: str) -> "OneStatistic":
        """A scorer of the one statistic ``name`` (what a fresh count sends to the workers)."""
        return OneStatistic(self, name)


class OneStatistic:
    """:meth:`ViewScorer.scores` of one statistic: the fresh count of a chosen test scores nothing else."""

    def __init__(self, scorer: ViewScorer, name: str) -> None:
        self.scorer, self.name = scorer, name

    def scores(self, views: np.ndarray) -> dict[str, np.ndarray]:
        return {self.name: self.scorer.scores(views, (self.name,))[self.name]}


@dataclass
class MembershipCandidate:
    """A fitted scorer and the test chosen on the selection split for one pair."""

    pair: Pair
    scorer: ViewScorer
    test: TestCounts
    selection_bound: float
    samples: int
    seconds: float
    extra: dict[str, float] = field(default_factory=dict)  # the pilot's ``separation``
    #: where the fresh scores are binned (:func:`dpaudit.attacks.sampling.score_edges`, from the selection split)
    edges: np.ndarray | None = None


def _collect(policy, protocol, data, n, seed, adversary) -> np.ndarray:
    return np.concatenate(list(sample_views(policy, protocol, data, n, seed, adversary)), axis=0)


def fit_select(
    policy: PolicyLike,
    protocol: Protocol,
    pair: Pair,
    seed: np.random.SeedSequence,
    *,
    delta: float,
    confidence: float,
    n_train: int = 4000,
    n_select: int = 4000,
    n_final: int = 1,
) -> MembershipCandidate:
    """Train the scores and choose the best (statistic, threshold, direction) for ``pair``."""
    t0 = time.perf_counter()
    s_tr0, s_tr1, s_se0, s_se1 = seed.spawn(4)
    T = int(np.asarray(pair.d0).shape[0])
    if not 0 <= pair.round < T - 1:
        raise DPAuditError(f"the canary round must lie in 0..T-2 = 0..{T - 2} so that some action can depend on it, got {pair.round}.")
    v0 = _collect(policy, protocol, pair.d0, n_train, s_tr0, pair.adversary)
    v1 = _collect(policy, protocol, pair.d1, n_train, s_tr1, pair.adversary)
    w0 = _collect(policy, protocol, pair.d0, n_select, s_se0, pair.adversary)
    w1 = _collect(policy, protocol, pair.d1, n_select, s_se1, pair.adversary)
    cand = fit_select_views(int(policy.n_arms), pair, v0, v1, w0, w1, delta=delta, confidence=confidence,
                            n_final=n_final)
    cand.seconds = time.perf_counter() - t0
    return cand


def fit_select_views(n_arms: int, pair: Pair, train0: np.ndarray, train1: np.ndarray, select0: np.ndarray,
                     select1: np.ndarray, *, delta: float, confidence: float, n_final: int = 1) -> MembershipCandidate:
    """:func:`fit_select` on views already sampled: fit the scores on the training views, choose
    the test on the (disjoint) selection views."""
    t0 = time.perf_counter()
    scorer = ViewScorer(n_arms, int(np.asarray(pair.d0).shape[0]), pair.round)
    scorer.fit(train0, train1)
    sc0, sc1 = scorer.scores(select0), scorer.scores(select1)
    best = best_threshold_test(sc0, sc1, delta, confidence, n_final=n_final)
    bound, test = best[0]
    n = train0.shape[0] + train1.shape[0] + select0.shape[0] + select1.shape[0]
    return MembershipCandidate(pair, scorer, test, bound, n, time.perf_counter() - t0,
                               {"separation": separation(sc0, sc1)},
                               score_edges(sc0[test.statistic], sc1[test.statistic], test))


def separation(scores0: dict[str, np.ndarray], scores1: dict[str, np.ndarray]) -> float:
    """How far apart two samples' statistics are: the largest two-sample z of their means, over the
    statistics (a continuous pilot score where a selection bound is still 0 on small samples)."""
    best = 0.0
    for name in scores0:
        a, b = np.asarray(scores0[name], dtype=float), np.asarray(scores1[name], dtype=float)
        se = math.sqrt(a.var() / max(1, a.size) + b.var() / max(1, b.size))
        diff = abs(float(b.mean() - a.mean()))
        best = max(best, diff / se if se > 0 else (1e6 if diff > 0 else 0.0))
    return float(best)


def evaluate(
    policy: PolicyLike,
    protocol: Protocol,
    cand: MembershipCandidate,
    seed: np.random.SeedSequence,
    *,
    n_test: int,
    delta: float,
    confidence: float,
    n_tests: int = 1,
    progress: Callable[[str], None] | None = None,
    engine: Engine = SERIAL,
    claim: float | None = None,
    floor: float = 0.0,
) -> AuditResult:
    """Count the chosen test on fresh samples and return the corrected lower bound. With the claimed
    epsilon ``claim``, the fresh samples come in looks and the count stops once the answer is settled
    (:class:`dpaudit.attacks.sampling.Stop`; ``floor``: a bound the audit already shows by another test)."""
    t0 = time.perf_counter()
    pair, test, edges = cand.pair, cand.test, cand.edges
    T = int(np.asarray(pair.d0).shape[0])
    data = (pair.d0, pair.d1)
    stop = None if claim is None else Stop(delta, confidence, claim, n_tests, floor)
    counted = count_in_looks(_count_rejections,
                             lambda side, m, cs: (policy, protocol, data[side], m, cs, pair.adversary, cand.scorer, test,
                                                  edges),
                             n_test, tuple(seed.spawn(2)), cells_per_run=T, chunk_cells=CHUNK_CELLS, stop=stop,
                             engine=engine, progress=progress, what="membership: fresh views")
    n_used, fp, tp = counted.n, counted.fp, counted.tp
    fn = n_used - tp
    eps = counted.bound(delta, confidence, n_tests)
    seconds = time.perf_counter() - t0 + cand.seconds
    return AuditResult(
        attack="membership",
        epsilon_lower=eps,
        delta=delta,
        confidence=confidence,
        witness={
            **pair.describe(),
            "statistic": test.statistic,
            "threshold": test.threshold,
            "reject_when": ("score >= threshold" if test.include_ties else "score > threshold")
            if test.direction > 0
            else ("score <= threshold" if test.include_ties else "score < threshold"),
        },
        samples=cand.samples + 2 * n_used,
        seconds=seconds,
        details={
            "false_positives": fp,
            "false_negatives": fn,
            "n_fresh_per_side": n_used,
            "fpr": fp / n_used,
            "fnr": fn / n_used,
            **counted.details(),
            "selection_bound": cand.selection_bound,
            "tests_corrected_for": n_tests,
            **cand.extra,
        },
        scores=counted.scores(test, edges),
    )


def membership_attack(
    policy: PolicyLike,
    protocol: Protocol,
    pair: Pair,
    *,
    delta: float = 1e-5,
    confidence: float = 0.95,
    n_train: int = 4000,
    n_select: int = 4000,
    n_test: int = 20000,
    seed: int | np.random.SeedSequence = 0,
    n_tests: int = 1,
    progress: Callable[[str], None] | None = None,
    engine: Engine = SERIAL,
) -> AuditResult:
    """The black-box attack on one neighbouring pair (fit, select, then count on fresh views)."""
    check_delta(delta, allow_zero=True)
    check_confidence(confidence)
    for name, v in (("n_train", n_train), ("n_select", n_select), ("n_test", n_test)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise DPAuditError(f"{name} must be an integer >= 1, got {v!r}.")
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    s_fit, s_eval = ss.spawn(2)
    cand = fit_select(policy, protocol, pair, s_fit, delta=delta, confidence=confidence,
                      n_train=n_train, n_select=n_select)
    return evaluate(policy, protocol, cand, s_eval, n_test=n_test, delta=delta, confidence=confidence,
                    n_tests=n_tests, progress=progress, engine=engine)


def stderr_progress(prefix: str = "dpaudit") -> Callable[[str], None]:
    """A throttled progress printer (at most one line per second) on stderr."""
    last = [0.0]

    def show(msg: str) -> None:
        now = time.perf_counter()
        if now - last[0] >= 1.0:
            last[0] = now
            print(f"{prefix}: {msg}", file=sys.stderr, flush=True)

    return show


# ---- the same pipeline on any view: candidate pairs of a Source, on the engine ---------------------------

def view_attack(source: Source, candidates: Sequence[int], first_round: Sequence[int], K: int, T: int,
                seed: np.random.SeedSequence, *, delta: float, confidence: float, small: int, runs: int, name: str,
                engine: Engine = SERIAL, progress: Callable[[str], None] | None = None,
                claim: float | None = None, pilots: Sequence[Features] | None = None, floor: float = 0.0,
                screen: int | None = None, keep: int = 2) -> AuditResult:
    """The membership pipeline on action views over a source's ``candidates``: :class:`ViewScorer`
    statistics after ``first_round[i]`` fitted on ``small`` training views per side, the best
    (pair, statistic, threshold) chosen on ``small`` selection views and counted once on ``runs`` fresh
    views per side (so the bound needs no correction for the choice). Views come from
    ``source.sample`` (runs x T actions), drawn on ``engine``. ``pilots``: the training and selection
    views already drawn (per candidate: side 0, side 1 for training, then for selection), e.g. from the
    same runs as another attack's; they only choose the test, so sharing them costs no validity. ``floor``: a
    bound the audit already shows by another part, below which the fresh count may stop as futile
    (:class:`~dpaudit.attacks.sampling.Stop`). ``screen``: with more than ``keep`` candidates, each is first
    fitted and judged on ``screen`` training and selection views per side (:func:`_screen_views`), and only the
    ``keep`` best go on to the ``small`` pilots (successive halving: the screening views choose and nothing
    else, so the bound needs no correction for it)."""
    t0 = time.perf_counter()
    n_screen = 0
    if screen is not None and pilots is None and len(candidates) > keep and screen < small:
        order = _screen_views(source, candidates, first_round, K, T, seed.spawn(1)[0], delta=delta,
                              confidence=confidence, n=int(screen), engine=engine)[:keep]
        n_screen = len(candidates) * 4 * int(screen)
        candidates = [candidates[i] for i in order]
        first_round = [first_round[i] for i in order]
    views = draw_pilots(source, candidates, seed, small, small, engine, pilots, "view_attack")
    best = None
    for i, (c, j) in enumerate(zip(candidates, first_round)):
        v = views[4 * i: 4 * i + 4]
        scorer = ViewScorer(K, T, j)
        scorer.fit(v[0], v[1])
        q0, q1 = scorer.scores(v[2]), scorer.scores(v[3])
        key, test = _select_test(q0, q1, delta, confidence)
        if best is None or key > best[0]:
            best = (key, test, scorer, c, score_edges(q0[test.statistic], q1[test.statistic], test))
    (bound, _), test, scorer, c, edges = best
    f0, f1 = seed.spawn(len(candidates) + 2)[-2:]
    counted = count(source, c, runs, (f0, f1), scorer.only(test.statistic), test, engine, progress, f"{name}: fresh views",
                    stop=None if claim is None else Stop(delta, confidence, claim, floor=floor), edges=edges)
    fp, tp, n = counted.fp, counted.tp, counted.n
    eps = counted.bound(delta, confidence)
    desc = source.describe(c)
    return AuditResult(name, eps, delta, confidence,
                       {"label": desc.get("label", ""), "pair": desc, "statistic": test.statistic,
                        "threshold": test.threshold, "reject_when": test.reject_when()},
                       samples=n_screen + len(candidates) * 4 * small + 2 * n, seconds=time.perf_counter() - t0,
                       details={"false_positives": fp, "false_negatives": n - tp, "n_fresh_per_side": n,
                                "fpr": fp / n, "fnr": (n - tp) / n, "selection_bound": bound,
                                "tests_corrected_for": 1, **counted.details()},
                       scores=counted.scores(test, edges))


def _screen_views(source: Source, candidates: Sequence[int], first_round: Sequence[int], K: int, T: int,
                  seed: np.random.SeedSequence, *, delta: float, confidence: float, n: int,
                  engine: Engine = SERIAL) -> list[int]:
    """The candidates' indices ranked on ``n`` training and ``n`` selection views per side each: by the bound
    of the best threshold test on the selection views, then by the same at delta = 0.01 (which separates
    candidates that all show 0 at a small delta)."""
    views = draw_pilots(source, candidates, seed, n, n, engine, None, "view_attack")
    keys = []
    for i, j in enumerate(first_round):
        v = views[4 * i: 4 * i + 4]
        scorer = ViewScorer(K, T, j)
        scorer.fit(v[0], v[1])
        keys.append(_select_test(scorer.scores(v[2]), scorer.scores(v[3]), delta, confidence)[0])
    return sorted(range(len(candidates)), key=lambda i: (-keys[i][0], -keys[i][1], i))


#: the delta at which tests are ranked when none shows a bound at the audit's delta
LENIENT_DELTA = 0.01


def _select_test(q0: dict[str, np.ndarray], q1: dict[str, np.ndarray], delta: float,
                 confidence: float) -> tuple[tuple[float, float], TestCounts]:
    """The best threshold test on a selection split and its rank key (its bound at ``delta``, then the best
    bound at :data:`LENIENT_DELTA`). When no test shows a bound at ``delta``, the test best at the lenient delta
    is the one chosen: among tests that all show 0 it is the most promising, and a test that separates the
    sides at all has error rates its fresh count can settle (an extreme threshold, rejecting nearly every
    view, cannot be shown futile before the whole sample: its rare errors leave any eps possible)."""
    bound, test = best_threshold_test(q0, q1, delta, confidence)[0]
    if bound > 0:
        return (bound, math.inf), test
    lenient, alt = best_threshold_test(q0, q1, max(delta, LENIENT_DELTA), confidence)[0]
    return (bound, lenient), (alt if lenient > 0 else _balanced_test(q0, q1) or alt)


def _balanced_test(q0: dict[str, np.ndarray], q1: dict[str, np.ndarray]) -> TestCounts | None:
    """The threshold test that rejects the share of the pooled selection views closest to one half (any
    statistic): for sides no test separates, the test whose fresh count settles soonest that it shows
    nothing (both error rates near 1/2). None when every statistic is constant."""
    best: tuple[float, TestCounts] | None = None
    for stat in q0:
        s0, s1 = np.asarray(q0[stat], dtype=float), np.asarray(q1[stat], dtype=float)
        thr, c0, c1 = candidate_tests(s0, s1, 512)
        for row, ties in ((0, False), (1, True)):  # reject when > c, when >= c
            share = (c0[row] + c1[row]) / (s0.size + s1.size)
            i = int(np.argmin(np.abs(share - 0.5)))
            gap = abs(float(share[i]) - 0.5)
            if 0 < share[i] < 1 and (best is None or gap < best[0]):
                best = (gap, TestCounts(stat, float(thr[i]), 1, ties))
    return None if best is None else best[1]


def mean_difference_direction(m0: np.ndarray, m1: np.ndarray) -> np.ndarray | None:
    """Scalar features need none; vector features are projected onto the learnt mean difference."""
    if m0.shape[1] == 1:
        return None
    w = m1.mean(axis=0) - m0.mean(axis=0)
    norm = np.linalg.norm(w)
    return w / norm if norm > 0 else np.eye(m0.shape[1])[0]


class Projection:
    """The score of :func:`threshold_attack`: a scalar feature as it is, a vector projected on ``w``."""

    def __init__(self, w: np.ndarray | None, name: str = "message") -> None:
        self.w, self.name = w, name

    def scores(self, m: np.ndarray) -> dict[str, np.ndarray]:
        m = np.asarray(m, dtype=float).reshape(m.shape[0], -1)
        return {self.name: m[:, 0] if self.w is None else m @ self.w}


class ScreenRow(TypedDict):
    """One candidate screened (:func:`screen_candidates`): the bound its pilot projects."""

    candidate: int
    pilot_bound: float


class ThresholdRow(CountDetails):
    """One candidate's threshold test (:func:`threshold_attack`): its bound, counts and rule, how its fresh
    count went (:class:`~dpaudit.attacks.sampling.CountDetails`), and its binned fresh scores."""

    candidate: int
    epsilon_lower: float
    fp: int
    fn: int
    n: int
    fpr: float
    fnr: float
    threshold: float
    direction: str
    selection_bound: float
    score: str  # what was scored: the message, or its projection
    scores: ScoreHistogram | None


def screen_candidates(source: Source, candidates: Sequence[int], seed: np.random.SeedSequence, *, n: int, keep: int,
                      n_fresh: int, delta: float, confidence: float,
                      engine: Engine = SERIAL) -> tuple[list[int], list[ScreenRow]]:
    """Keep the ``keep`` most promising candidates of many, judged on ``n`` pilot samples per side each:
    the bound each one's threshold test would give on ``n_fresh`` fresh samples
    (:func:`dpaudit.attacks.bounds.select_projected_threshold`). The pilot samples are used for nothing
    else, so the choice costs the final bounds no validity. Returns the kept candidates (best first) and
    one row per candidate (its pilot bound)."""
    seeds = [ss.spawn(2) for ss in seed.spawn(len(candidates))]
    drawn = draw_many(source, [(c, side, n, s[side]) for c, s in zip(candidates, seeds) for side in (0, 1)], engine)
    rows: list[ScreenRow] = []
    for i, c in enumerate(candidates):
        m0, m1 = (np.asarray(x, dtype=float).reshape(len(x), -1) for x in drawn[2 * i: 2 * i + 2])
        half = max(1, n // 2)
        score = Projection(mean_difference_direction(m0[:half], m1[:half]))
        pilot, _ = select_projected_threshold(score.scores(m0[half:])["message"], score.scores(m1[half:])["message"],
                                              n_fresh, delta, confidence, keep)
        rows.append({"candidate": c, "pilot_bound": float(max(pilot, 0.0))})
    order = sorted(range(len(candidates)), key=lambda i: -rows[i]["pilot_bound"])
    return [candidates[i] for i in order[:keep]], rows


def threshold_attack(source: Source, candidates: Sequence[int], seed: np.random.SeedSequence, *, delta: float,
                     confidence: float, n_select: int, n_fresh: int, engine: Engine = SERIAL,
                     progress: Callable[[str], None] | None = None, what: str = "fresh samples",
                     claim: float | None = None, floor: float = 0.0) -> list[ThresholdRow]:
    """A threshold test per candidate, chosen on a selection split and counted on fresh samples.

    ``source.sample`` gives (n, m) features: a local channel's messages, what a server received from
    one user, the points a BCO policy played. Vector features are projected on the mean difference
    learnt on ``n_select // 2`` views per side (:func:`mean_difference_direction`); the test is chosen
    on ``n_select`` more for the bound it will give on ``n_fresh`` fresh samples per side
    (:func:`dpaudit.attacks.bounds.select_projected_threshold`) and counted on them. Every candidate's
    test is evaluated, so each bound is corrected (Bonferroni) for ``len(candidates)``. Returns one
    row per candidate (its bound, counts, threshold and score; ``scores``, its binned fresh scores, is for
    the caller's :class:`~dpaudit.attacks.result.AuditResult`, not for a table). With ``claim``, each count
    comes in looks and stops once settled (:class:`dpaudit.attacks.sampling.Stop`, ``floor`` a bound the audit
    already shows by another part).
    """
    n_tests = len(candidates)
    half = max(1, n_select // 2)
    seeds = [ss.spawn(6) for ss in seed.spawn(n_tests)]
    drawn = draw_many(source, [(c, side, n, s[k]) for c, s in zip(candidates, seeds)
                               for side, n, k in ((0, half, 0), (1, half, 1), (0, n_select, 2), (1, n_select, 3))],
                      engine)
    rows: list[ThresholdRow] = []
    for i, (c, s) in enumerate(zip(candidates, seeds)):
        t0_, t1_, q0, q1 = (np.asarray(x, dtype=float).reshape(len(x), -1) for x in drawn[4 * i: 4 * i + 4])
        w = mean_difference_direction(t0_, t1_)
        score = Projection(w)
        p0, p1 = score.scores(q0)["message"], score.scores(q1)["message"]
        sel_bound, test = select_projected_threshold(p0, p1, n_fresh, delta, confidence, n_tests)
        edges = score_edges(p0, p1, test)
        counted = count(source, c, n_fresh, (s[4], s[5]), score, test, engine, progress, what,
                        stop=None if claim is None else Stop(delta, confidence, claim, n_tests, floor), edges=edges)
        fp, n = counted.fp, counted.n
        fn = n - counted.tp
        eps = counted.bound(delta, confidence, n_tests)
        rows.append({"candidate": c, "epsilon_lower": eps, "fp": fp, "fn": fn, "n": n, "fpr": fp / n,
                     "fnr": fn / n, "threshold": test.threshold, **counted.details(),
                     "direction": "reject if score > threshold" if test.direction > 0 else "reject if score < threshold",
                     "selection_bound": sel_bound,
                     "score": "message" if w is None else "projection of the message onto the learnt mean difference",
                     "scores": counted.scores(test, edges)})
    return rows
