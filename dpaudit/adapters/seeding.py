"""Each copy's randomness kept apart: the global ``np.random`` and ``random`` generators redirected
(or their state swapped in) per copy, generator objects made at module level in the class's modules
found (:func:`find_module_generators`) and replaced or swapped per copy, and the caller's generators
kept as they were.

:class:`Globals` holds one adapter's per-copy generators and their modes; :data:`GLOBAL_LOCK` is held
while any adapter swaps the process-wide generators; :func:`moved_message` is the sentence for a draw
that escaped all of it, naming the option that fixes it.
"""

from __future__ import annotations

import random as _pyrandom
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TypeAlias, Union, cast

import numpy as np
import numpy.typing as npt

__all__ = ["SEED_NAMES", "GLOBAL_LOCK", "NP_INST", "PY_INST", "Globals", "ModuleGen", "find_module_generators",
           "unseedable_module_generators", "generators_kept", "moved_message", "same_state", "gen_state"]

#: constructor parameters through which each copy gets its own seed
SEED_NAMES = ("seed", "random_state", "rng")

#: a generator object kept apart per copy: numpy's Generator or RandomState, or a ``random.Random``
Gen: TypeAlias = Union[np.random.Generator, np.random.RandomState, _pyrandom.Random]
#: the state of one: a bit generator's or RandomState's dict, a ``random.Random``'s tuple
GenState: TypeAlias = Union[Mapping[str, object], tuple[object, ...]]
#: numpy's legacy state of a RandomState: ("MT19937", keys, pos, has_gauss, cached_gaussian)
NPState: TypeAlias = tuple[str, np.ndarray, int, int, float]
#: a module's namespace (its globals) and a name bound in it
Place: TypeAlias = tuple[dict[str, object], str]
#: the places of one redirected function, by its name; per generator ("np", "py")
Slots: TypeAlias = dict[str, dict[str, list[Place]]]
#: a module-level generator as :meth:`ModuleGen.spec` gives it: its (module, name) places, kind, mode, index
ModuleGenSpec: TypeAlias = tuple[tuple[tuple[str, str], ...], str, str, int]
#: :class:`Globals` as :meth:`Globals.spec` gives it: its modes, modules and module-level generators
GlobalsSpec: TypeAlias = tuple[str, str, tuple[str, ...], tuple[ModuleGenSpec, ...]]

# the global generators are process-wide: one adapter at a time swaps them (threads then wait)
GLOBAL_LOCK = threading.RLock()


def _np_state_changed(before: NPState, after: NPState) -> bool:
    return before[2] != after[2] or before[3] != after[3] or not np.array_equal(before[1], after[1])


def same_state(a: object, b: object) -> bool:
    """Equality of generator states (dicts, tuples, arrays, numbers)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(cast("npt.ArrayLike", a), cast("npt.ArrayLike", b)))
    return bool(a == b)


def gen_state(obj: Gen, kind: str) -> GenState:
    """The state of a generator object of ``kind`` ("generator", "randomstate" or "random")."""
    if kind == "generator":
        return cast(np.random.Generator, obj).bit_generator.state
    if kind == "randomstate":
        return cast(np.random.RandomState, obj).get_state(legacy=False)
    return cast(_pyrandom.Random, obj).getstate()


# The module-level functions of the two global generators: bound methods of one hidden instance each.
NP_INST = np.random.mtrand._rand
PY_INST = _pyrandom._inst
_NP_NAMES = tuple(n for n in dir(np.random)
                  if not n.startswith("_") and getattr(getattr(np.random, n), "__self__", None) is NP_INST) + (
    ("seed",) if hasattr(np.random, "seed") else ())  # np.random.seed is a module function, not a bound method
_NP_SEED = getattr(np.random, "seed", None)
_PY_NAMES = tuple(n for n in dir(_pyrandom)
                  if not n.startswith("_") and getattr(getattr(_pyrandom, n), "__self__", None) is PY_INST)


class _Target:
    """Which copy's generators the redirected module functions currently call: copy ``i``'s, built on
    its first use from its seed (code that draws rarely, or never before the horizon, pays nothing).

    Copy i's numpy generator is ``RandomState(PCG64(seed_i))``: numpy's legacy distributions, as
    ``np.random.*`` computes them, on a bit generator that takes ~30 us to build where MT19937 takes
    ~300 us. Calls that need MT19937 get it: ``np.random.seed(s)`` gives the copy ``RandomState(s)``
    (exactly the stream ``np.random.seed(s)`` gives the global generator), and ``get_state`` /
    ``set_state`` first move the copy to an MT19937 generator seeded from its own stream.
    """

    def __init__(self) -> None:
        self.i = 0
        self.seeds: list[int] = []
        #: copy i's generator behind np.random's (random's) functions, redirected; its saved state, swapped; None
        #: until its first draw
        self.np_gens: list[np.random.RandomState | NPState | None] = []
        self.py_gens: list[_pyrandom.Random | tuple[object, ...] | None] = []
        #: while one copy runs whole (:meth:`Globals.pin`): per generator ("np", "py"), the places (namespace, name)
        #: of each redirected function, bound straight to the copy's generator at its first call; None: redirect
        self.pins: Slots | None = None
        #: the (generator, function) pairs bound straight for the current copy
        self.bound: set[tuple[str, str]] = set()

    def bind(self, which: str, name: str, gen: np.random.RandomState | _pyrandom.Random) -> None:
        """Pinned: the redirected function ``name`` of ``which`` ("np" or "py") becomes ``gen``'s own bound method
        in every place it was redirected, so its later draws cost what the generator's method costs."""
        places = self.pins[which].get(name) if self.pins is not None else None
        if places and (which, name) not in self.bound:
            method = getattr(gen, name)
            for ns, key in places:
                ns[key] = method
            self.bound.add((which, name))

    def rebind(self, which: str, gen: np.random.RandomState | _pyrandom.Random) -> None:
        """Pinned: the functions already bound straight follow the copy's generator when it is replaced."""
        if self.pins is not None:
            names = {n for w, n in self.bound if w == which}
            self.bound -= {(which, n) for n in names}
            for name in names:
                self.bind(which, name, gen)

    def np_gen(self) -> np.random.RandomState:
        g = self.np_gens[self.i]
        if g is None:
            g = self.np_gens[self.i] = np.random.RandomState(np.random.PCG64(self.seeds[self.i]))
        return cast(np.random.RandomState, g)  # redirected: a generator, never a saved state

    def np_mt(self) -> np.random.RandomState:
        g = self.np_gen()
        if not isinstance(g._bit_generator, np.random.MT19937):
            g = self.np_gens[self.i] = np.random.RandomState(int(g.randint(0, 1 << 32, dtype=np.uint64)))
            self.rebind("np", g)
        return g

    def np_seed(self, *args: object, **kwargs: object) -> None:
        """``np.random.seed(...)`` for the current copy: its generator becomes ``RandomState(...)``."""
        g = self.np_gens[self.i] = np.random.RandomState(*args, **kwargs)  # type: ignore[arg-type]  # numpy checks
        self.rebind("np", g)

    def py_gen(self) -> _pyrandom.Random:
        g = self.py_gens[self.i]
        if g is None:
            g = self.py_gens[self.i] = _pyrandom.Random(self.seeds[self.i])
        return cast(_pyrandom.Random, g)  # redirected: a generator, never a saved state


def _redirector(target: _Target, which: str, name: str) -> Callable[..., object]:
    """The function put in place of the module function ``name`` of ``which`` ("np" or "py"): the same call on
    the current copy's own generator."""
    if which == "np" and name == "seed":
        return target.np_seed
    gen: Callable[[], np.random.RandomState | _pyrandom.Random]
    gen = target.py_gen if which == "py" else target.np_mt if name in ("get_state", "set_state") else target.np_gen

    def call(*args: object, **kwargs: object) -> object:
        g = gen()
        if target.pins is not None:  # a whole run of one copy: its later calls skip this function
            target.bind(which, name, g)
        return getattr(g, name)(*args, **kwargs)

    call.__name__ = name
    return call


_GEN_KINDS = {"generator": "a numpy Generator", "randomstate": "a numpy RandomState", "random": "a random.Random"}


class ModuleGen:
    """A generator object bound at module level in the class's modules (``rng = np.random.default_rng()``
    made at import), kept apart per copy.

    ``"replace"`` (the default): around copy i's calls, the module's name is bound to copy i's own
    generator (``Generator(PCG64(...))``, ``RandomState(PCG64(...))`` or a ``random.Random`` of the
    original's type, seeded from the copy's seed), built on the copy's first call; code that looks
    the name up when it draws, or keeps what it found when the copy was built, draws from its copy's
    generator. ``"swap"``: the original object's state is set to copy i's around its calls and saved
    after them (for code that holds the original some other way). ``"off"``: left alone.
    """

    def __init__(self, places: tuple[tuple[str, str], ...], kind: str, mode: str = "replace", index: int = 0) -> None:
        self.places, self.kind, self.mode, self.index = places, kind, mode, index
        #: copy i's own generator (replace mode) or saved state (swap mode), None until its first call
        self.copies: list[Gen | GenState | None] = []
        self.spaces: list[dict[str, object]] = []
        self.saved: GenState | None = None
        mod, attr = places[0]
        #: the object the module binds (None once its module is gone: such a generator is not kept apart)
        self.original: Gen | None = vars(sys.modules[mod]).get(attr) if mod in sys.modules else None

    def spec(self) -> ModuleGenSpec:
        return (self.places, self.kind, self.mode, self.index)

    def label(self) -> str:
        mod, attr = self.places[0]
        m = sys.modules.get(mod)
        where = getattr(m, "__file__", None) or mod
        if where != mod:
            import os

            rel = os.path.relpath(where)
            where = rel if not rel.startswith("..") else where
        return f"{attr} of {where} ({_GEN_KINDS[self.kind]})"

    def get(self) -> GenState:
        """The original object's state."""
        return gen_state(cast(Gen, self.original), self.kind)

    def set(self, state: GenState) -> None:
        """Put ``state`` (one of :meth:`get`'s, or :meth:`fresh_state`'s) into the original object."""
        o = self.original
        if self.kind == "generator":
            cast(np.random.Generator, o).bit_generator.state = cast(Mapping[str, object], state)
        elif self.kind == "randomstate":
            cast(np.random.RandomState, o).set_state(cast("dict[str, object]", state))
        else:
            cast(_pyrandom.Random, o).setstate(cast("tuple[object, ...]", state))

    def _seq(self, seed: int) -> np.random.SeedSequence:
        return np.random.SeedSequence([int(seed), 0x6D6F64, self.index])

    def fresh(self, seed: int) -> Gen:
        """Copy ``seed``'s own generator (replace mode)."""
        ss = self._seq(seed)
        if self.kind == "generator":
            return np.random.Generator(np.random.PCG64(ss))
        if self.kind == "randomstate":
            return np.random.RandomState(np.random.PCG64(ss))
        s = int(ss.generate_state(1, np.uint64)[0])
        try:
            return type(cast(_pyrandom.Random, self.original))(s)
        except Exception:
            return _pyrandom.Random(s)

    def fresh_state(self, seed: int) -> GenState:
        """Copy ``seed``'s state for the original object (swap mode)."""
        ss = self._seq(seed)
        o = self.original
        if self.kind == "generator":
            return type(cast(np.random.Generator, o).bit_generator)(ss).state
        if self.kind == "randomstate":
            return np.random.RandomState(type(cast(np.random.RandomState, o)._bit_generator)(ss)).get_state(legacy=False)
        return _pyrandom.Random(int(ss.generate_state(1, np.uint64)[0])).getstate()


def find_module_generators(modules: Sequence[str]) -> list[ModuleGen]:
    """The numpy Generators and RandomStates and ``random.Random`` objects bound at module level in
    ``modules`` (not the hidden global instances, which the np.random / random handling covers, nor a
    ``random.SystemRandom``, which nothing can seed), one entry per object with every name it has."""
    found: dict[int, tuple[list[tuple[str, str]], str]] = {}
    for name in modules:
        mod = sys.modules.get(name)
        if mod is None or name in ("numpy.random", "random"):
            continue
        for attr, val in list(vars(mod).items()):
            if isinstance(val, np.random.Generator):
                kind = "generator"
            elif isinstance(val, np.random.RandomState) and val is not NP_INST:
                kind = "randomstate"
            elif isinstance(val, _pyrandom.Random) and val is not PY_INST and not isinstance(val, _pyrandom.SystemRandom):
                kind = "random"
            else:
                continue
            found.setdefault(id(val), ([], kind))[0].append((name, attr))
    return [ModuleGen(tuple(places), kind, index=k) for k, (places, kind) in enumerate(found.values())]


def unseedable_module_generators(modules: Sequence[str]) -> list[str]:
    """``random.SystemRandom`` objects bound at module level in ``modules`` (named for the refusal)."""
    out = []
    for name in modules:
        mod = sys.modules.get(name)
        for attr, val in list(vars(mod).items()) if mod is not None else []:
            if isinstance(val, _pyrandom.SystemRandom):
                out.append(attr)
    return out


class Globals:
    """Per-copy states of the global generators, one mode per generator.

    ``"off"``: left alone. ``"redirect"`` (the default, cheap even for code that never draws): while
    the copies run, the module's functions (``np.random.laplace``, ``random.random``, ...: the bound
    methods of the hidden global instance) are replaced by functions that call the current copy's own
    ``RandomState`` / ``random.Random``, built on its first draw; switching copies is one attribute
    store. The same goes for those functions imported into the class's modules (``from numpy.random
    import laplace``), found in the globals of the modules that define the class and its bases.
    ``"swap"`` (for code that reaches the hidden instance some other way, e.g. a bound method kept in
    a class attribute): each copy's saved state is swapped in with ``set_state``/``setstate`` around
    its call and saved after it (about 40 us each way for numpy, so ~100x slower). Module-level
    generator objects of the class's modules are kept apart per copy too (:class:`ModuleGen`). In
    every mode the caller's generators end as they began.
    Copy i's generators come from its seed: ``RandomState(PCG64(seed_i))`` (see :class:`_Target`)
    or, swapped, the state of ``RandomState(seed_i)``; ``random.Random(seed_i)`` (or its state).
    """

    def __init__(self, np_mode: str, py_mode: str, modules: tuple[str, ...] = (),
                 modgens: Sequence[ModuleGenSpec] = ()) -> None:
        self.np_mode, self.py_mode = np_mode, py_mode
        self.modules = modules  # names of the modules whose globals may hold imported generator functions
        self.modgens = [ModuleGen(*spec) for spec in modgens]
        self.modgens = [m for m in self.modgens if m.mode != "off" and m.original is not None]
        self.target = _Target()
        self.swaps = np_mode == "swap" or py_mode == "swap" or any(m.mode == "swap" for m in self.modgens)
        #: per replace-mode module generator: (its (namespace, name) places, the copies' objects, maker); set by enter
        self.binds: list[tuple[list[Place], list[Gen | GenState | None], Callable[[int], Gen]]] = []
        self.active = np_mode != "off" or py_mode != "off" or bool(self.modgens)
        self._patched: list[tuple[dict[str, object], str, object]] = []
        #: the redirected places per generator, (namespace, name, method name), that :meth:`pin` binds straight
        self._slots: Slots = {"np": {}, "py": {}}
        #: the hidden instances' states when the batch of calls began (:meth:`enter`)
        self._saved: tuple[NPState | None, tuple[object, ...] | None] = (None, None)
        self._redirectors = {which: {n: _redirector(self.target, which, n) for n in names}
                             for which, names in (("np", _NP_NAMES), ("py", _PY_NAMES))}

    def spec(self) -> GlobalsSpec:
        return (self.np_mode, self.py_mode, self.modules, tuple(m.spec() for m in self.modgens))

    def __reduce__(self) -> tuple[type[Globals], GlobalsSpec]:
        # pickled (to the engine's workers) as its modes only: the generators are rebuilt by reset()
        return (Globals, self.spec())

    def seed_copies(self, seeds: np.ndarray) -> None:
        """Copy i's generators come from ``seeds[i]`` (distinct); each is built on first use."""
        t = self.target
        t.seeds = [int(s) for s in seeds]
        t.np_gens = [None] * len(t.seeds)
        t.py_gens = [None] * len(t.seeds)
        for m in self.modgens:
            m.copies = [None] * len(t.seeds)

    def select(self, i: int) -> None:
        """Make copy ``i``'s generators the current ones."""
        t = self.target
        t.i = i
        if self.np_mode == "swap":
            st = cast("NPState | None", t.np_gens[i])  # swapped: a saved state
            NP_INST.set_state(st if st is not None else np.random.RandomState(t.seeds[i]).get_state())
        if self.py_mode == "swap":
            pst = cast("tuple[object, ...] | None", t.py_gens[i])
            PY_INST.setstate(pst if pst is not None else _pyrandom.Random(t.seeds[i]).getstate())
        for m in self.modgens:
            c = m.copies[i]
            if m.mode == "replace":
                if c is None:
                    c = m.copies[i] = m.fresh(t.seeds[i])
                for ns, (_, attr) in zip(m.spaces, m.places):
                    ns[attr] = c
            else:
                m.set(cast(GenState, c) if c is not None else m.fresh_state(t.seeds[i]))  # swapped: a saved state

    def save(self, i: int) -> None:
        """After copy ``i``'s call: keep its swapped states."""
        if self.np_mode == "swap":
            self.target.np_gens[i] = cast(NPState, NP_INST.get_state())
        if self.py_mode == "swap":
            self.target.py_gens[i] = PY_INST.getstate()
        for m in self.modgens:
            if m.mode == "swap":
                m.copies[i] = m.get()

    def enter(self) -> None:
        """Before a batch of calls: install the redirections, save what a swap overwrites, and note
        the hidden instances' states (to catch a class that bypasses the redirection)."""
        self._saved = (cast(NPState, NP_INST.get_state()), PY_INST.getstate())
        for m in self.modgens:
            m.spaces = [vars(sys.modules[mod]) for mod, _ in m.places]
            m.saved = m.get()
        self.binds = [([(ns, attr) for ns, (_, attr) in zip(m.spaces, m.places)], m.copies, m.fresh)
                      for m in self.modgens if m.mode == "replace"]
        on = {"np": self.np_mode == "redirect", "py": self.py_mode == "redirect"}
        self._slots = {"np": {}, "py": {}}
        for which, module, names in (("np", np.random, _NP_NAMES), ("py", _pyrandom, _PY_NAMES)):
            if on[which]:
                ns = vars(module)
                for n in names:
                    self._patched.append((ns, n, ns[n]))
                    ns[n] = self._redirectors[which][n]
                    self._slot(which, ns, n, n)
        for name in self.modules:
            ns = vars(sys.modules[name]) if name in sys.modules else {}
            for key, val in list(ns.items()):
                owner = getattr(val, "__self__", None)
                gen = "np" if owner is NP_INST or val is _NP_SEED else "py" if owner is PY_INST else None
                if gen is not None and on[gen]:
                    fn = "seed" if val is _NP_SEED else getattr(val, "__name__", "")
                    if fn in self._redirectors[gen]:
                        self._patched.append((ns, key, val))
                        ns[key] = self._redirectors[gen][fn]
                        self._slot(gen, ns, key, fn)

    #: numpy's functions that stay redirected when pinned: they replace the copy's generator or need MT19937
    _UNPINNED = frozenset({"seed", "get_state", "set_state"})

    def _slot(self, which: str, ns: dict[str, object], key: str, name: str) -> None:
        if not (which == "np" and name in self._UNPINNED):
            self._slots[which].setdefault(name, []).append((ns, key))

    def pin(self, i: int) -> None:
        """Make copy ``i``'s generators the current ones for a whole run of its calls (:meth:`PerRun.run_copies`,
        the loop adapter): as :meth:`select`, and each redirected draw function, at its first call in the run,
        bound straight to the copy's own generator in every place it was redirected, so that its later draws no
        longer go through a Python redirection (about 1.5 us a call). The same generators draw the same numbers:
        only the route to them changes. The cost is per copy and function drawn from, not per call;
        callers that switch copies call by call use :meth:`select`."""
        self.select(i)
        t = self.target
        for which, name in t.bound:  # the previous copy's bound methods go, the redirections come back
            for ns, key in self._slots[which][name]:
                ns[key] = self._redirectors[which][name]
        t.bound = set()
        t.pins = self._slots

    def leave(self) -> list[str]:
        """After a batch: undo the redirections and restore the caller's states. Returns what moved
        although it was not swapped (the class bypassed the redirection): "np.random", "random", or a
        module-level generator's label."""
        self.target.pins, self.target.bound = None, set()
        for ns, n, original in reversed(self._patched):
            ns[n] = original
        self._patched.clear()
        np_saved, py_saved = cast("tuple[NPState, tuple[object, ...]]", self._saved)  # set by enter
        moved = []
        if self.np_mode != "swap" and _np_state_changed(np_saved, cast(NPState, NP_INST.get_state())):
            moved.append("np.random")
        if self.py_mode != "swap" and py_saved != PY_INST.getstate():
            moved.append("random")
        NP_INST.set_state(np_saved)
        PY_INST.setstate(py_saved)
        for m in self.modgens:
            if m.mode == "replace":
                for ns, (_, attr) in zip(m.spaces, m.places):
                    ns[attr] = m.original
                if not same_state(m.get(), m.saved):
                    moved.append(m.label())
            m.set(cast(GenState, m.saved))  # set by enter
        return moved


@contextmanager
def generators_kept(modgens: Sequence[ModuleGen] = ()) -> Iterator[None]:
    """Hold :data:`GLOBAL_LOCK` and give the caller back the hidden global instances' states and those
    of ``modgens`` afterwards, whatever ran inside (building a copy may seed or draw from them)."""
    with GLOBAL_LOCK:
        np_saved, py_saved = NP_INST.get_state(), PY_INST.getstate()
        mg_saved = [m.get() for m in modgens]
        try:
            yield
        finally:
            NP_INST.set_state(np_saved)
            PY_INST.setstate(py_saved)
            for m, st in zip(modgens, mg_saved):
                m.set(st)


def moved_message(who: str, g: Globals, moved: list[str], when: str) -> str:
    """One sentence for a draw that was not kept apart per copy, naming the option that fixes it."""
    what = moved[0]
    if what in ("np.random", "random"):
        mode = g.np_mode if what == "np.random" else g.py_mode
        if mode == "off":
            return (f"{who} drew from the global {what} generator {when}, which the adapter was told to leave alone "
                    f"(globals=off), so its copies would share one stream; rerun without globals=off or with "
                    f"--adapter per-run:globals=redirect (PerRun(..., globals_mode='redirect')), which gives each "
                    f"copy its own generator behind {what}'s functions.")
        return (f"{who} drew from the global {what} generator {when} without going through {what}'s functions, "
                f"which the adapter redirects per copy (e.g. through a method of the hidden instance kept "
                "elsewhere), so its copies would share one stream; rerun with --adapter per-run:globals=swap "
                "(PerRun(..., globals_mode='swap')), which swaps each copy's state in around its calls (slower).")
    return (f"{who} drew from the module-level generator {what} {when} through a reference the adapter does not "
            "replace per copy, so its copies would share one stream; rerun with --adapter per-run:globals=swap "
            "(PerRun(..., globals_mode='swap')), which swaps each copy's state into that object around its calls.")
