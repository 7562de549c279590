"""Auditing code written outside dpaudit: per-run classes, claims as text, horizons and reward inputs.

Most public bandit code is a *one-run* object (``select_arm()`` / ``update(arm, reward)``), often
drawing its noise from the global ``np.random`` or ``random`` generators or from a generator made at
import. :class:`PerRun` runs N copies of such a class (or of what a factory function returns) as a
batched policy (the plug-in contract of DESIGN.md: ``n_arms``, ``claim``, ``reset``, ``act``,
``observe``), so that it is audited unchanged: the feedback call's arguments in
whatever order the code takes them (:func:`parse_arg_map`, detected from parameter names where that
is safe, checked by a probe), every generator it can reach kept apart per copy, and, for a local-DP
class, its randomizer as the channel (:class:`LocalPerRun`).

The other pieces let an audit feed such code what it needs:

* :func:`parse_claim` -- the claim given on the command line (``--claim "pure:eps=1"``);
* :func:`horizon_parameter` -- the constructor parameter that receives the audit's horizon T,
  whatever the code calls it (:data:`HORIZON_NAMES`);
* :func:`reward_alphabet` and :func:`realise_means` -- inputs for a policy that accepts only some
  reward values (``{0, 1}``): each arm's column is a low-discrepancy sequence of alphabet values whose
  running mean tracks the arm's mean.

:func:`make_per_run` puts them together for the CLI's ``--adapter per-run[:KEY=VALUE,...]``
(:func:`parse_adapter`), and
:func:`build_policy` is what ``dpaudit check policy`` builds, with or without the adapter.

Which module holds what (each imports only the ones listed after it, as pyproject.toml's contract says):

* ``build`` -- :func:`build_policy`;
* ``options`` -- :func:`parse_adapter`, :data:`ADAPTER_OPTIONS`: ``--adapter`` as text;
* ``loop`` -- :class:`LoopPolicy`, :func:`make_loop`: code that runs its own loop (``--adapter loop``),
  each copy run to completion on its reward table; that code and the environment it is handed as
  Protocols (:class:`LoopFunction`, :class:`LoopEnvironment`);
* ``process`` -- :class:`ProcessPolicy`, :func:`make_process`: a policy in another process or language
  over the line-delimited JSON protocol ``dpaudit.process/1`` (``--adapter process``);
* ``per_run`` -- :class:`PerRun`, :class:`LocalPerRun` and :func:`make_per_run`: the adapter itself
  (building the copies, driving them each round, the local channel);
* ``probe`` -- the probe before an audit (``Probe``: the calls checked, a swapped argument order
  named, randomness the adapter cannot seed refused) and the notes it leaves in the findings;
* ``shape`` -- which methods drive a copy (``Shape``, :data:`SELECT_NAMES`, :data:`UPDATE_NAMES`; the
  shapes under their usual names as Protocols a user may type a class against: :class:`SelectsArm`,
  :class:`SelectsArmAtRound`, :class:`Steps`), its number of arms (:data:`N_ARMS_NAMES`), an arm it
  returned, checked;
* ``arguments`` -- the feedback (or step) call's arguments: :data:`ARG_TOKENS`, :data:`ARG_NAMES`,
  :func:`parse_arg_map`, the order read from parameter names, the values of a call;
* ``seeding`` -- each copy's generators kept apart: the global ``np.random`` / ``random`` redirected
  or swapped (``Globals``), module-level generators (:func:`find_module_generators`), the seed
  parameters (:data:`SEED_NAMES`), the caller's generators kept;
* ``claims`` -- :func:`parse_claim`, :data:`CLAIM_FORMS`;
* ``horizon`` -- :data:`HORIZON_NAMES`, :func:`horizon_parameter`;
* ``rewards`` -- :func:`reward_alphabet`, :func:`realise_means`.

The names below are importable from ``dpaudit.adapters`` itself, as they were when it was one module.
"""

from __future__ import annotations

from dpaudit.adapters.arguments import ARG_NAMES, ARG_TOKENS, parse_arg_map
from dpaudit.adapters.build import build_policy
from dpaudit.adapters.claims import CLAIM_FORMS, parse_claim
from dpaudit.adapters.horizon import HORIZON_NAMES, horizon_parameter
from dpaudit.adapters.options import ADAPTER_OPTIONS, parse_adapter
from dpaudit.adapters.loop import LoopEnvironment, LoopFunction, LoopPolicy, make_loop
from dpaudit.adapters.per_run import LocalPerRun, PerRun, make_per_run
from dpaudit.adapters.process import ProcessPolicy, make_process
from dpaudit.adapters.rewards import realise_means, reward_alphabet
from dpaudit.adapters.seeding import SEED_NAMES, find_module_generators
from dpaudit.adapters.shape import N_ARMS_NAMES, SELECT_NAMES, UPDATE_NAMES, SelectsArm, SelectsArmAtRound, Steps

# public names outside __all__, importable from here too
from dpaudit.adapters.arguments import ArgMap as ArgMap
from dpaudit.adapters.options import ADAPTER_SYNTAX as ADAPTER_SYNTAX
from dpaudit.adapters.options import LIST_OPTIONS as LIST_OPTIONS
from dpaudit.adapters.seeding import unseedable_module_generators as unseedable_module_generators

__all__ = [
    "HORIZON_NAMES",
    "N_ARMS_NAMES",
    "SELECT_NAMES",
    "UPDATE_NAMES",
    "SelectsArm",
    "SelectsArmAtRound",
    "Steps",
    "SEED_NAMES",
    "CLAIM_FORMS",
    "parse_claim",
    "horizon_parameter",
    "reward_alphabet",
    "realise_means",
    "ARG_TOKENS",
    "ARG_NAMES",
    "parse_arg_map",
    "find_module_generators",
    "PerRun",
    "LocalPerRun",
    "ADAPTER_OPTIONS",
    "parse_adapter",
    "make_per_run",
    "LoopPolicy",
    "LoopFunction",
    "LoopEnvironment",
    "make_loop",
    "ProcessPolicy",
    "make_process",
    "build_policy",
]
