"""The probe run before an audit: one copy of the class driven for a few rounds with rewards that are
never arm numbers (a swapped argument order fails there, and the order that runs is named), twice
with its generators seeded alike (randomness the adapter cannot seed is refused), and what moved
although it was redirected (reached another way: "swap"). :class:`Probe` runs it (cached per
class and options), :func:`probe_notes` says what it found, :func:`fingerprint` compares two copies'
states."""

from __future__ import annotations

import inspect
import random as _pyrandom
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TypeAlias, Union, cast

import numpy as np

from dpaudit.adapters.arguments import call_values
from dpaudit.adapters.seeding import (NP_INST, SEED_NAMES, Gen, Globals, ModuleGen, gen_state, generators_kept,
                                      same_state, unseedable_module_generators)
from dpaudit.adapters.shape import Shape
from dpaudit.errors import DPAuditError

__all__ = ["Probe", "ProbeRun", "ProbeFindings", "probe_notes", "fingerprint"]

#: one entry of a copy's :func:`fingerprint`: a number or text as it is (a float by its hex), an array as (shape,
#: dtype, bytes), a generator by the repr of its state
Print: TypeAlias = Union[None, bool, int, str, bytes, tuple[tuple[int, ...], str, bytes]]


@dataclass
class ProbeRun:
    """One copy driven by the probe (:meth:`Probe.run`): the arms it chose, its state's :func:`fingerprint`
    (``print``), the global and module-level generators it drew from (``used``, by label) and those that moved
    although redirected (``moved``), the seconds its calls took, and a note on state two such runs left
    different (:meth:`Probe.check_repeat`)."""

    arms: list[int]
    print: dict[str, Print]
    moved: list[str]
    used: dict[str, bool]
    seconds: float
    state_note: str | None = None


@dataclass(frozen=True)
class ProbeFindings:
    """What the probe found for a class (:meth:`Probe.find`): the rewards that ran (``values``), the mode that keeps
    each generator apart (np.random's, random's, each module-level one's), what the copy drew from, the note on
    its state, and the seconds one copy took per round."""

    values: tuple[float, ...]
    np_mode: str
    py_mode: str
    mg_modes: list[str]
    used: dict[str, bool]
    state_note: str | None
    seconds_per_step: float


#: the probe's findings for a class, parameters and options (an audit builds the policy many times)
_PROBE_CACHE: dict[Hashable, ProbeFindings] = {}


def fingerprint(obj: object) -> dict[str, Print]:
    """What a copy's state holds, by attribute path (numbers, arrays, text; generators by their state),
    to compare two copies built and driven alike. Paths to generator states end in ``<rng>``."""
    out: dict[str, Print] = {}
    seen: set[int] = set()

    def walk(x: object, path: str, depth: int) -> None:
        if len(out) > 4000 or depth > 5:
            return
        if isinstance(x, (bool, int, str, bytes, type(None))):
            out[path] = x
        elif isinstance(x, float):
            out[path] = x.hex()
        elif isinstance(x, np.generic):
            out[path] = repr(x.item())
        elif isinstance(x, np.ndarray):
            if x.dtype.kind in "biufcSU":
                out[path] = (x.shape, x.dtype.str, x.tobytes())
            else:
                for j, v in enumerate(x.ravel()[:200]):
                    walk(v, f"{path}[{j}]", depth + 1)
        elif isinstance(x, np.random.Generator):
            out[path + "<rng>"] = repr(x.bit_generator.state)
        elif isinstance(x, np.random.RandomState):
            out[path + "<rng>"] = repr(x.get_state(legacy=False))
        elif isinstance(x, _pyrandom.Random) and not isinstance(x, _pyrandom.SystemRandom):
            out[path + "<rng>"] = repr(x.getstate())
        elif id(x) in seen or callable(x) or inspect.ismodule(x):
            return
        elif isinstance(x, (list, tuple)):
            seen.add(id(x))
            for j, v in enumerate(x[:1000]):
                walk(v, f"{path}[{j}]", depth + 1)
        elif isinstance(x, dict):
            seen.add(id(x))
            for k, v in list(x.items())[:1000]:
                walk(v, f"{path}[{k!r}]", depth + 1)
        elif hasattr(x, "__dict__"):
            seen.add(id(x))
            for k, v in list(vars(x).items()):
                walk(v, f"{path}.{k}" if path else k, depth + 1)

    walk(obj, "", 0)
    return out


@dataclass
class Probe:
    """The probe of one class with its parameters and options (see :meth:`find`): how to build a copy
    from a seed (``build``), call one of its methods at a round (``call``: ``fn, args, kw, t``, a failure
    worded by the adapter) and check the arm it returns (``one_arm``: ``value, t, copy``), the shape
    and round origin it is driven with, ``steps`` rounds, the rewards' range and alphabet, the modules
    whose generators are redirected, and the class's name for errors (``who``)."""

    cls: Callable[..., object]
    kwargs: dict[str, object]
    shape: Shape
    first_round: int
    steps: int
    reward_range: tuple[float, float]
    alphabet: tuple[float, ...] | None
    modules: tuple[str, ...]
    who: str
    build: Callable[[int | None], object]
    call: Callable[[Callable[..., object], tuple[object, ...], dict[str, object], int], object]
    one_arm: Callable[[object, int, int], int]

    def values(self, kind: str) -> tuple[float, ...]:
        """The probe's rewards: the alphabet; else ``kind`` "fraction": values inside the range that are
        not whole numbers (so not arm numbers), or "ends": the range's ends."""
        if self.alphabet is not None:
            return tuple(float(v) for v in self.alphabet)
        lo, hi = self.reward_range
        if kind == "fraction":
            vals = tuple(v for v in (lo + (hi - lo) * q for q in (0.5, 0.25, 0.75, 0.375, 0.625))
                         if not float(v).is_integer())
            if vals:
                return vals
        return (lo, hi)

    def find(self, modgens: list[ModuleGen]) -> ProbeFindings:
        """Check the calls and how to keep each copy's randomness apart (cached per class and options).

        1. One copy built with a fixed seed is driven for ``steps`` rounds with rewards that are
           not arm numbers (:meth:`values`); if a call fails, the range's ends are tried, and if
           those fail too, the other argument orders and round origins: one that runs is named in
           the error (never adopted silently).
        2. A second copy built and driven alike, its global and module-level generators seeded alike,
           must choose the same arms and end with the same generator states (else: randomness the
           adapter cannot seed, refused); other state that differs gets a note.
        3. A hidden global instance, or a module-level generator object, that moved although its
           module functions and names were redirected per copy is reached another way: "swap".
        """
        key: Hashable | None = (self.cls, repr(sorted(self.kwargs.items())), self.shape, self.first_round, self.steps,
                    self.reward_range, self.alphabet, tuple(m.spec() for m in modgens), self.modules)
        try:
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in _PROBE_CACHE:
            return _PROBE_CACHE[key]
        attempts = list(dict.fromkeys([self.values("fraction"), self.values("ends")]))
        first: ProbeRun | DPAuditError | None = None
        values = attempts[0]
        for vals in attempts:
            res = self.run(self.shape, self.first_round, vals, modgens)
            if not isinstance(res, DPAuditError):
                first, values = res, vals
                break
            first = first if first is not None else res
        if isinstance(first, DPAuditError):
            for vals in attempts:
                fix = self.find_fix(vals, modgens)
                if fix is not None:
                    base = getattr(first, "base", str(first).rstrip("."))
                    raise DPAuditError(f"{base}; it runs when called as {fix[0]}: add {fix[1]} (--adapter "
                                       f"per-run:{fix[1]}, or PerRun(..., {fix[2]})).") from None
            raise first
        first = cast(ProbeRun, first)  # the loop ran at least once, and did not fail
        second = self.run(self.shape, self.first_round, values, modgens)
        if isinstance(second, DPAuditError):  # the same calls failed the second time: not reproducible
            raise second
        self.check_repeat(first, second, modgens)
        moved = set(first.moved) | set(second.moved)
        out = ProbeFindings(
            values=values,
            np_mode="swap" if "np.random" in moved else "redirect",
            py_mode="swap" if "random" in moved else "redirect",
            mg_modes=["swap" if m.label() in moved else "replace" for m in modgens],
            used={**first.used, **{k: True for k in moved}},  # what moved was drawn from, if not redirected
            state_note=first.state_note,
            seconds_per_step=first.seconds / max(1, self.steps),
        )
        if key is not None:
            if len(_PROBE_CACHE) > 256:
                _PROBE_CACHE.clear()
            _PROBE_CACHE[key] = out
        return out

    def find_fix(self, values: tuple[float, ...], modgens: list[ModuleGen]) -> tuple[str, str, str] | None:
        """Another argument order or round origin under which the probe runs: (the call as rendered,
        the adapter options, the PerRun keywords), or None."""
        s = self.shape
        origins = [self.first_round] + ([1 - self.first_round] if self.first_round in (0, 1) else [])
        positional = all(k is None for k, _ in s.args)
        orders = [s.args] + ([tuple((None, t) for t in p) for p in _permutations([t for _, t in s.args])
                             if tuple((None, t) for t in p) != s.args] if positional else [])
        for args in orders:
            for fr in origins:
                if args == s.args and fr == self.first_round:
                    continue
                alt = Shape(s.kind, s.select, s.select_t, s.feedback, args, "given")
                if not isinstance(self.run(alt, fr, values, modgens), DPAuditError):
                    opts, kws = [], []
                    if args != s.args:
                        toks = ",".join(t for _, t in args)
                        opts.append(f"{s.key()}={toks}")
                        kws.append(f"{s.key()}='{toks}'")
                    if fr != self.first_round:
                        opts.append(f"first_round={fr}")
                        kws.append(f"first_round={fr}")
                    call = alt.render() + (f" with rounds counted from {fr}" if fr != self.first_round else "")
                    return call, ",".join(opts), ", ".join(kws)
        return None

    def run(self, shape: Shape, first_round: int, values: tuple[float, ...],
            modgens: list[ModuleGen]) -> ProbeRun | DPAuditError:
        """One copy, built with a fixed seed and driven for ``steps`` rounds with every generator
        redirected per copy and seeded alike; the caller's generators are restored after. Returns its
        arms, state fingerprint, what it used and what moved, or the DPAuditError a call raised."""
        with generators_kept(modgens):
            g = Globals("redirect", "redirect", self.modules,
                        [m.spec()[:2] + ("replace", m.index) for m in modgens])
            g.seed_copies(np.array([20261122]))
            NP_INST.seed(20261122)
            _pyrandom.seed(20261122)
            for m in modgens:
                m.set(m.fresh_state(20261123))  # an original reached another way draws alike in both runs
            g.enter()
            try:
                g.select(0)
                obj = self.build(12345)
                t0 = time.perf_counter()
                try:
                    arms = self.drive(obj, shape, first_round, values)
                except DPAuditError as exc:
                    if not hasattr(exc, "base"):
                        raise  # not a call the adapter worded (an exit, a timeout): no other order can help
                    return exc
                seconds = time.perf_counter() - t0
            finally:
                moved = g.leave()
            used = {"np.random": g.target.np_gens[0] is not None, "random": g.target.py_gens[0] is not None}
            for m in g.modgens:
                c = m.copies[0]
                used[m.label()] = c is not None and not same_state(gen_state(cast(Gen, c), m.kind),  # replaced: a generator
                                                                   gen_state(m.fresh(20261122), m.kind))
        return ProbeRun(arms, fingerprint(obj), moved, used, seconds)

    def check_repeat(self, first: ProbeRun, second: ProbeRun, modgens: list[ModuleGen]) -> None:
        """Refuse randomness the adapter cannot seed (two copies made and driven alike differ)."""
        a, b = first.arms, second.arms
        pa, pb = first.print, second.print
        rng_diff = sorted(k for k in pa.keys() | pb.keys() if k.endswith("<rng>") and pa.get(k) != pb.get(k))
        detail = None
        if a != b:
            j = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
            detail = f"chose different arms from round {j} on (arm {a[j]} vs arm {b[j]})"
        elif rng_diff:
            detail = f"ended with different states of its generator {rng_diff[0][:-5] or 'itself'} (made without a seed)"
        if detail is not None:
            sysrand = unseedable_module_generators(self.modules)
            extra = (f"; its module-level {', '.join(sysrand)} {'is a' if len(sysrand) == 1 else 'are'} "
                     "random.SystemRandom, which nothing can seed") if sysrand else ""
            raise DPAuditError(
                f"{self.who} draws randomness the adapter cannot seed: two copies built with the same seed and the "
                f"same generator states {detail}{extra}; give its generator through a constructor parameter "
                f"({', '.join(SEED_NAMES)}) or draw from np.random, random or a generator made at module level.")
        other = sorted(k for k in pa.keys() | pb.keys() if pa.get(k) != pb.get(k))
        if other:
            first.state_note = (
                f"two copies of {self.who} built with the same seed chose the same arms in the adapter's probe but "
                f"ended with different values of {other[0]}: if that is randomness the adapter cannot seed (a "
                "generator seeded from the OS or the clock), its runs are not reproducible.")

    def drive(self, obj: object, shape: Shape, first_round: int, values: tuple[float, ...]) -> list[int]:
        """Drive ``obj`` for ``steps`` rounds as ``shape`` says, the rewards taken in turn from ``values`` but
        never equal to the arm just played; the arms it chose."""
        arms: list[int] = []
        fb = getattr(obj, shape.feedback)
        sel = getattr(obj, shape.select) if shape.kind == "select" else None
        last_arm: int | None = None
        last_reward: float | None = None
        for t in range(self.steps):
            tt = t + first_round
            if sel is None:
                args, kw = call_values(shape.args, last_arm, last_reward, tt)
                a = self.one_arm(self.call(fb, args, kw, t), t, 0)
            else:
                a = self.one_arm(self.call(sel, (tt,) if shape.select_t else (), {}, t), t, 0)
            j = (t * 7 + a) % len(values)
            r = next((values[(j + k) % len(values)] for k in range(len(values))
                      if values[(j + k) % len(values)] != a), values[j])  # never the arm just played
            if sel is not None:
                args, kw = call_values(shape.args, a, r, tt)
                self.call(fb, args, kw, t)
            last_arm, last_reward = a, r
            arms.append(a)
        return arms


def _permutations(toks: list[str]) -> list[tuple[str, ...]]:
    from itertools import permutations

    return list(permutations(toks))


def probe_notes(who: str, s: Shape, first_round: int, g: Globals, found: ProbeFindings, modgens: list[ModuleGen],
                mg_modes: list[str], forced: str | None) -> list[str]:
    """The adapter's notes for the findings (what it detected and did; nothing timed): ``who`` driven
    through ``s`` with rounds counted from ``first_round``, the generators ``g`` keeps apart in the
    modes chosen, what the probe ``found`` (``forced``: the globals_mode given, if any)."""
    notes: list[str] = []
    if s.how in ("names", "round-first", "partial", "guessed"):
        why = {"names": "the names of its parameters", "round-first": "its first parameter names the round",
               "partial": "the names of all its parameters but one, which receives the token left",
               "guessed": "guessed: its parameters' names name none of arm, reward and t"}[s.how]
        notes.append(f"{who} is driven through {s.render()} ({why}; {s.key()}= says otherwise), with rounds counted "
                     f"from {first_round}.")
    used = found.used
    for which, mode in (("np.random", g.np_mode), ("random", g.py_mode)):
        if used.get(which) and mode != "off":
            how = ("its functions redirected to it around the copy's calls" if mode == "redirect" else
                   "its state swapped in around each of the copy's calls" +
                   ("" if forced else ", since the class reaches the hidden global instance directly"))
            notes.append(f"{who} draws from the global {which}: each copy had its own generator, seeded from the "
                         f"audit's seed ({how}).")
    for m, mode in zip(modgens, mg_modes):
        if mode == "off":
            continue
        how = ("put in place of it around every call of that copy" if mode == "replace" else
               "its state swapped into that object around every call of that copy" +
               ("" if forced else ", since the class holds the object itself"))
        if used.get(m.label()):
            notes.append(f"{who} draws from the module-level generator {m.label()}: each copy got its own, seeded "
                         f"from the audit's seed and {how}.")
        else:
            notes.append(f"the module-level generator {m.label()} was kept apart per copy too (each copy's own, "
                         f"seeded from the audit's seed), although {who} did not draw from it in the probe.")
    if found.state_note:
        notes.append(found.state_note)
    return notes
