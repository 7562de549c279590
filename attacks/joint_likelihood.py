"""The joint-DP gray-box attack: the exact privacy loss of every recorded release, by replaying the run.

Under anticipating joint DP (Shariff & Sheffet 2018; Vietri et al. 2020) the neighbouring inputs d, d'
differ in round t's contexts *and* rewards, and the adversary fixes every other round's. A policy built
on dpaudit's mechanisms releases noisy statistics R_1, R_2, ... (the tree nodes of Sarmasarkar's (2026)
Alg. 2, its private gradients) and its actions are computed from them and the public contexts. The
privacy loss of a run under d against d' is, by the chain rule over the releases in order::

    L = sum_k [ log p_d(R_k | R_1..R_(k-1)) - log p_d'(R_k | R_1..R_(k-1)) ]

Holding the released values fixed, every later round's played context is the same function of the
releases and the public contexts on both sides, so the two sides' states agree everywhere except in
what the canary round itself contributed: only the centres of the releases round t fed move (every
tree node containing t: the H-tree by x'x'^T - x x^T; the V-tree too when round t explored under
either side; a gradient release by the change of round t's term (mu(x^T theta) - r) x at that release's
theta). Rather than ask each policy for that change, dpaudit *replays* the run
(:meth:`dpaudit.mechanisms.Ledger.replay`): the same policy, reset with a generator in the same state, is
run on d' while every mechanism call returns the value the run on d released; the ledger of the replay
then holds each release's centre under d' given the same past. Release k of the recorded run (centre c,
value v) and of the replay (centre c', the same v) give the k-th term exactly: for Gaussian noise of
scale s, ``(|v - c'|^2 - |v - c|^2) / (2 s^2)``; Laplace ``(|v - c'|_1 - |v - c|_1) / b``. Any policy built on
:class:`~dpaudit.mechanisms.GaussianMechanism`, :class:`~dpaudit.mechanisms.LaplaceMechanism` or
:class:`~dpaudit.mechanisms.BinaryTreeMechanism` gets this with no code of its own; a release made
otherwise is caught (its replayed value differs from the recorded one) and the attack does not run.

Given the same releases a policy's actions after round t must be the same (they are post-processing of
the releases and the public contexts); the runs where the replay's a_{t+1}..a_T differ are counted
(``views_not_post_processing``): a positive count says the actions read the canary other than through
the releases, which this attack cannot see (the black-box attacks judge that).

From the sampled losses the bound is the central likelihood attack's, by the same function
(:func:`~dpaudit.attacks.likelihood.loss_bounds`): with W = L + log(1 - U), U uniform and independent, the
k-th largest W of the counted runs (:func:`~dpaudit.attacks.likelihood.epsilon_from_losses`), valid at
the error of one test whatever eps it lands on, and D_alpha lower bounds at the Rényi orders on the rest of
the error budget. Its proof needs only that the counted losses are i.i.d. draws of the pair's exact privacy
loss under the sampled side (then W's survival function is delta(eps) of the pair), which each fresh run and
its replay give (below), and that nothing it counts was used to choose it (the pair and side are chosen on
pilot runs). No eps grid and no Bonferroni over one; the pilot only places the displayed profile band.
When the bound holds (at its stated confidence), and what it assumes:

* the ledger's noise is true: each recorded release is its centre plus fresh noise of the recorded kind
  and scale, independent of everything before it. A policy whose ledger lies (noise reused or missing
  where the ledger says Gaussian) is judged by the black-box tests on the releases and the actions, not
  here;
* the replay is exact: run on d' with the releases held fixed, the policy computes every release's
  centre as a genuine run on d' would given the same past releases. That holds when every centre is a
  function of the input, the earlier releases and randomness whose draws do not depend on the input
  (the replay draws from a generator in the same state, so such coins are the same on both sides).
  It fails for a policy whose other random draws depend on the input in number or order (the coins
  then differ between the two sides) or that keeps state outside its mechanisms. The replay checks
  what it can (the same releases in number, label, step, runs and shape, and every recorded value
  returned; :class:`~dpaudit.mechanisms.ReplayMismatch` otherwise, and the part does not run) but not
  the centres themselves;
* the claim bounds the releases: the policy's proof (Sarmasarkar's (2026) Alg. 2, every release
  Gaussian) bounds the releases and the view a_{t+1}..a_T as their post-processing, so a bound above
  the claim refutes the proof;
* the fresh runs are independent, and the candidate pair and its side are chosen on pilot runs the bound
  never sees.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from dpaudit.engine import SERIAL, Engine
from dpaudit.errors import DPAuditError, InternalError
from dpaudit.accountants import Guarantee
from dpaudit.mechanisms import Release, ReplayMismatch
from dpaudit.policies.base import PolicyLike
from dpaudit.protocols.joint import JointDP, JointPair

from .likelihood import DEFAULT_ORDERS, loss_bounds, pilot_grid, profile_bounds
from .result import AuditResult
from .sampling import Source, draw

__all__ = ["replay_run", "release_losses", "sensitivity_excess", "implied_sensitivities", "replay_losses", "screen_score",
           "joint_likelihood_attack"]


def replay_run(policy: PolicyLike, pair: JointPair, side: int, n: int, seed: np.random.SeedSequence
               ) -> tuple[np.ndarray, list[Release], np.ndarray, list[Release]]:
    """``n`` runs on side ``side`` of ``pair`` (recorded), and their replay on the other side: (actions,
    releases, the replay's actions, the replay's releases)."""
    d, other = (pair.d0, pair.d1) if side == 0 else (pair.d1, pair.d0)
    views = JointDP().run(policy, d, n, np.random.default_rng(seed), record=True)
    rec = list(policy.ledger.releases)
    twin_views = JointDP().run(policy, other, n, np.random.default_rng(seed), record=True, replay=rec)
    twin = list(policy.ledger.releases)
    if len(twin) != len(rec):
        raise ReplayMismatch(f"the replayed run made {len(twin)} releases, the recorded run {len(rec)}: the calls to the "
                             "mechanisms depend on the input other than through the releases.")
    return views, rec, twin_views, twin


def _scale(rel: Release) -> np.ndarray:
    s = np.asarray(rel.noise.scale, dtype=float)
    return s if s.ndim == 0 else (s[:, None] if s.ndim == 1 else s)


def release_losses(rec: Sequence[Release], twin: Sequence[Release], n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per run: the privacy loss L of the recorded releases ``rec`` (centres under the sampled side) against
    the replay's ``twin`` (the same values, centres under the other side); mu^2 = sum |c' - c|^2 / s^2 of the
    Gaussian releases (L is N(mu^2 / 2, mu^2) when the shifts do not depend on the noise); and how many
    releases moved."""
    loss, mu2 = np.zeros(n), np.zeros(n)
    moved = np.zeros(n, dtype=np.int64)
    for k, (a, b) in enumerate(zip(rec, twin)):
        if a.value.shape != b.value.shape or not np.array_equal(a.value, b.value):
            raise ReplayMismatch(f"release {k} ({a.label!r}) took another value in the replay: it was not made by a "
                                 "dpaudit mechanism that replays (GaussianMechanism, LaplaceMechanism, "
                                 "BinaryTreeMechanism), so its centre under the other input cannot be read.")
        if np.array_equal(a.centre, b.centre):
            continue
        if a.noise.kind != b.noise.kind or not np.array_equal(a.noise.scale, b.noise.scale):
            raise ReplayMismatch(f"release {k} ({a.label!r}) has another noise in the replay.")
        rows = np.flatnonzero(np.any(a.centre != b.centre, axis=1))
        runs = np.asarray(a.runs)[rows]
        v, c0, c1 = a.value[rows], a.centre[rows], b.centre[rows]
        s = _scale(a)
        s = s if s.ndim == 0 else s[rows]
        if a.noise.kind == "gaussian":
            lr = (((v - c1) ** 2 - (v - c0) ** 2) / (2 * s**2)).sum(axis=1)
            np.add.at(mu2, runs, (((c1 - c0) / s) ** 2).sum(axis=1))
        elif a.noise.kind == "laplace":
            lr = ((np.abs(v - c1) - np.abs(v - c0)) / s).sum(axis=1)
        else:
            raise DPAuditError(f"release {k} ({a.label!r}) has noise {a.noise.kind!r}, which the replay's loss does not "
                               "know (Gaussian and Laplace only).")
        np.add.at(loss, runs, lr)
        np.add.at(moved, runs, 1)
    return loss, mu2, moved


def sensitivity_excess(rec: Sequence[Release], twin: Sequence[Release], n: int) -> np.ndarray:
    """Per run, the largest ratio over its releases of the centre's shift between the two sides (L2 for
    Gaussian noise, L1 for Laplace) to the sensitivity the ledger records for that release (0 where nothing
    moved). Above 1, the neighbouring pair moves a release further than the policy's accounting allows: its
    ledger understates that release's cost (a sensitivity calibrated for another neighbouring relation)."""
    out = np.zeros(n)
    for a, b in zip(rec, twin):
        if a.noise.kind not in ("gaussian", "laplace") or np.array_equal(a.centre, b.centre):
            continue
        diff = b.centre - a.centre
        shift = np.linalg.norm(diff, axis=1) if a.noise.kind == "gaussian" else np.abs(diff).sum(axis=1)
        np.maximum.at(out, np.asarray(a.runs), shift / float(a.sensitivity))
    return out


def implied_sensitivities(rec: Sequence[Release], twin: Sequence[Release]) -> dict[str, float]:
    """Per mechanism (:attr:`dpaudit.mechanisms.Release.family`), the largest ratio of a release's realised
    centre shift between the two sides (L2 for Gaussian noise, L1 for Laplace) to the sensitivity its ledger
    records: the factor by which the neighbouring pair shows that mechanism's true sensitivity is at least
    its recorded one (a realised shift is a lower bound on the sensitivity under the protocol's neighbouring
    relation). Mechanisms whose releases never moved are left out."""
    out: dict[str, float] = {}
    for a, b in zip(rec, twin):
        if a.noise.kind not in ("gaussian", "laplace") or np.array_equal(a.centre, b.centre):
            continue
        diff = b.centre - a.centre
        shift = np.linalg.norm(diff, axis=1) if a.noise.kind == "gaussian" else np.abs(diff).sum(axis=1)
        r = float(shift.max()) / float(a.sensitivity)
        out[a.family] = max(out.get(a.family, 0.0), r)
    return out


def replay_losses(policy: PolicyLike, pair: JointPair, side: int, n: int, seed: np.random.SeedSequence) -> dict[str, np.ndarray]:
    """The privacy losses of ``n`` runs on side ``side`` of ``pair`` against the other side (replayed):
    ``loss``, ``mu2`` and ``moved`` (:func:`release_losses`), ``post`` (whether the replay's actions after
    the canary round equal the run's: they must, for actions that are post-processing of the releases) and
    ``excess`` (:func:`sensitivity_excess`)."""
    views, rec, twin_views, twin = replay_run(policy, pair, side, n, seed)
    loss, mu2, moved = release_losses(rec, twin, n)
    post = np.all(views[:, pair.round + 1:] == twin_views[:, pair.round + 1:], axis=1)
    return {"loss": loss, "mu2": mu2, "moved": moved, "post": post, "excess": sensitivity_excess(rec, twin, n)}


def screen_score(loss: np.ndarray, seed: int = 0) -> float:
    """How a candidate ranks on its pilot losses (a ranking only, never reported): the largest eps of the
    pilot's own grid whose delta(eps) lower bound on the pilot (error 0.5 over the grid) exceeds 1/n, the
    smallest delta n pilot runs resolve, and the mean loss (the KL divergence) to break ties."""
    loss = np.asarray(loss, dtype=float)
    if loss.size < 2 or not np.any(loss > 0):
        return 0.0
    grid = pilot_grid(loss, 64)
    u = np.random.default_rng(seed).random(loss.size)
    _, lo, _ = profile_bounds(loss, grid, u, 0.5 / grid.size)
    ok = lo > 1.0 / loss.size
    return float(grid[ok].max() if ok.any() else 0.0) + 1e-6 * float(max(loss.mean(), 0.0))


def joint_likelihood_attack(source: Source, candidates: Sequence[tuple[int, int]], pilots: Sequence[np.ndarray],
                            seed: np.random.SeedSequence, *, delta: float, confidence: float, n_runs: int,
                            claim: Guarantee | None = None, orders: Sequence[float] = DEFAULT_ORDERS, name: str = "tree-likelihood",
                            engine: Engine = SERIAL, progress: Callable[[str], None] | None = None) -> AuditResult:
    """The joint gray-box attack (module docstring) over ``candidates`` (candidate pair, sampled side) of
    ``source`` (whose ``sample`` returns :func:`replay_losses`' dict): the candidate whose ``pilots`` losses
    rank first (:func:`screen_score`) is sampled on ``n_runs`` fresh runs and bounded by
    :func:`~dpaudit.attacks.likelihood.loss_bounds` (an order statistic, no grid; the pilot losses only place
    the displayed profile band, :func:`~dpaudit.attacks.likelihood.pilot_grid`); the pilots only choose, so the
    bound needs no correction for the choice. Every fresh run counts (no early stop): the bound is the one
    its full sample shows."""
    if len(pilots) != len(candidates) or not candidates:
        raise InternalError(f"{name} got {len(pilots)} pilot samples for {len(candidates)} candidates")
    t0 = time.perf_counter()
    scores = [screen_score(p) for p in pilots]
    i = int(np.argmax(scores))
    c, side = candidates[i]
    grid = pilot_grid(np.asarray(pilots[i], dtype=float))
    s_runs, s_u = seed.spawn(2)
    if progress is not None:
        progress(f"{name}: {n_runs} fresh runs and their replays")
    got = draw(source, c, side, int(n_runs), s_runs, engine)
    loss = got["loss"]
    u = np.random.default_rng(s_u).random(loss.size)
    lb = loss_bounds(loss, u, delta=delta, confidence=confidence, orders=orders, claim=claim, grid=grid)
    eps = lb.epsilon_lower
    b = {**lb.details(), "mean_loss_kl": float(loss.mean()), "max_loss": float(loss.max())}
    desc = source.describe(c)
    mu2 = got["mu2"]
    excess = np.asarray(got.get("excess", np.zeros(0)), dtype=float)
    return AuditResult(name, eps, delta, confidence,
                       {"label": desc.get("label", ""), "pair": desc, "sampled": "d" if side == 0 else "d'",
                        "statistic": "exact privacy loss of every release (replayed)"},
                       samples=int(sum(p.size for p in pilots)) + 2 * loss.size, seconds=time.perf_counter() - t0,
                       details={**b, "candidates": [{"pair": int(cc), "sampled": "d" if s == 0 else "d'",
                                                     "score": float(sc)} for (cc, s), sc in zip(candidates, scores)],
                                "n_fresh": int(loss.size), "pilot_runs": int(sum(p.size for p in pilots)),
                                "mu2_mean": float(mu2.mean()), "mu2_min": float(mu2.min()),
                                "mu2_max": float(mu2.max()),
                                "releases_moved_max": int(got["moved"].max(initial=0)),
                                "views_not_post_processing": int(np.count_nonzero(~got["post"])),
                                "sensitivity_excess_max": float(excess.max(initial=0.0)),
                                "sensitivity_excess_runs": int(np.count_nonzero(excess > 1 + 1e-9))})
